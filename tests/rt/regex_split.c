/* regex_split: the C side of tests/rt/regex_xcheck.mjs. Compiles a pattern
 * (given as hex of its UTF-8 bytes, or as a tokenizer.ggml.pre name and
 * index into rt/text/pretok_patterns.h), then for each line of stdin (hex
 * of a text) prints the matches nib_re_find returns, one after the other
 * from offset 0, as "start-end" byte offsets separated by spaces. "ERROR
 * message" on a compile error, "BOUND" when the step bound ran out.
 *
 *   regex_split -x HEXPATTERN < lines
 *   regex_split -n PRE_NAME INDEX < lines
 *   regex_split -l      (every table pattern: "NAME INDEX HEXPATTERN")
 * A first argument -m runs nib_re_find_memo (the memoized search alone)
 * instead of nib_re_find. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/text/pretok_patterns.h"
#include "rt/text/regex.h"

static size_t unhex(const char *h, uint8_t *out, size_t cap)
{
    size_t n = 0;
    for (; h[0] && h[1] && n < cap; h += 2) {
        unsigned v;
        if (sscanf(h, "%2x", &v) != 1)
            break;
        out[n++] = (uint8_t)v;
    }
    return n;
}

int main(int argc, char **argv)
{
    static uint8_t pat[1 << 16], prog[1 << 20], text[1 << 20];
    static char line[(1 << 21) + 2];
    size_t plen = 0;
    int (*find)(const uint8_t *, size_t, const uint8_t *, size_t, size_t, size_t *, size_t *,
                void *) = nib_re_find;
    if (argc > 1 && !strcmp(argv[1], "-m")) {
        find = nib_re_find_memo;
        argc--;
        argv++;
    }
    if (argc == 2 && !strcmp(argv[1], "-l")) {
        unsigned count;
        const struct nib_pretok *all = nib_pretok_all(&count);
        for (unsigned i = 0; i < count; i++)
            for (unsigned k = 0; k < all[i].npatterns; k++) {
                printf("%s %u ", all[i].name, k);
                for (const char *c = all[i].patterns[k]; *c; c++)
                    printf("%02x", (unsigned char)*c);
                printf("\n");
            }
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "-x")) {
        plen = unhex(argv[2], pat, sizeof pat);
    } else if (argc == 4 && !strcmp(argv[1], "-n")) {
        const struct nib_pretok *t = nib_pretok_find(argv[2], strlen(argv[2]));
        unsigned k = (unsigned)atoi(argv[3]);
        if (!t || k >= t->npatterns) {
            fprintf(stderr, "regex_split: no pattern %s %s\n", argv[2], argv[3]);
            return 2;
        }
        plen = strlen(t->patterns[k]);
        memcpy(pat, t->patterns[k], plen);
    } else {
        fprintf(stderr, "usage: regex_split -x HEXPATTERN | -n PRE_NAME INDEX < hex lines\n");
        return 2;
    }
    char err[256];
    size_t used;
    if (nib_re_compile((const char *)pat, plen, prog, sizeof prog, &used, err, sizeof err) < 0) {
        printf("ERROR %s\n", err);
        return 0;
    }
    if (nib_re_check(prog, used, err, sizeof err) < 0) {
        printf("ERROR check: %s\n", err);
        return 1;
    }
    void *scratch = NULL;
    size_t scap = 0;
    while (fgets(line, sizeof line, stdin)) {
        size_t n = unhex(line, text, sizeof text);
        size_t need = nib_re_scratch_footprint(prog, used, n);
        if (need > scap) {
            free(scratch);
            scratch = aligned_alloc(8, (need + 7) & ~(size_t)7);
            scap = need;
        }
        size_t at = 0, ms, me;
        int first = 1, r;
        while ((r = find(prog, used, text, n, at, &ms, &me, scratch)) == 1) {
            printf(first ? "%zu-%zu" : " %zu-%zu", ms, me);
            first = 0;
            at = me;
        }
        if (r < 0)
            printf(first ? "BOUND" : " BOUND");
        printf("\n");
        fflush(stdout);
    }
    free(scratch);
    return 0;
}
