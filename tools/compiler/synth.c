/* `nib synth SHAPE -o FILE.gguf`: random-weight LLaMA models of real shapes.
 *
 * The weights come from a counter-based generator: element i of tensor t is
 * a hash of (seed, t, i). Any chunk can therefore be produced from its offset
 * alone, so the file is streamed in bounded memory and its bytes do not
 * depend on chunk sizes or on how many threads fill them. */
#include "tools/compiler/synth.h"
#include "model_blob/blob_format.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/gguf_write.h"
#include "tools/compiler/hf_tokenizer.h"
#include "tools/compiler/llama_import.h"
#include "tools/compiler/synth_rand.h"
#include "tools/compiler/tok_spec.h"
#include "tools/util/args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- shapes ---- */

#define F16 GGML_TYPE_F16
#define F32 GGML_TYPE_F32

/* The real shapes' hyper-parameters are those of the published Hugging
 * Face config.json of each model (hidden_size, num_hidden_layers,
 * intermediate_size, attention and KV heads, head_dim, vocab_size,
 * max_position_embeddings, rope_theta and rope_scaling, rms_norm_eps,
 * soft-capping, sliding_window, tie_word_embeddings). LLAMA_SHAPE: the
 * original LLaMA shapes, llama's defaults for everything else. */
#define LLAMA_SHAPE(name_, dim_, layers_, ffn_, heads_, kv_, vocab_, ctx_, dtype_, tied_)          \
    {                                                                                              \
        .name = name_, .dim = dim_, .n_layers = layers_, .ffn = ffn_, .n_heads = heads_,           \
        .n_kv_heads = kv_, .vocab = vocab_, .ctx = ctx_, .dtype = dtype_, .tied = tied_            \
    }

static const struct nib_synth_shape shapes[] = {
    /*          name              dim   L    ffn heads kv  vocab   ctx  dtype */
    LLAMA_SHAPE("stories260k", 64, 5, 172, 8, 4, 512, 512, GGML_TYPE_F32, 0),
    LLAMA_SHAPE("stories15m", 288, 6, 768, 6, 6, 32000, 256, GGML_TYPE_F32, 0),
    LLAMA_SHAPE("tinyllama-1.1b", 2048, 22, 5632, 32, 4, 32000, 2048, GGML_TYPE_F16, 0),
    LLAMA_SHAPE("llama-3b", 3200, 26, 8640, 32, 32, 32000, 2048, GGML_TYPE_F16, 0),
    /* test shape: heads of 64 (attention quantizes its own heads in q4),
     * grouped-query, an FFN width (344) that ends in a partial block */
    LLAMA_SHAPE("test-hd64", 128, 2, 344, 2, 1, 512, 256, GGML_TYPE_F32, 0),
    /* HuggingFaceTB/SmolLM2-135M: llama, tied */
    {.name = "smollm2-135m",
     .dim = 576,
     .n_layers = 30,
     .ffn = 1536,
     .n_heads = 9,
     .n_kv_heads = 3,
     .vocab = 49152,
     .ctx = 8192,
     .dtype = F16,
     .tied = 1,
     .arch = LLAMA_ARCH_LLAMA,
     .rope_theta = 100000.0f,
     .norm_eps = 1e-5f,
     .random_norms = 1},
    /* Qwen/Qwen2.5-0.5B: Q/K/V biases, tied */
    {.name = "qwen2.5-0.5b",
     .dim = 896,
     .n_layers = 24,
     .ffn = 4864,
     .n_heads = 14,
     .n_kv_heads = 2,
     .vocab = 151936,
     .ctx = 32768,
     .dtype = F16,
     .tied = 1,
     .arch = LLAMA_ARCH_QWEN2,
     .rope_theta = 1000000.0f,
     .norm_eps = 1e-6f,
     .random_norms = 1},
    /* Qwen/Qwen3-0.6B: per-head Q/K norms, heads of 128 (not 1024 / 16), tied */
    {.name = "qwen3-0.6b",
     .dim = 1024,
     .n_layers = 28,
     .ffn = 3072,
     .n_heads = 16,
     .n_kv_heads = 8,
     .vocab = 151936,
     .ctx = 40960,
     .dtype = F16,
     .tied = 1,
     .arch = LLAMA_ARCH_QWEN3,
     .head_dim = 128,
     .rope_theta = 1000000.0f,
     .norm_eps = 1e-6f,
     .random_norms = 1},
    /* meta-llama/Llama-3.2-1B: Llama 3 RoPE scaling (factor 32 from 8192), tied */
    {.name = "llama3.2-1b",
     .dim = 2048,
     .n_layers = 16,
     .ffn = 8192,
     .n_heads = 32,
     .n_kv_heads = 8,
     .vocab = 128256,
     .ctx = 131072,
     .dtype = F16,
     .tied = 1,
     .arch = LLAMA_ARCH_LLAMA,
     .rope_theta = 500000.0f,
     .norm_eps = 1e-5f,
     .llama3_factor = 32.0f,
     .llama3_ctx = 8192,
     .random_norms = 1},
    /* microsoft/Phi-3-mini-4k-instruct: fused attn_qkv and gate|up */
    {.name = "phi3-mini",
     .dim = 3072,
     .n_layers = 32,
     .ffn = 8192,
     .n_heads = 32,
     .n_kv_heads = 32,
     .vocab = 32064,
     .ctx = 4096,
     .dtype = F16,
     .tied = 0,
     .arch = LLAMA_ARCH_PHI3,
     .rope_theta = 10000.0f,
     .norm_eps = 1e-5f,
     .window = 2047,
     .random_norms = 1},
    /* google/gemma-2-2b: heads of 256, soft-capping, sliding window 4096 on
     * even layers, GELU, post-norms, tied */
    {.name = "gemma2-2b",
     .dim = 2304,
     .n_layers = 26,
     .ffn = 9216,
     .n_heads = 8,
     .n_kv_heads = 4,
     .vocab = 256000,
     .ctx = 8192,
     .dtype = F16,
     .tied = 1,
     .arch = LLAMA_ARCH_GEMMA2,
     .head_dim = 256,
     .rope_theta = 10000.0f,
     .norm_eps = 1e-6f,
     .attn_softcap = 50.0f,
     .final_softcap = 30.0f,
     .window = 4096,
     .random_norms = 1},
    /* Small shapes of each architecture for unit tests (heads of 64). */
    {.name = "test-llama3",
     .dim = 128,
     .n_layers = 2,
     .ffn = 256,
     .n_heads = 2,
     .n_kv_heads = 1,
     .vocab = 512,
     .ctx = 256,
     .dtype = F32,
     .tied = 1,
     .arch = LLAMA_ARCH_LLAMA,
     .rope_theta = 500000.0f,
     .norm_eps = 1e-5f,
     .llama3_factor = 8.0f,
     .llama3_ctx = 64,
     .random_norms = 1},
    {.name = "test-qwen2",
     .dim = 128,
     .n_layers = 2,
     .ffn = 256,
     .n_heads = 2,
     .n_kv_heads = 1,
     .vocab = 512,
     .ctx = 256,
     .dtype = F32,
     .tied = 1,
     .arch = LLAMA_ARCH_QWEN2,
     .rope_theta = 1000000.0f,
     .norm_eps = 1e-6f,
     .random_norms = 1},
    {.name = "test-qwen3",
     .dim = 128,
     .n_layers = 2,
     .ffn = 256,
     .n_heads = 4,
     .n_kv_heads = 2,
     .vocab = 512,
     .ctx = 256,
     .dtype = F32,
     .tied = 1,
     .arch = LLAMA_ARCH_QWEN3,
     .head_dim = 64,
     .rope_theta = 1000000.0f,
     .norm_eps = 1e-6f,
     .random_norms = 1},
    {.name = "test-phi3",
     .dim = 128,
     .n_layers = 2,
     .ffn = 256,
     .n_heads = 2,
     .n_kv_heads = 2,
     .vocab = 512,
     .ctx = 256,
     .dtype = F32,
     .tied = 0,
     .arch = LLAMA_ARCH_PHI3,
     .rope_theta = 10000.0f,
     .norm_eps = 1e-5f,
     .random_norms = 1},
    /* sliding window 16 on layers 0 and 2, soft-caps small enough to bite */
    {.name = "test-gemma2",
     .dim = 128,
     .n_layers = 4,
     .ffn = 256,
     .n_heads = 4,
     .n_kv_heads = 2,
     .vocab = 512,
     .ctx = 256,
     .dtype = F32,
     .tied = 1,
     .arch = LLAMA_ARCH_GEMMA2,
     .head_dim = 64,
     .rope_theta = 10000.0f,
     .norm_eps = 1e-6f,
     .attn_softcap = 10.0f,
     .final_softcap = 5.0f,
     .window = 16,
     .random_norms = 1},
};

