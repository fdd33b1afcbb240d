/* nib bench --tokenizer: MB/s of nibble's tokenizer beside
 * @huggingface/tokenizers (node) on the same text, in interleaved rounds of
 * the same run (bench_tok.c the driver, bench_tok_ref.c the node side,
 * bench_tok_text.c the built-in text). */
#ifndef NIB_BENCH_TOK_H
#define NIB_BENCH_TOK_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

int nib_bench_tokenizer_main(int argc, char **argv);

/* The built-in text: at least target bytes of mixed UTF-8 text, malloc'd;
 * the same bytes on every machine. */
char *bench_tok_builtin_text(size_t target, size_t *len);

struct bench_chunk {
    const char *p;
    size_t n;
};

/* The reference, a node process that keeps the tokenizer and the chunks
 * loaded and times one pass over all chunks per round. */
struct bench_ref {
    pid_t pid;
    FILE *to, *from;
    char chunk_file[64];
    unsigned long tokens; /* ids of one pass (the warm-up's count) */
    double load_s;        /* reading tokenizer.json and building the tokenizer */
    char node[32];        /* node's version */
};

/* Start it on tok_json (found through NIB_NPM_DIR or tests/npm above nib)
 * and run its warm-up pass. 0, or -1 with the reason in note. */
int bench_ref_start(struct bench_ref *r, const char *tok_json, const struct bench_chunk *c,
                    size_t nc, char *note, size_t note_len);
/* Seconds of one timed pass, or -1 (note says why). */
double bench_ref_round(struct bench_ref *r, char *note, size_t note_len);
void bench_ref_stop(struct bench_ref *r);

#endif
