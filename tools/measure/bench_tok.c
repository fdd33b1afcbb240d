/* nib bench --tokenizer SRC: MB/s of nibble's tokenizer (rt/tokenizer.c,
 * exactly as the appliance runs it: scratch allocated once, no BOS, control
 * tokens off) on a fixed text, and in the same run MB/s of
 * @huggingface/tokenizers (node, the npm packages of tests/npm;
 * bench_tok_ref.c) on the same chunks of the same text. The text is cut into
 * chunks of at most CHUNK_BYTES at line ends (prompts, not one 1 MB string).
 * Both sides make one warm-up pass, then --rounds interleaved rounds (one
 * timed pass of each per round); the table gives the median pass of each
 * and the median of the per-round ratios. MB = 10^6 bytes of input text.
 * Benchmarks report; nothing asserts a timing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rt/tokenizer.h"
#include "tools/compiler/tok_load.h"
#include "tools/measure/bench_stats.h"
#include "tools/measure/bench_tok.h"
#include "tools/util/args.h"
#include "tools/util/tool_util.h"

#define CHUNK_BYTES 4096
#define TEXT_BYTES ((size_t)1 << 20)
#define QUICK_TEXT_BYTES ((size_t)64 << 10)
#define MAX_ROUNDS 25

struct side {
    int ok;
    double seconds, mbps, load_s;
    unsigned long tokens;
    char note[512];
    char node[32];
};

/* Chunks of at most CHUNK_BYTES ending at a line end, or else at a UTF-8
 * character boundary. */
static size_t split_chunks(const char *t, size_t n, struct bench_chunk *out)
{
    size_t k = 0, at = 0;
    while (at < n) {
        size_t end = at + CHUNK_BYTES < n ? at + CHUNK_BYTES : n;
        if (end < n) {
            size_t nl = end;
            while (nl > at && t[nl - 1] != '\n')
                nl--;
            if (nl > at)
                end = nl;
            else
                while (end > at + 1 && ((unsigned char)t[end] & 0xC0) == 0x80)
                    end--;
        }
        if (out)
            out[k] = (struct bench_chunk){t + at, end - at};
        k++;
        at = end;
    }
    return k;
}

/* nibble's side: buffers sized once for the longest chunk, as the
 * appliance sizes its scratch at boot. */
struct nibble_run {
    const struct nib_blob_view *v;
    uint32_t *ids;
    size_t max_ids;
    void *scratch;
};

static int nibble_setup(struct nibble_run *n, const struct nib_blob_view *v,
                        const struct bench_chunk *c, size_t nc)
{
    size_t max_len = 0;
    for (size_t i = 0; i < nc; i++)
        max_len = c[i].n > max_len ? c[i].n : max_len;
    n->v = v;
    n->max_ids = nib_tok_max_ids(v, max_len);
    size_t fp = (nib_tok_req_scratch_footprint(v, max_len) + 63) & ~(size_t)63;
    n->ids = malloc(n->max_ids * sizeof *n->ids);
    n->scratch = aligned_alloc(64, fp ? fp : 64);
    return n->ids && n->scratch ? 0 : -1;
}

/* One pass over every chunk: its seconds, or -1 with the refused chunk in
 * note. *tokens (when not NULL) gets the id count. */
static double nibble_pass(struct nibble_run *n, const struct bench_chunk *c, size_t nc,
                          unsigned long *tokens, char *note, size_t note_len)
{
    struct nib_tok_request rq = {.add_bos = 0, .special = 0};
    double t0 = bench_now();
    for (size_t i = 0; i < nc; i++) {
        int k = nib_tok_encode_req(n->v, c[i].p, c[i].n, &rq, n->ids, n->max_ids, n->scratch);
        if (k < 0) {
            snprintf(note, note_len, "chunk %zu (%zu bytes) refused: %s", i, c[i].n,
                     k == -2 ? "pre-tokenizer step bound" : "out of room");
            return -1;
        }
        if (tokens)
            *tokens += (unsigned long)k;
    }
    return bench_now() - t0;
}

/* Interleaved rounds: nibble's pass, then the reference's, each round. */
static int measure(struct nibble_run *n, struct bench_ref *ref, const struct bench_chunk *c,
                   size_t nc, size_t total, int rounds, struct side *mine, struct side *theirs,
                   double *ratio)
{
    double tn[MAX_ROUNDS], tr[MAX_ROUNDS], q[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        tn[r] = nibble_pass(n, c, nc, NULL, mine->note, sizeof mine->note);
        if (tn[r] < 0)
            return -1;
        if (theirs->ok) {
            tr[r] = bench_ref_round(ref, theirs->note, sizeof theirs->note);
            if (tr[r] <= 0)
                theirs->ok = 0;
            else
                q[r] = tr[r] / tn[r];
        }
    }
    mine->seconds = bench_median(tn, rounds);
    mine->mbps = (double)total / mine->seconds / 1e6;
    mine->ok = 1;
    if (theirs->ok) {
        theirs->seconds = bench_median(tr, rounds);
        theirs->mbps = (double)total / theirs->seconds / 1e6;
        *ratio = bench_median(q, rounds);
    }
    return 0;
}