#undef F16
#undef F32

const struct nib_synth_shape nib_synth_vocab_shape =
    LLAMA_SHAPE("synth-vocab", 64, 2, 128, 4, 2, 0, 1024, GGML_TYPE_F16, 1);

const struct nib_synth_shape *nib_synth_shapes(size_t *n)
{
    *n = sizeof shapes / sizeof shapes[0];
    return shapes;
}

const struct nib_synth_shape *nib_synth_find(const char *name)
{
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (strcmp(shapes[i].name, name) == 0)
            return &shapes[i];
    return NULL;
}

uint32_t nib_synth_arch(const struct nib_synth_shape *s)
{
    return s->arch ? s->arch : LLAMA_ARCH_LLAMA;
}

static uint32_t head_dim(const struct nib_synth_shape *s)
{
    return s->head_dim ? s->head_dim : s->dim / s->n_heads;
}

/* The tensors of a model, in file order. Every shape's tensors come from
 * here, so counting, writing and seeding can never disagree; the original
 * LLaMA shapes keep their order (and so their bytes). */
enum {
    T_EMBD,
    T_OUT_NORM,
    T_OUT,
    T_ROPE_FREQS,
    T_ATTN_NORM,
    T_QKV, /* phi3: Q|K|V rows */
    T_Q,
    T_K,
    T_V,
    T_QB,
    T_KB,
    T_VB,
    T_QN,
    T_KN,
    T_O,
    T_POST_ATTN,
    T_FFN_NORM,
    T_GATE,
    T_UP, /* phi3: gate|up rows */
    T_DOWN,
    T_POST_FFN,
    T_COUNT
};

enum fill_kind { F_MATRIX, F_NORM, F_BIAS, F_ROPE };

struct tdesc {
    char name[48];
    uint64_t ne[2];
    uint32_t n_dims;
    int kind; /* enum fill_kind: norms, biases and RoPE factors are F32 vectors */
};

