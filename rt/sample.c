#include "rt/sample.h"

#include <math.h>

uint32_t nib_argmax(const float *logits, size_t n)
{
    /* Same rule as the LM head's fused per-block argmax (rt/exec.c), so
     * the two always agree: NaNs never win, the first of equals does. */
    size_t best = 0;
    float v = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (logits[i] > v) {
            v = logits[i];
            best = i;
        }
    return (uint32_t)best;
}

float nib_rng_f32(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return (float)((x * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}

uint32_t nib_sample(float *logits, size_t n, float temperature, uint64_t *rng)
{
    if (!(temperature > 0.0f))
        return nib_argmax(logits, n);
    float max = logits[nib_argmax(logits, n)];
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        logits[i] = expf((logits[i] - max) / temperature);
        sum += logits[i];
    }
    float coin = nib_rng_f32(rng) * sum, cdf = 0.0f;
    for (size_t i = 0; i < n; i++) {
        cdf += logits[i];
        if (coin < cdf)
            return (uint32_t)i;
    }
    return (uint32_t)(n - 1); /* rounding left the coin past the last bucket */
}
