/* Pre-tokenizer pattern lists per tokenizer.ggml.pre name
 * (rt/text/pretok_patterns.h). Non-ASCII characters are written as
 * \x{...} escapes so that the exact code points are visible. */
#include <stdio.h>
#include <string.h>

#include "rt/text/pretok_patterns.h"

/* GPT-2's ByteLevel regex (tokenizer.json "use_regex": true). */
#define GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* The same without the final \s+, as llama.cpp lists it for the families
 * that split more than once (whitespace it leaves is a piece of its own
 * either way). */
#define GPT2_NO_TAIL "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define CONTRACTIONS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define CJK_RUNS "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"

static const char *const llama3[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
static const char *const qwen2[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
static const char *const gpt2[] = {GPT2};
static const char *const deepseek_llm[] = {
    "[\\r\\n]",
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
    "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
    "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}"
    "\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}"
    "\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"
    "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}"
    "\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}"
    "\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}"
    "\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
    "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
    "\\s+$",
    CJK_RUNS,
    "\\p{N}+",
};
static const char *const deepseek_coder[] = {
    "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", CJK_RUNS, "\\p{N}",
};
static const char *const deepseek_v3[] = {
    "\\p{N}{1,3}",
    "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};
static const char *const falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    GPT2_NO_TAIL,
    "[0-9][0-9][0-9]",
};
static const char *const starcoder[] = {"\\p{N}", GPT2_NO_TAIL};
static const char *const poro[] = {
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"};
static const char *const viking[] = {
    " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+", "\\p{N}"};
static const char *const tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
static const char *const gpt4o[] = {
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
static const char *const chameleon[] = {
    "<sentinel:[0-9]+>",      "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",     "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]", GPT2_NO_TAIL,
};
static const char *const seed_coder[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"
                 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"};
/* Its tokenizer.json has possessive quantifiers; here (as in llama.cpp)
 * greedy ones, which split the same: nothing after them backtracks. */
static const char *const bailingmoe[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"};
static const char *const dflt[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    GPT2_NO_TAIL,
    "\\p{N}+",
    "[0-9][0-9][0-9]",
};

#define N(a) (unsigned)(sizeof(a) / sizeof((a)[0])), a
static const struct nib_pretok table[] = {
    {"default", N(dflt), 0},
    {"llama-bpe", N(llama3), 1},
    {"llama3", N(llama3), 1},
    {"llama-v3", N(llama3), 1},
    {"falcon3", N(llama3), 1},
    {"falcon-h1", N(llama3), 1},
    {"pixtral", N(llama3), 1},
    {"midm-2.0", N(llama3), 1},
    {"lfm2", N(llama3), 1},
    {"dbrx", N(llama3), 0},
    {"smaug-bpe", N(llama3), 0},
    {"chatglm-bpe", N(llama3), 0},
    {"glm4", N(llama3), 0},
    {"qwen2", N(qwen2), 0},
    {"deepseek-r1-qwen", N(qwen2), 0},
    {"kormo", N(qwen2), 0},
    {"megrez", N(qwen2), 0},
    {"stablelm2", N(qwen2), 0},
    {"hunyuan", N(qwen2), 0},
    {"grok-2", N(qwen2), 0},
    {"gpt-2", N(gpt2), 0},
    {"mpt", N(gpt2), 0},
    {"olmo", N(gpt2), 0},
    {"jais", N(gpt2), 0},
    {"trillion", N(gpt2), 0},
    {"granite-docling", N(gpt2), 0},
    {"phi-2", N(gpt2), 0},
    {"jina-es", N(gpt2), 0},
    {"jina-de", N(gpt2), 0},
    {"jina-v1-en", N(gpt2), 0},
    {"jina-v2-es", N(gpt2), 0},
    {"jina-v2-de", N(gpt2), 0},
    {"jina-v2-code", N(gpt2), 0},
    {"roberta-bpe", N(gpt2), 0},
    {"gigachat", N(gpt2), 0},
    {"a.x-4.0", N(gpt2), 0},
    {"mellum", N(gpt2), 0},
    {"exaone4", N(gpt2), 0},
    {"deepseek-llm", N(deepseek_llm), 0},
    {"deepseek-coder", N(deepseek_coder), 0},
    {"deepseek-v3", N(deepseek_v3), 0},
    {"hunyuan-dense", N(deepseek_v3), 0},
    {"falcon", N(falcon), 0},
    {"starcoder", N(starcoder), 0},
    {"refact", N(starcoder), 0},
    {"command-r", N(starcoder), 0},
    {"smollm", N(starcoder), 0},
    {"codeshell", N(starcoder), 0},
    {"exaone", N(starcoder), 0},
    {"minerva-7b", N(starcoder), 0},
    {"poro-chat", N(poro), 0},
    {"bloom", N(poro), 0},
    {"gpt3-finnish", N(poro), 0},
    {"viking", N(viking), 0},
    {"tekken", N(tekken), 1},
    {"gpt-4o", N(gpt4o), 0},
    {"llama4", N(gpt4o), 0},
    {"minimax-m2", N(gpt4o), 0},
    {"chameleon", N(chameleon), 0},
    {"seed-coder", N(seed_coder), 0},
    {"bailingmoe", N(bailingmoe), 0},
    {"bailingmoe2", N(bailingmoe), 0},
    {"llada-moe", N(bailingmoe), 0},
};

const struct nib_pretok *nib_pretok_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strlen(table[i].name) == len && !memcmp(table[i].name, name, len))
            return &table[i];
    return NULL;
}

const struct nib_pretok *nib_pretok_all(unsigned *count)
{
    *count = (unsigned)(sizeof table / sizeof table[0]);
    return table;
}

char *nib_pretok_names(char *buf, size_t cap)
{
    size_t w = 0;
    if (!cap)
        return buf;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        int k = snprintf(buf + w, cap - w, "%s%s", i ? ", " : "", table[i].name);
        if (k < 0 || (size_t)k >= cap - w) {
            if (cap >= 4)
                memcpy(buf + cap - 4, "...", 4);
            break;
        }
        w += (size_t)k;
    }
    return buf;
}