/* The global tensors (*ng) and the kinds of one layer's, in order. */
static uint32_t layer_kinds(const struct nib_synth_shape *s, int out[T_COUNT], uint32_t *ng,
                            int global[4])
{
    uint32_t arch = nib_synth_arch(s), n = 0, g = 0;
    global[g++] = T_EMBD;
    global[g++] = T_OUT_NORM;
    if (!s->tied)
        global[g++] = T_OUT;
    if (s->llama3_factor > 0)
        global[g++] = T_ROPE_FREQS;
    *ng = g;
    out[n++] = T_ATTN_NORM;
    if (arch == LLAMA_ARCH_PHI3) {
        out[n++] = T_QKV;
    } else {
        out[n++] = T_Q;
        out[n++] = T_K;
        out[n++] = T_V;
    }
    if (arch == LLAMA_ARCH_QWEN2) {
        out[n++] = T_QB;
        out[n++] = T_KB;
        out[n++] = T_VB;
    }
    if (arch == LLAMA_ARCH_QWEN3) {
        out[n++] = T_QN;
        out[n++] = T_KN;
    }
    out[n++] = T_O;
    if (arch == LLAMA_ARCH_GEMMA2)
        out[n++] = T_POST_ATTN;
    out[n++] = T_FFN_NORM;
    if (arch != LLAMA_ARCH_PHI3)
        out[n++] = T_GATE;
    out[n++] = T_UP;
    out[n++] = T_DOWN;
    if (arch == LLAMA_ARCH_GEMMA2)
        out[n++] = T_POST_FFN;
    return n;
}

static void describe(const struct nib_synth_shape *s, int layer, int kind, struct tdesc *d)
{
    static const char *const names[T_COUNT] = {
        [T_EMBD] = "token_embd.weight",
        [T_OUT_NORM] = "output_norm.weight",
        [T_OUT] = "output.weight",
        [T_ROPE_FREQS] = "rope_freqs.weight",
        [T_ATTN_NORM] = "attn_norm.weight",
        [T_QKV] = "attn_qkv.weight",
        [T_Q] = "attn_q.weight",
        [T_K] = "attn_k.weight",
        [T_V] = "attn_v.weight",
        [T_QB] = "attn_q.bias",
        [T_KB] = "attn_k.bias",
        [T_VB] = "attn_v.bias",
        [T_QN] = "attn_q_norm.weight",
        [T_KN] = "attn_k_norm.weight",
        [T_O] = "attn_output.weight",
        [T_POST_ATTN] = "post_attention_norm.weight",
        [T_FFN_NORM] = "ffn_norm.weight",
        [T_GATE] = "ffn_gate.weight",
        [T_UP] = "ffn_up.weight",
        [T_DOWN] = "ffn_down.weight",
        [T_POST_FFN] = "post_ffw_norm.weight",
    };
    uint64_t dim = s->dim, hd = head_dim(s), q = hd * s->n_heads, kv = hd * s->n_kv_heads;
    uint64_t ffn_rows = nib_synth_arch(s) == LLAMA_ARCH_PHI3 ? 2ull * s->ffn : s->ffn;
    uint64_t ne[T_COUNT][2] = {
        [T_EMBD] = {dim, s->vocab}, [T_OUT_NORM] = {dim, 1},
        [T_OUT] = {dim, s->vocab},  [T_ROPE_FREQS] = {hd / 2, 1},
        [T_ATTN_NORM] = {dim, 1},   [T_QKV] = {dim, q + 2 * kv},
        [T_Q] = {dim, q},           [T_K] = {dim, kv},
        [T_V] = {dim, kv},          [T_QB] = {q, 1},
        [T_KB] = {kv, 1},           [T_VB] = {kv, 1},
        [T_QN] = {hd, 1},           [T_KN] = {hd, 1},
        [T_O] = {q, dim},           [T_POST_ATTN] = {dim, 1},
        [T_FFN_NORM] = {dim, 1},    [T_GATE] = {dim, s->ffn},
        [T_UP] = {dim, ffn_rows},   [T_DOWN] = {s->ffn, dim},
        [T_POST_FFN] = {dim, 1},
    };
    if (layer < 0)
        snprintf(d->name, sizeof d->name, "%s", names[kind]);
    else
        snprintf(d->name, sizeof d->name, "blk.%d.%s", layer, names[kind]);
    d->kind = kind == T_ROPE_FREQS                           ? F_ROPE
              : kind == T_QB || kind == T_KB || kind == T_VB ? F_BIAS
              : ne[kind][1] == 1                             ? F_NORM
                                                             : F_MATRIX;
    d->n_dims = d->kind == F_MATRIX ? 2 : 1;
    d->ne[0] = ne[kind][0];
    d->ne[1] = ne[kind][1];
}

/* Tensor number i (0-based, file order) of a shape; -1 past the end. */
static int tensor_at(const struct nib_synth_shape *s, uint32_t i, struct tdesc *d)
{
    int kinds[T_COUNT], global[4];
    uint32_t ng, per = layer_kinds(s, kinds, &ng, global);
    if (i < ng) {
        describe(s, -1, global[i], d);
        return 0;
    }
    i -= ng;
    if (i >= s->n_layers * per)
        return -1;
    describe(s, (int)(i / per), kinds[i % per], d);
    return 0;
}

static uint32_t tensor_count(const struct nib_synth_shape *s)
{
    int kinds[T_COUNT], global[4];
    uint32_t ng, per = layer_kinds(s, kinds, &ng, global);
    return ng + s->n_layers * per;
}

static uint64_t tensor_bytes(const struct tdesc *d, uint32_t dtype)
{
    uint64_t esz = d->kind != F_MATRIX || dtype == GGML_TYPE_F32 ? 4 : 2;
    return d->ne[0] * d->ne[1] * esz;
}