/* What SRC is, by its first bytes: "blob", "gguf" or "tokenizer.json". */
static const char *source_kind(const char *path)
{
    char head[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(head, 1, sizeof head, f) : 0;
    if (f)
        fclose(f);
    if (n == 8 && !memcmp(head, NIB_BLOB_MAGIC, 8))
        return "blob";
    if (n >= 4 && !memcmp(head, "GGUF", 4))
        return "gguf";
    return "tokenizer.json";
}

/* The tokenizer.json the reference reads: --reference, or SRC itself. */
static const char *reference_json(const char *src, const char *kind, const char *given, char *buf,
                                  size_t len)
{
    if (given)
        return given;
    if (strcmp(kind, "tokenizer.json"))
        return NULL;
    struct stat st;
    if (stat(src, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(buf, len, "%s/tokenizer.json", src);
        return buf;
    }
    return src;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nib bench --tokenizer (BLOB | MODEL.gguf | tokenizer.json | HF-DIR) [--text "
            "FILE] [--json]\n"
            "                 [--rounds N] [--quick] [--reference tokenizer.json]\n"
            "  MB/s of nibble's tokenizer and, in the same run, of @huggingface/tokenizers\n"
            "  (node; the npm packages of tests/npm, or NIB_NPM_DIR) on the same text\n"
            "  --text FILE        the text (default: a built-in mixed text of 1 MiB)\n"
            "  --rounds N         timed passes, median reported (default 5, at most %d)\n"
            "  --quick            64 KiB of the built-in text, 1 round: a smoke test\n"
            "  --reference FILE   the tokenizer.json the reference reads (default: SRC when it\n"
            "                     is one; a blob or GGUF has none)\n"
            "  --json             one JSON object instead of the table\n",
            MAX_ROUNDS);
}

static void print_table(const char *src, const char *kind, const struct tok_loaded *ts,
                        const char *text_what, size_t total, size_t nc, int rounds,
                        const struct side *a, const struct side *b, double ratio)
{
    const struct nib_tok_header *h = ts->v.tok;
    printf("tokenizer  %s (%s): %s, %u tokens%s\n", src, kind,
           h->model == NIB_TOKM_BPE ? "BPE by merge rank" : "SentencePiece BPE", h->n_vocab,
           h->flags & NIB_TOKF_BYTE_LEVEL ? ", byte-level" : "");
    printf("text       %s: %zu bytes in %zu chunks of at most %d bytes\n", text_what, total, nc,
           CHUNK_BYTES);
    printf("%-24s %10s %10s   (median of %d interleaved rounds; MB = 10^6 B)\n", "", "MB/s",
           "tokens", rounds);
    printf("%-24s %10.2f %10lu\n", "nibble", a->mbps, a->tokens);
    if (b->ok) {
        char name[64];
        snprintf(name, sizeof name, "tokenizers.js (%s)", b->node);
        printf("%-24s %10.2f %10lu   (loading %.1f s, not counted)\n", name, b->mbps, b->tokens,
               b->load_s);
        printf("%-24s %9.2fx   (median of the per-round ratios)\n", "nibble / tokenizers.js",
               ratio);
        if (a->tokens != b->tokens)
            printf("note: the token counts differ: the two tokenizers disagree on this text "
                   "(tests/tokenizer finds where)\n");
    } else
        printf("%-24s %10s   skipped: %s\n", "tokenizers.js", "-", b->note);
}

static void print_json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static void print_json(const char *src, const char *kind, const struct tok_loaded *ts,
                       const char *text_what, size_t total, size_t nc, int rounds,
                       const struct side *a, const struct side *b, double ratio)
{
    printf("{\"tokenizer\":");
    print_json_str(src);
    printf(",\"kind\":\"%s\",\"n_vocab\":%u,\"text\":", kind, ts->v.tok->n_vocab);
    print_json_str(text_what);
    printf(",\"bytes\":%zu,\"chunks\":%zu,\"rounds\":%d,", total, nc, rounds);
    printf("\"nibble\":{\"mbps\":%.3f,\"seconds\":%.6f,\"tokens\":%lu},", a->mbps, a->seconds,
           a->tokens);
    if (b->ok) {
        printf("\"reference\":{\"name\":\"@huggingface/tokenizers\",\"node\":\"%s\",\"mbps\":%.3f,"
               "\"seconds\":%.6f,\"tokens\":%lu,\"load_s\":%.3f},\"ratio\":%.3f}\n",
               b->node, b->mbps, b->seconds, b->tokens, b->load_s, ratio);
    } else {
        printf("\"reference\":null,\"reference_note\":");
        print_json_str(b->note);
        printf("}\n");
    }
}

enum { O_TOKENIZER = NIB_ARGS_OPT, O_TEXT, O_JSON, O_ROUNDS, O_QUICK, O_REFERENCE };

int nib_bench_tokenizer_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {
        {"--tokenizer", O_TOKENIZER, 1},
        {"--text", O_TEXT, 1},
        {"--json", O_JSON, 0},
        {"--rounds", O_ROUNDS, 1},
        {"--quick", O_QUICK, 0},
        {"--reference", O_REFERENCE, 1},
        {NULL, 0, 0},
    };
    const char *src = NULL, *text_path = NULL, *ref_given = NULL;
    int json = 0, quick = 0, rounds = 5, rounds_given = 0, opt;
    struct nib_args a;
    nib_args_init(&a, "nib bench", argc, argv, opts, usage, NULL);
    while ((opt = nib_args_next(&a)) > NIB_ARGS_END) {
        uint32_t v;
        if (opt == O_TOKENIZER)
            src = a.value;
        else if (opt == O_TEXT)
            text_path = a.value;
        else if (opt == O_JSON)
            json = 1;
        else if (opt == O_QUICK)
            quick = 1;
        else if (opt == O_REFERENCE)
            ref_given = a.value;
        else if (opt == O_ROUNDS) {
            if (nib_args_u32(&a, 1, MAX_ROUNDS, &v))
                return 2;
            rounds = (int)v;
            rounds_given = 1;
        }
    }
    if (opt == NIB_ARGS_EXIT)
        return a.status;
    if (!src)
        return nib_args_missing(&a);
    if (quick && !rounds_given)
        rounds = 1;

    char err[512];
    struct tok_loaded ts;
    if (tok_load(src, &ts, err, sizeof err)) {
        fprintf(stderr, "nib bench: %s\n", err);
        return 1;
    }
    const char *kind = source_kind(src);
    const uint8_t *mapped = NULL;
    size_t total = 0;
    char *text = NULL;
    char text_what[4200];
    if (text_path) {
        if (nib_map_file(text_path, &mapped, &total, err, sizeof err)) {
            fprintf(stderr, "nib bench: %s: %s\n", text_path, err);
            tok_unload(&ts);
            return 1;
        }
        snprintf(text_what, sizeof text_what, "%s", text_path);
    } else {
        text = bench_tok_builtin_text(quick ? QUICK_TEXT_BYTES : TEXT_BYTES, &total);
        snprintf(text_what, sizeof text_what,
                 "built-in mixed text (prose, code, CJK, other scripts, emoji)");
    }
    const char *t = text ? text : (const char *)mapped;
    size_t nc = t ? split_chunks(t, total, NULL) : 0;
    struct bench_chunk *chunks = calloc(nc ? nc : 1, sizeof *chunks);
    int rc = 1;
    struct side mine = {0}, ref = {0};
    struct nibble_run nr = {0};
    struct bench_ref br;
    double ratio = 0;
    int ref_started = 0;
    if (!t || !chunks || !total) {
        fprintf(stderr, "nib bench: %s\n", !total ? "the text is empty" : "out of memory");
        goto out;
    }
    split_chunks(t, total, chunks);
    if (nibble_setup(&nr, &ts.v, chunks, nc)) {
        fprintf(stderr, "nib bench: out of memory\n");
        goto out;
    }
    /* warm-up pass: it also counts the ids */
    if (nibble_pass(&nr, chunks, nc, &mine.tokens, mine.note, sizeof mine.note) < 0) {
        fprintf(stderr, "nib bench: %s\n", mine.note);
        goto out;
    }
    char ref_buf[4200];
    const char *ref_json = reference_json(src, kind, ref_given, ref_buf, sizeof ref_buf);
    if (!ref_json)
        snprintf(ref.note, sizeof ref.note,
                 "a %s holds no tokenizer.json for the reference: give --reference FILE", kind);
    else if (!bench_ref_start(&br, ref_json, chunks, nc, ref.note, sizeof ref.note)) {
        ref_started = ref.ok = 1;
        ref.tokens = br.tokens;
        ref.load_s = br.load_s;
        snprintf(ref.node, sizeof ref.node, "%s", br.node);
    }
    if (measure(&nr, &br, chunks, nc, total, rounds, &mine, &ref, &ratio)) {
        fprintf(stderr, "nib bench: %s\n", mine.note);
        goto out;
    }
    if (json)
        print_json(src, kind, &ts, text_what, total, nc, rounds, &mine, &ref, ratio);
    else
        print_table(src, kind, &ts, text_what, total, nc, rounds, &mine, &ref, ratio);
    rc = 0;
out:
    if (ref_started)
        bench_ref_stop(&br);
    free(nr.ids);
    free(nr.scratch);
    free(chunks);
    free(text);
    if (mapped)
        nib_unmap_file(mapped, total);
    tok_unload(&ts);
    return rc;
}
