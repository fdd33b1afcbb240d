#include "proto/utf8.h"

#include <string.h>

/* Table 3-7: the lead byte fixes the length and the range of the second
 * byte; every later byte is 80..BF. */
static int lead(uint8_t c, size_t *len, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        *len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        *len = 3;
        if (c == 0xE0)
            *lo = 0xA0;
        else if (c == 0xED)
            *hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        *len = 4;
        if (c == 0xF0)
            *lo = 0x90;
        else if (c == 0xF4)
            *hi = 0x8F;
    } else
        return 0;
    return 1;
}

size_t nib_utf8_step(const uint8_t *s, size_t n, uint32_t *cp, int *incomplete)
{
    *incomplete = 0;
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint8_t lo, hi;
    if (!lead(c, &len, &lo, &hi)) {
        *cp = NIB_UTF8_REPLACEMENT;
        return 1;
    }
    uint32_t v = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (size_t i = 1; i < len; i++) {
        if (i >= n) {
            *incomplete = 1;
            *cp = NIB_UTF8_REPLACEMENT;
            return i;
        }
        uint8_t b = s[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) {
            *cp = NIB_UTF8_REPLACEMENT;
            return i;
        }
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    return len;
}

size_t nib_utf8_ready(const uint8_t *s, size_t n)
{
    /* A lead byte (C2..F4) is never taken as a continuation, so it always
     * starts a step: look back over at most 3 continuation bytes for one. */
    for (size_t j = 1; j <= 3 && j <= n; j++) {
        uint8_t c = s[n - j];
        if (c >= 0x80 && c <= 0xBF)
            continue;
        uint32_t cp;
        int inc;
        nib_utf8_step(s + n - j, j, &cp, &inc);
        return inc ? n - j : n;
    }
    return n;
}

size_t nib_utf8_encode(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

size_t nib_utf8_sanitize(const uint8_t *s, size_t n, uint8_t *out, size_t cap)
{
    size_t i = 0, o = 0;
    while (i < n) {
        uint32_t cp;
        int inc;
        size_t k = nib_utf8_step(s + i, n - i, &cp, &inc);
        uint8_t enc[4];
        size_t m = nib_utf8_encode(cp, enc); /* a well-formed sequence encodes as itself */
        if (out && o + m <= cap)
            memcpy(out + o, enc, m);
        else
            out = NULL; /* stop writing at the first character that does not fit */
        o += m;
        i += k;
    }
    return o;
}

size_t nib_utf8_sanitized_len(const uint8_t *s, size_t n)
{
    return nib_utf8_sanitize(s, n, NULL, 0);
}