uint64_t nib_synth_params(const struct nib_synth_shape *s)
{
    struct tdesc d;
    uint64_t n = 0;
    for (uint32_t i = 0; tensor_at(s, i, &d) == 0; i++)
        n += d.ne[0] * d.ne[1];
    return n;
}

uint64_t nib_synth_bytes(const struct nib_synth_shape *s, uint32_t dtype)
{
    struct tdesc d;
    uint64_t n = 0;
    for (uint32_t i = 0; tensor_at(s, i, &d) == 0; i++)
        n += tensor_bytes(&d, dtype);
    return n;
}

/* ---- vocabulary ---- */

#define MAX_PIECE 32      /* bytes per piece, NUL included */
#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's space marker */
#define FIRST_NORMAL 259u /* after <unk>, <s>, </s> and 256 byte tokens */

/* Story words (with a leading space) and syllables: the words make the
 * vocabulary look like the real thing; syllable combinations fill it up. */
static const char *const words[] = {
    "the",    "and",    "once",    "upon",   "a",      "time",    "there",  "was",   "little",
    "girl",   "boy",    "named",   "Once",   "One",    "The",     "Lily",   "Ben",   "Tom",
    "Sue",    "Mia",    "Max",     "She",    "He",     "They",    "she",    "he",    "they",
    "to",     "of",     "in",      "it",     "with",   "her",     "his",    "had",   "said",
    "big",    "play",   "park",    "dog",    "cat",    "happy",   "sad",    "day",   "sun",
    "tree",   "ball",   "mom",     "dad",    "friend", "friends", "saw",    "went",  "wanted",
    "very",   "liked",  "loved",   "look",   "looked", "fun",     "toy",    "toys",  "home",
    "house",  "red",    "blue",    "help",   "helped", "smiled",  "asked",  "bird",  "car",
    "run",    "ran",    "jump",    "jumped", "good",   "new",     "best",   "so",    "not",
    "but",    "you",    "we",      "can",    "see",    "go",      "up",     "on",    "at",
    "for",    "is",     "that",    "all",    "one",    "then",    "when",   "what",  "from",
    "out",    "be",     "do",      "did",    "like",   "too",     "get",    "got",   "made",
    "make",   "take",   "took",    "came",   "come",   "back",    "each",   "other", "learned",
    "lesson", "sky",    "water",   "food",   "cake",   "box",     "hug",    "sorry", "thank",
    "nice",   "kind",   "shiny",   "story",  "end",    "After",   "Lily's", "mommy", "daddy",
    "garden", "flower", "flowers", "fish",   "duck",   "bear",    "tiny",   "small", "old",
    "man",    "lady",
};

static const char *const syllables[] = {
    "th",  "he", "in",  "er",   "an",  "re",  "on",  "at",   "en",   "nd",  "ti",   "es",  "or",
    "te",  "of", "ed",  "is",   "it",  "al",  "ar",  "st",   "to",   "nt",  "ng",   "se",  "ha",
    "as",  "ou", "io",  "le",   "ve",  "co",  "me",  "de",   "hi",   "ri",  "ro",   "ic",  "ne",
    "ea",  "ra", "ce",  "li",   "ch",  "ll",  "be",  "ma",   "si",   "om",  "ur",   "ing", "ion",
    "ent", "ly", "ful", "ness", "ter", "der", "ble", "tion", "ment", "ous", "ight", "ay",  "ow",
    "ee",  "oo", "ack", "ock",  "un",  "ta",  "pa",  "la",   "mo",   "ba",  "da",   "ka",  "sa",
    "wa",  "pi", "ki",  "mi",   "ni",  "fo",  "lo",  "no",   "po",   "bu",  "gu",
};

#define NSYL (sizeof syllables / sizeof syllables[0])

struct vbuild {
    struct nib_synth_vocab *v;
    uint32_t cap;    /* pieces wanted */
    uint32_t *slots; /* hash set of ids + 1; 0 is empty */
    uint32_t mask;
};

