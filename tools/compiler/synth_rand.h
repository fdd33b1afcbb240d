/* The counter-based generator of `nib synth`: element i of stream t is a
 * hash of (seed, t, i), so any chunk is a pure function of its offset and
 * the output never depends on chunk sizes or thread counts. Shared by the
 * GGUF shapes (synth.c) and the ONNX vision models (onnx/onnx_synth.c). */
#ifndef NIB_SYNTH_RAND_H
#define NIB_SYNTH_RAND_H

#include <stdint.h>

/* splitmix64's finaliser: a good 64-bit mixer. */
static inline uint64_t nib_synth_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define NIB_SYNTH_GOLDEN 0x9e3779b97f4a7c15ull

/* Each tensor gets its own splitmix64 stream, keyed by seed and index. */
static inline uint64_t nib_synth_stream_key(uint64_t seed, uint32_t tensor)
{
    return nib_synth_mix64(seed ^ nib_synth_mix64(((uint64_t)tensor + 1) * NIB_SYNTH_GOLDEN));
}

/* Uniform in [-1, 1): element i of a stream. */
static inline float nib_synth_uniform(uint64_t key, uint64_t i)
{
    int32_t r = (int32_t)(nib_synth_mix64(key + (i + 1) * NIB_SYNTH_GOLDEN) >> 32);
    return (float)r * (1.0f / 2147483648.0f);
}

#endif
