/* Next-token choice from the logits: greedy argmax, or temperature sampling
 * with a per-request seeded generator so a (blob, prompt, seed) triple always
 * gives the same tokens. */
#ifndef NIB_SAMPLE_H
#define NIB_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

/* Index of the first maximum, NaNs ignored (0 when none is above -inf). */
uint32_t nib_argmax(const float *logits, size_t n);

/* xorshift64* state; never zero. */
static inline uint64_t nib_rng_seed(uint64_t seed)
{
    return seed ? seed : 0x9E3779B97F4A7C15ull;
}
float nib_rng_f32(uint64_t *state); /* uniform in [0, 1) */

/* temperature <= 0 means greedy. Sampling overwrites logits with
 * probabilities. */
uint32_t nib_sample(float *logits, size_t n, float temperature, uint64_t *rng);

#endif