static uint32_t fnv1a(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* Slot holding s, or the empty slot where it would go. */
static uint32_t *vb_slot(struct vbuild *b, const char *s, size_t n)
{
    for (uint32_t i = fnv1a(s, n) & b->mask;; i = (i + 1) & b->mask) {
        uint32_t id = b->slots[i];
        if (id == 0)
            return &b->slots[i];
        id--;
        if (b->v->lens[id] == n && memcmp(b->v->pieces[id], s, n) == 0)
            return &b->slots[i];
    }
}

static int vb_full(const struct vbuild *b)
{
    return b->v->n == b->cap;
}

/* Add s (n bytes) unless present, too long or the vocabulary is full. */
static void vb_add(struct vbuild *b, const char *s, size_t n, int32_t type)
{
    if (vb_full(b) || n == 0 || n >= MAX_PIECE)
        return;
    uint32_t *slot = vb_slot(b, s, n);
    if (*slot)
        return;
    struct nib_synth_vocab *v = b->v;
    uint32_t id = v->n++;
    char *p = v->storage + (size_t)id * MAX_PIECE;
    memcpy(p, s, n);
    p[n] = 0;
    v->pieces[id] = p;
    v->lens[id] = (uint32_t)n;
    v->types[id] = type;
    /* Decreasing with id: the BPE-by-score merge prefers earlier pieces. */
    v->scores[id] = type == NIB_TOK_NORMAL ? -(float)(id - FIRST_NORMAL) : 0.0f;
    *slot = id + 1;
}

/* Add every prefix of s that ends on a UTF-8 character boundary, shortest
 * first, so each piece can be built by merging a shorter piece and one
 * character. */
static void vb_add_word(struct vbuild *b, const char *s)
{
    size_t n = strlen(s);
    for (size_t k = 1; k <= n; k++)
        if (k == n || ((uint8_t)s[k] & 0xc0) != 0x80)
            vb_add(b, s, k, NIB_TOK_NORMAL);
}

static void vb_specials_and_bytes(struct vbuild *b)
{
    vb_add(b, "<unk>", 5, NIB_TOK_UNKNOWN);
    vb_add(b, "<s>", 3, NIB_TOK_CONTROL);
    vb_add(b, "</s>", 4, NIB_TOK_CONTROL);
    for (int c = 0; c < 256; c++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", c);
        vb_add(b, s, 6, NIB_TOK_BYTE);
    }
}

static void vb_chars(struct vbuild *b)
{
    for (char c = 0x20; c < 0x7f; c++)
        vb_add(b, &c, 1, NIB_TOK_NORMAL);
    vb_add_word(b, SP);
    for (int up = 0; up < 2; up++)
        for (char c = 'a'; c <= 'z'; c++) {
            char s[8];
            snprintf(s, sizeof s, SP "%c", up ? c - 'a' + 'A' : c);
            vb_add_word(b, s);
        }
}

static void vb_words_and_syllables(struct vbuild *b)
{
    char s[MAX_PIECE * 2];
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        snprintf(s, sizeof s, SP "%s", words[i]);
        vb_add_word(b, s);
    }
    for (size_t i = 0; i < NSYL; i++) {
        vb_add_word(b, syllables[i]);
        snprintf(s, sizeof s, SP "%s", syllables[i]);
        vb_add_word(b, s);
    }
}

/* Two- then three-syllable words, with and without the leading space. */
static void vb_combinations(struct vbuild *b)
{
    char s[MAX_PIECE * 2];
    for (size_t i = 0; i < NSYL && !vb_full(b); i++)
        for (size_t j = 0; j < NSYL; j++) {
            snprintf(s, sizeof s, SP "%s%s", syllables[i], syllables[j]);
            vb_add_word(b, s);
            vb_add_word(b, s + 3);
        }
    for (size_t i = 0; i < NSYL && !vb_full(b); i++)
        for (size_t j = 0; j < NSYL && !vb_full(b); j++)
            for (size_t k = 0; k < NSYL; k++) {
                snprintf(s, sizeof s, SP "%s%s%s", syllables[i], syllables[j], syllables[k]);
                vb_add_word(b, s);
            }
}

/* Last resort for huge vocabularies: every lowercase word by length. It
 * never runs dry, so the build always reaches exactly n pieces. */
static void vb_exhaustive(struct vbuild *b)
{
    char s[MAX_PIECE];
    for (int len = 1; len < MAX_PIECE - 4 && !vb_full(b); len++) {
        uint64_t total = 1;
        for (int k = 0; k < len && total < (1ull << 40); k++)
            total *= 26;
        for (uint64_t c = 0; c < total && !vb_full(b); c++) {
            memcpy(s, SP, 3);
            uint64_t x = c;
            for (int k = len - 1; k >= 0; k--, x /= 26)
                s[3 + k] = (char)('a' + x % 26);
            s[3 + len] = 0;
            vb_add_word(b, s);
        }
    }
}

void nib_synth_vocab_free(struct nib_synth_vocab *v)
{
    free(v->pieces);
    free(v->lens);
    free(v->scores);
    free(v->types);
    free(v->storage);
    memset(v, 0, sizeof *v);
}

int nib_synth_vocab_build(struct nib_synth_vocab *v, uint32_t n, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    if (n < NIB_SYNTH_MIN_VOCAB || n > (1u << 24)) {
        snprintf(err, errlen, "vocabulary size %u out of range (%u..%u)", n, NIB_SYNTH_MIN_VOCAB,
                 1u << 24);
        return -1;
    }
    struct vbuild b = {v, n, NULL, 0};
    uint32_t nslots = 1;
    while (nslots < 2 * n)
        nslots *= 2;
    b.mask = nslots - 1;
    b.slots = calloc(nslots, sizeof *b.slots);
    v->pieces = calloc(n, sizeof *v->pieces);
    v->lens = calloc(n, sizeof *v->lens);
    v->scores = calloc(n, sizeof *v->scores);
    v->types = calloc(n, sizeof *v->types);
    v->storage = calloc(n, MAX_PIECE);
    if (!b.slots || !v->pieces || !v->lens || !v->scores || !v->types || !v->storage) {
        free(b.slots);
        nib_synth_vocab_free(v);
        snprintf(err, errlen, "out of memory building a %u-piece vocabulary", n);
        return -1;
    }
    vb_specials_and_bytes(&b);
    vb_chars(&b);
    vb_words_and_syllables(&b);
    vb_combinations(&b);
    vb_exhaustive(&b);
    free(b.slots);
    return 0;
}

/* ---- writing the model ---- */

struct progress {
    const char *name;
    uint64_t done, total;
    int enabled, tty;
    int shown; /* last percentage (tty) or decile (log) printed */
};

static void progress_add(struct progress *p, uint64_t n)
{
    p->done += n;
    if (!p->enabled)
        return;
    int pct = (int)(p->done * 100 / p->total);
    int step = p->tty ? pct : pct / 10;
    if (step == p->shown)
        return;
    p->shown = step;
    fprintf(stderr, "%ssynth: %s %d%% (%llu/%llu MB)%s", p->tty ? "\r" : "", p->name, pct,
            (unsigned long long)(p->done >> 20), (unsigned long long)(p->total >> 20),
            p->tty ? "" : "\n");
    if (p->tty && pct == 100)
        fputc('\n', stderr);
}

