/* Fuzz target: the pre-tokenizer regex engine (rt/text/regex.h). Input:
 * [mode][pattern length L][L pattern bytes][text...].
 *   mode & 3 == 0: compile the pattern; if it compiles, the checker must
 *     accept the program, and every match over the text lies inside it,
 *     after the previous one, non-empty;
 *   mode & 3 == 1: the same, then the text's first bytes flip program bytes
 *     (offset, xor pairs): the checker refuses or the matcher stays in bounds;
 *   mode & 3 == 2: everything after the mode byte is a program, checked, and
 *     run on a fixed text if accepted;
 *   mode & 3 == 3: the pattern is a table pattern (rt/text/pretok_patterns.h,
 *     chosen by L), the rest is text.
 * In every mode NFC (rt/text/nfc.h) also runs on the text: within its bound,
 * and idempotent (the NFC of an NFC text is itself). */
#include <stdlib.h>
#include <string.h>

#include "rt/text/nfc.h"
#include "rt/text/pretok_patterns.h"
#include "rt/text/regex.h"
#include "tests/fuzz/fuzz.h"

static uint8_t prog[1 << 16];

static void run_all(const uint8_t *p, size_t plen, const uint8_t *s, size_t n)
{
    void *scratch = malloc(nib_re_scratch_footprint(p, plen, n) + 8);
    size_t from = 0, ms, me;
    int r;
    while ((r = nib_re_find(p, plen, s, n, from, &ms, &me, scratch)) == 1) {
        FUZZ_ASSERT(ms >= from && me > ms && me <= n);
        from = me;
    }
    FUZZ_ASSERT(r == 0 || r == -1);
    free(scratch);
}

static void check_nfc(const uint8_t *s, size_t n)
{
    size_t cap = nib_nfc_bound(n);
    uint8_t *a = malloc(cap), *b = malloc(nib_nfc_bound(cap));
    size_t na = nib_nfc(s, n, a, cap);
    FUZZ_ASSERT(na <= cap);
    FUZZ_ASSERT(n == 0 || na > 0);
    size_t nb = nib_nfc(a, na, b, nib_nfc_bound(na));
    FUZZ_ASSERT(nb == na && !memcmp(a, b, na));
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    size_t used;
    if (size < 2)
        return 0;
    unsigned mode = data[0] & 3;
    check_nfc(data + 1, size - 1);
    if (mode == 2) {
        size_t len = size - 1 < sizeof prog ? size - 1 : sizeof prog;
        memcpy(prog, data + 1, len);
        err[0] = 0;
        if (nib_re_check(prog, len, err, sizeof err) < 0) {
            FUZZ_ASSERT(err[0] != 0);
            return 0;
        }
        static const uint8_t text[] = "Hello World's 123 \xE4\xBD\xA0\xFF\n\n  x";
        run_all(prog, len, text, sizeof text - 1);
        return 0;
    }
    size_t plen = data[1];
    const char *pat;
    if (mode == 3) {
        unsigned count;
        const struct nib_pretok *all = nib_pretok_all(&count);
        const struct nib_pretok *t = &all[plen % count];
        pat = t->patterns[(plen / count) % t->npatterns];
        plen = strlen(pat);
        data += 2;
        size -= 2;
    } else {
        if (plen > size - 2)
            plen = size - 2;
        pat = (const char *)data + 2;
        data += 2 + plen;
        size -= 2 + plen;
    }
    err[0] = 0;
    if (nib_re_compile(pat, plen, prog, sizeof prog, &used, err, sizeof err) < 0) {
        FUZZ_ASSERT(err[0] != 0);
        return 0;
    }
    FUZZ_ASSERT(nib_re_check(prog, used, err, sizeof err) == 0);
    if (mode == 1) {
        for (size_t i = 0; i + 1 < size && i < 8; i += 2)
            prog[data[i] * 131u % used] ^= data[i + 1];
        if (nib_re_check(prog, used, err, sizeof err) < 0)
            return 0;
    }
    run_all(prog, used, data, size);
    return 0;
}
