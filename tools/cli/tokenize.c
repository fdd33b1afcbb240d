/* nib tokenize: run a tokenizer on lines of stdin, for cross-checks and
 * for looking at what a model sees. The tokenizer comes from a blob, or is
 * built in memory from a GGUF or a Hugging Face tokenizer.json (import,
 * tok_pack, validation: the very section nib compile would write, without
 * the weights). Each input line is hex of the text's bytes (an empty line
 * is the empty text); each output line the ids, space-separated. With
 * --decode each input line is ids and the output the hex of their text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/tokenizer.h"
#include "tools/cli/cli.h"
#include "tools/compiler/tok_load.h"
#include "tools/util/args.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nib tokenize (BLOB | MODEL.gguf | tokenizer.json | HF-DIR) [--special] "
               "[--no-bos] [--decode]\n"
               "  reads stdin: one text per line as hex of its bytes (empty line: empty text);\n"
               "  prints one line of space-separated token ids per input line\n"
               "  --special  control tokens written in the text (<|im_start|>) become their ids\n"
               "  --no-bos   no BOS (or EOS) the model's post-processor would add\n"
               "  --decode   input lines are ids; prints the hex of the decoded text\n");
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* One line of hex: the text, or -1 (bad hex). */
static long unhex(const char *line, size_t n, uint8_t *out)
{
    if (n % 2)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hexval(line[i]), lo = hexval(line[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i / 2] = (uint8_t)(hi * 16 + lo);
    }
    return (long)(n / 2);
}

static int encode_line(const struct nib_blob_view *v, const char *line, size_t n,
                       const struct nib_tok_request *rq)
{
    uint8_t *text = malloc(n / 2 + 1);
    long len = text ? unhex(line, n, text) : -1;
    if (len < 0) {
        free(text);
        printf("error: not hex\n");
        return -1;
    }
    size_t max = nib_tok_max_ids(v, (size_t)len);
    size_t fp = (nib_tok_req_scratch_footprint(v, (size_t)len) + 63) & ~(size_t)63;
    uint32_t *ids = malloc(max * 4);
    void *scratch = aligned_alloc(64, fp);
    int k = ids && scratch
                ? nib_tok_encode_req(v, (const char *)text, (size_t)len, rq, ids, max, scratch)
                : -1;
    if (k < 0)
        printf("error: %s\n", k == -2 ? "pre-tokenizer step bound exceeded" : "out of room");
    for (int i = 0; i < k; i++)
        printf(i ? " %u" : "%u", ids[i]);
    if (k >= 0)
        printf("\n");
    free(text);
    free(ids);
    free(scratch);
    return k < 0 ? -1 : 0;
}

static int decode_line(const struct nib_blob_view *v, char *line)
{
    uint32_t prev = NIB_TOK_NONE; /* the start of the text */
    char *p = line, *end;
    char buf[4 * NIB_MAX_PIECE + 64];
    for (;;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        errno = 0;
        unsigned long id = strtoul(p, &end, 10);
        if (end == p || errno || id >= v->tok->n_vocab) {
            printf("error: bad id\n");
            return -1;
        }
        p = end;
        size_t n = nib_tok_decode(v, prev, (uint32_t)id, buf, sizeof buf);
        for (size_t i = 0; i < n; i++)
            printf("%02x", (uint8_t)buf[i]);
        prev = (uint32_t)id;
    }
    printf("\n");
    return 0;
}

int nib_tokenize_main(int argc, char **argv)
{
    enum { O_SPECIAL = NIB_ARGS_OPT, O_NO_BOS, O_DECODE };
    static const struct nib_opt opts[] = {{"--special", O_SPECIAL, 0},
                                          {"--no-bos", O_NO_BOS, 0},
                                          {"--decode", O_DECODE, 0},
                                          {NULL, 0, 0}};
    const char *path = NULL;
    struct nib_tok_request rq = {.add_bos = 1};
    int decode = 0, o;
    struct nib_args a;
    nib_args_init(&a, "nib tokenize", argc, argv, opts, usage, &path);
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        if (o == O_SPECIAL)
            rq.special = 1;
        else if (o == O_NO_BOS)
            rq.add_bos = 0;
        else
            decode = 1;
    }
    if (o == NIB_ARGS_EXIT)
        return a.status;
    if (!path)
        return nib_args_missing(&a);
    char err[600];
    struct tok_loaded s;
    if (tok_load(path, &s, err, sizeof err)) {
        fprintf(stderr, "nib tokenize: %s\n", err);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int rc = 0;
    while ((got = getline(&line, &cap, stdin)) >= 0) {
        size_t n = (size_t)got;
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        if ((decode ? decode_line(&s.v, line) : encode_line(&s.v, line, n, &rq)) < 0)
            rc = 1;
    }
    free(line);
    tok_unload(&s);
    fflush(stdout);
    return rc;
}