struct tgen {
    const struct nib_synth_shape *s;
    uint64_t key; /* PRNG stream of this tensor */
    float bound;  /* values uniform in [-bound, bound) */
    int kind;     /* enum fill_kind */
    int f16;
    struct progress *prog;
};

/* Llama 3 RoPE scaling as llama.cpp's converter turns rope_scaling into
 * rope_freqs.weight: divisor i of frequency base^(-2i/d) (low and high
 * frequency factors 1 and 4). */
static float llama3_factor(const struct nib_synth_shape *s, uint64_t i)
{
    const double lo = 1.0, hi = 4.0, pi = 3.14159265358979323846;
    uint32_t hd = head_dim(s);
    float freq = 1.0f / powf(s->rope_theta, (float)(2 * i) / (float)hd);
    double wavelen = 2 * pi / freq, old = s->llama3_ctx, factor = s->llama3_factor;
    if (wavelen < old / hi)
        return 1.0f;
    if (wavelen > old / lo)
        return (float)factor;
    double smooth = (old / wavelen - lo) / (hi - lo);
    return (float)(1 / ((1 - smooth) / factor + smooth));
}

/* Element i of a tensor (F32 payloads). */
static float value(const struct tgen *g, uint64_t i)
{
    switch (g->kind) {
    case F_NORM: return g->s->random_norms ? 1.0f + 0.5f * nib_synth_uniform(g->key, i) : 1.0f;
    case F_BIAS: return 0.5f * nib_synth_uniform(g->key, i);
    case F_ROPE: return llama3_factor(g->s, i);
    default: return g->bound * nib_synth_uniform(g->key, i);
    }
}

static int fill(void *ctx, uint64_t at, void *buf, uint64_t nbytes)
{
    const struct tgen *g = ctx;
    if (g->f16) {
        uint16_t *o = buf;
        uint64_t i0 = at / 2, n = nbytes / 2;
        for (uint64_t i = 0; i < n; i++)
            o[i] = nib_f32_to_f16(g->bound * nib_synth_uniform(g->key, i0 + i));
    } else {
        float *o = buf;
        uint64_t i0 = at / 4, n = nbytes / 4;
        for (uint64_t i = 0; i < n; i++)
            o[i] = value(g, i0 + i);
    }
    progress_add(g->prog, nbytes);
    return 0;
}

/* The hyper-parameters under "<arch>.", as llama.cpp's converters write
 * them (the original LLaMA shapes: exactly the keys they always had). */
static void add_metadata(struct gguf_writer *w, const struct nib_synth_shape *s, uint32_t dtype)
{
    const char *arch = llama_arch_name(nib_synth_arch(s));
    char k[96];
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", arch, suffix), k)
    gguf_w_str(w, "general.architecture", arch);
    gguf_w_str(w, "general.name", s->name);
    gguf_w_u32(w, "general.file_type", dtype == GGML_TYPE_F16 ? 1 : 0);
    gguf_w_u32(w, KEY("context_length"), s->ctx);
    gguf_w_u32(w, KEY("embedding_length"), s->dim);
    gguf_w_u32(w, KEY("block_count"), s->n_layers);
    gguf_w_u32(w, KEY("feed_forward_length"), s->ffn);
    gguf_w_u32(w, KEY("rope.dimension_count"), head_dim(s));
    gguf_w_u32(w, KEY("attention.head_count"), s->n_heads);
    gguf_w_u32(w, KEY("attention.head_count_kv"), s->n_kv_heads);
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), s->norm_eps > 0 ? s->norm_eps : 1e-5f);
    gguf_w_f32(w, KEY("rope.freq_base"), s->rope_theta > 0 ? s->rope_theta : 10000.0f);
    gguf_w_u32(w, KEY("vocab_size"), s->vocab);
    if (s->head_dim) {
        gguf_w_u32(w, KEY("attention.key_length"), s->head_dim);
        gguf_w_u32(w, KEY("attention.value_length"), s->head_dim);
    }
    if (s->window)
        gguf_w_u32(w, KEY("attention.sliding_window"), s->window);
    if (s->attn_softcap > 0)
        gguf_w_f32(w, KEY("attn_logit_softcapping"), s->attn_softcap);
    if (s->final_softcap > 0)
        gguf_w_f32(w, KEY("final_logit_softcapping"), s->final_softcap);
    if (nib_synth_arch(s) == LLAMA_ARCH_PHI3) /* as the phi3 converter writes it */
        gguf_w_u32(w, KEY("rope.scaling.original_context_length"), s->ctx);
#undef KEY
}

static void add_tokenizer(struct gguf_writer *w, const struct nib_synth_vocab *v)
{
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", v->pieces, v->lens, v->n);
    gguf_w_arr_f32(w, "tokenizer.ggml.scores", v->scores, v->n);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v->types, v->n);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 0);
}

