/* Lookups in the generated case tables (rt/chat/chat_case.h). */
#include "rt/chat/chat_case.h"

static int find(const uint32_t *keys, uint32_t n, uint32_t cp)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && keys[lo] == cp ? (int)lo : -1;
}

uint32_t nib_chat_case_map(uint32_t cp, int upper, uint32_t out[3])
{
    int i = upper ? find(nib_chat_upper_key, nib_chat_upper_n, cp)
                  : find(nib_chat_lower_key, nib_chat_lower_n, cp);
    if (i < 0) {
        out[0] = cp;
        return 1;
    }
    uint32_t v = upper ? nib_chat_upper_val[i] : nib_chat_lower_val[i], len = v & 3;
    for (uint32_t k = 0; k < len; k++)
        out[k] = nib_chat_case_pool[(v >> 2) + k];
    return len;
}

static int in_ranges(const uint32_t (*r)[2], uint32_t n, uint32_t cp)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r[mid][1] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && r[lo][0] <= cp;
}

int nib_chat_cased(uint32_t cp)
{
    return in_ranges(nib_chat_cased_ranges, nib_chat_cased_n, cp);
}

int nib_chat_case_ignorable(uint32_t cp)
{
    return in_ranges(nib_chat_ignorable_ranges, nib_chat_ignorable_n, cp);
}