/* One generator per tensor; gens has room for all of them. */
static void add_tensors(struct gguf_writer *w, const struct nib_synth_shape *s, uint32_t dtype,
                        uint64_t seed, struct tgen *gens, struct progress *prog)
{
    struct tdesc d;
    for (uint32_t i = 0; tensor_at(s, i, &d) == 0; i++) {
        struct tgen *g = &gens[i];
        g->s = s;
        g->key = nib_synth_stream_key(seed, i);
        g->bound = 1.0f / sqrtf((float)d.ne[0]); /* keeps W·x at O(|x|) */
        g->kind = d.kind;
        g->f16 = d.kind == F_MATRIX && dtype == GGML_TYPE_F16;
        g->prog = prog;
        gguf_w_tensor(w, d.name, g->f16 ? GGML_TYPE_F16 : GGML_TYPE_F32, d.n_dims, d.ne, fill, g);
    }
}

/* llama.cpp sets token attributes by model name: a general.name holding
 * "phi3" makes it look up "<|endoftext|>", which Phi-3's vocabulary has
 * (as a control token): so does the synthetic one, as its last token. */
static void phi3_specials(struct nib_synth_vocab *v)
{
    static const char eot[] = "<|endoftext|>";
    uint32_t id = v->n - 1;
    char *p = (char *)v->pieces[id]; /* points into v->storage */
    memcpy(p, eot, sizeof eot);
    v->lens[id] = sizeof eot - 1;
    v->types[id] = NIB_TOK_CONTROL;
    v->scores[id] = 0.0f;
}

/* Both writers: tok NULL writes the built-in SentencePiece vocabulary. */
static int synth_write(FILE *out, const struct nib_synth_shape *s, uint32_t dtype, uint64_t seed,
                       const struct tok_spec *tok, int progress, char *err, size_t errlen)
{
    if (dtype != GGML_TYPE_F32 && dtype != GGML_TYPE_F16) {
        snprintf(err, errlen, "dtype must be f32 or f16");
        return -1;
    }
    struct nib_synth_vocab v = {0};
    if (!tok && nib_synth_vocab_build(&v, s->vocab, err, errlen) != 0)
        return -1;
    if (!tok && nib_synth_arch(s) == LLAMA_ARCH_PHI3)
        phi3_specials(&v);
    struct tgen *gens = calloc(tensor_count(s), sizeof *gens);
    struct gguf_writer *w = gguf_writer_new(3, GGUF_DEFAULT_ALIGNMENT);
    struct progress prog = {s->name, 0, nib_synth_bytes(s, dtype), progress, isatty(STDERR_FILENO),
                            -1};
    int rc = -1;
    if (gens && w) {
        add_metadata(w, s, dtype);
        if (tok) {
            rc = nib_synth_tok_metadata(w, tok, err, errlen);
        } else {
            add_tokenizer(w, &v);
            rc = 0;
        }
        if (rc == 0) {
            add_tensors(w, s, dtype, seed, gens, &prog);
            rc = gguf_writer_write(w, out, err, errlen);
        }
    } else {
        snprintf(err, errlen, "out of memory");
    }
    gguf_writer_free(w);
    free(gens);
    if (!tok)
        nib_synth_vocab_free(&v);
    return rc;
}

int nib_synth_write(FILE *out, const struct nib_synth_shape *s, uint32_t dtype, uint64_t seed,
                    int progress, char *err, size_t errlen)
{
    return synth_write(out, s, dtype, seed, NULL, progress, err, errlen);
}

int nib_synth_write_vocab(FILE *out, const struct nib_synth_shape *s, uint32_t dtype, uint64_t seed,
                          const struct tok_spec *tok, int progress, char *err, size_t errlen)
{
    struct nib_synth_shape shape = *s;
    shape.vocab = tok->n_vocab;
    shape.tied = 1;
    return synth_write(out, &shape, dtype, seed, tok, progress, err, errlen);
}

/* ---- CLI ---- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nib synth SHAPE -o FILE.gguf [--seed N] [--dtype f16|f32] [--layers N]\n"
            "       nib synth [SHAPE] --vocab TOKENIZER -o FILE.gguf [--seed N] [--dtype f16|f32]\n"
            "       nib synth resnet50 -o FILE.onnx [--seed N]\n"
            "       nib synth --list\n"
            "Writes a model of a real shape (llama, qwen2, qwen3, phi3 or gemma2) with random\n"
            "weights (seed 0 by default) and the metadata llama.cpp reads for its architecture.\n"
            "--layers N: the first N layers only (a real-width model of few layers).\n"
            "--vocab: the tokenizer of a tokenizer.json (or a Hugging Face directory) with\n"
            "its real vocabulary, merges, special tokens and chat template; SHAPE defaults\n"
            "to a small one (%s), and the output matrix is tied to the embeddings.\n"
            "resnet50: ResNet-50 v1.5 with random weights as ONNX (docs/vision.md).\n",
            nib_synth_vocab_shape.name);
}

static void list_shapes(void)
{
    printf("%-15s %-6s %5s %6s %5s %5s %4s %4s %6s %6s %5s %8s %9s\n", "shape", "arch", "dim",
           "layers", "ffn", "heads", "kv", "head", "vocab", "ctx", "dtype", "params", "size");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const struct nib_synth_shape *s = &shapes[i];
        printf("%-15s %-6s %5u %6u %5u %5u %4u %4u %6u %6u %5s %7.1fM %6.1f MB\n", s->name,
               llama_arch_name(nib_synth_arch(s)), s->dim, s->n_layers, s->ffn, s->n_heads,
               s->n_kv_heads, head_dim(s), s->vocab, s->ctx,
               s->dtype == GGML_TYPE_F16 ? "f16" : "f32", nib_synth_params(s) / 1e6,
               nib_synth_bytes(s, s->dtype) / 1048576.0);
    }
}

/* Remove a half-written output, but only a regular file: -o /dev/null must
 * survive a failed run. */
static void remove_partial(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
        unlink(path);
}

enum { O_LIST = NIB_ARGS_OPT, O_OUT, O_SEED, O_DTYPE, O_VOCAB, O_LAYERS };

/* A model of another format: only -o and --seed apply. */
static int write_graph(const struct nib_synth_graph *gr, const char *out, uint64_t seed,
                       int other_options)
{
    if (other_options) {
        fprintf(stderr, "nib synth: %s takes only -o and --seed\n", gr->name);
        return 2;
    }
    FILE *f = fopen(out, "wb");
    if (!f) {
        fprintf(stderr, "nib synth: cannot open '%s' for writing: %s\n", out, strerror(errno));
        return 1;
    }
    char err[512];
    int rc = gr->write(f, seed, err, sizeof err);
    if (fclose(f) != 0 && rc == 0) {
        snprintf(err, sizeof err, "closing the file failed: %s", strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        fprintf(stderr, "nib synth: %s: %s\n", out, err);
        remove_partial(out);
        return 1;
    }
    fprintf(stderr, "synth: wrote %s (%s, seed %llu)\n", out, gr->name, (unsigned long long)seed);
    return 0;
}

int nib_synth_main(int argc, char **argv)
{
    return nib_synth_main_graphs(argc, argv, NULL, 0);
}

int nib_synth_main_graphs(int argc, char **argv, const struct nib_synth_graph *graphs,
                          size_t n_graphs)
{
    static const struct nib_opt opts[] = {
        {"--list", O_LIST, 0},     {"-o", O_OUT, 1},
        {"--output", O_OUT, 1},    {"--seed", O_SEED, 1},
        {"--dtype", O_DTYPE, 1},   {"--vocab", O_VOCAB, 1},
        {"--layers", O_LAYERS, 1}, {NULL, 0, 0},
    };
    const char *shape = NULL, *out = NULL, *vocab = NULL;
    uint64_t seed = 0, layers = 0;
    uint32_t dtype = UINT32_MAX;
    struct nib_args a;
    nib_args_init(&a, "nib synth", argc, argv, opts, usage, &shape);
    int o;
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        if (o == O_LIST) {
            list_shapes();
            for (size_t k = 0; k < n_graphs; k++)
                printf("%-15s %s\n", graphs[k].name, graphs[k].what);
            return 0;
        } else if (o == O_OUT) {
            if (!a.value[0])
                return nib_args_fail(&a, "-o needs a file name");
            out = a.value;
        } else if (o == O_VOCAB) {
            if (!a.value[0])
                return nib_args_fail(&a, "--vocab needs a tokenizer.json or a directory");
            vocab = a.value;
        } else if (o == O_SEED) {
            if (nib_args_u64(&a, &seed))
                return 2;
        } else if (o == O_LAYERS) {
            if (nib_args_u64(&a, &layers))
                return 2;
            if (layers == 0 || layers > NIB_MAX_LAYERS)
                return nib_args_fail(&a, "--layers %llu is out of range [1, %u]",
                                     (unsigned long long)layers, NIB_MAX_LAYERS);
        } else if (o == O_DTYPE) {
            if (strcmp(a.value, "f32") == 0)
                dtype = GGML_TYPE_F32;
            else if (strcmp(a.value, "f16") == 0)
                dtype = GGML_TYPE_F16;
            else
                return nib_args_fail(&a, "bad --dtype '%s' (f16 or f32)", a.value);
        }
    }
    if (o == NIB_ARGS_EXIT)
        return a.status;
    if ((!shape && !vocab) || !out)
        return nib_args_missing(&a);
    for (size_t k = 0; shape && k < n_graphs; k++)
        if (strcmp(shape, graphs[k].name) == 0)
            return write_graph(&graphs[k], out, seed, vocab || layers || dtype != UINT32_MAX);
    const struct nib_synth_shape *s = shape ? nib_synth_find(shape) : &nib_synth_vocab_shape;
    if (!s) {
        fprintf(stderr, "nib synth: unknown shape '%s' (try --list)\n", shape);
        return 2;
    }
    if (dtype == UINT32_MAX)
        dtype = s->dtype;
    struct nib_synth_shape cut = *s;
    if (layers)
        cut.n_layers = (uint32_t)layers;
    s = &cut;
    char err[512];
    struct tok_spec tok;
    tok_spec_init(&tok);
    if (vocab && hf_tokenizer_load(vocab, &tok, err, sizeof err)) {
        fprintf(stderr, "nib synth: --vocab %s\n", err);
        return 1;
    }

    FILE *f = fopen(out, "wb");
    if (!f) {
        fprintf(stderr, "nib synth: cannot open '%s' for writing: %s\n", out, strerror(errno));
        tok_spec_free(&tok);
        return 1;
    }
    /* Progress only where it helps: the small shapes finish at once. */
    int progress = nib_synth_bytes(s, dtype) >= (256ull << 20);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = vocab ? nib_synth_write_vocab(f, s, dtype, seed, &tok, progress, err, sizeof err)
                   : nib_synth_write(f, s, dtype, seed, progress, err, sizeof err);
    tok_spec_free(&tok);
    if (fclose(f) != 0 && rc == 0) {
        snprintf(err, sizeof err, "closing the file failed: %s", strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        fprintf(stderr, "nib synth: %s: %s\n", out, err);
        remove_partial(out);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "synth: wrote %s (%s, %s, seed %llu) in %.1f s\n", out, s->name,
            dtype == GGML_TYPE_F16 ? "f16" : "f32", (unsigned long long)seed,
            (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    return 0;
}
