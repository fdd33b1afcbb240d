/* Fuzz target: what a host reads from an appliance, which a host must not
 * trust either (libnibhost, tools/host/nibhost.c).
 *
 * Input: [256-byte header][u32 host_index][u64 epoch][u64 ring_size]
 * [model bytes...]; a short input is padded with zeros.
 *   - nib_host_check_header on the header, the reply's fields and the
 *     memfd sizes. Invariants: a refusal says why; an accepted header has
 *     every slot inside the ring, every area (prompt, token ids, text)
 *     inside its slot, after the slot's fixed part, in order, without
 *     overlap, aligned, so a host that trusts it never reads or writes
 *     outside the ring it mapped.
 *   - the strict UTF-8 sanitizer (proto/utf8.h) on the model bytes:
 *     output well-formed (nothing held back, sanitizing it again changes
 *     nothing), at most 3 bytes per input byte, and streamed in two pieces
 *     cut where the input says, the same bytes as converted whole;
 *   - a vision model's header (with the two-page header memfd) and its
 *     tensor table from the model bytes: an accepted table keeps every
 *     tensor inside its area, in order, its bytes those of its dims. */
#include <stdlib.h>
#include <string.h>

#include "proto/shm_layout.h"
#include "proto/utf8.h"
#include "tests/fuzz/fuzz.h"
#include "tools/host/nibhost_check.h"

#define FIXED (sizeof(struct nib_shm_header) + 4 + 8 + 8)

static void check_geometry(const uint8_t *data, size_t size)
{
    uint8_t in[FIXED] = {0};
    memcpy(in, data, size < FIXED ? size : FIXED);
    struct nib_shm_header s;
    memcpy(&s, in, sizeof s);
    uint32_t index;
    uint64_t epoch, ring_size;
    memcpy(&index, in + sizeof s, 4);
    memcpy(&epoch, in + sizeof s + 4, 8);
    memcpy(&ring_size, in + sizeof s + 12, 8);
    char err[320];
    err[0] = 0;
    if (nib_host_check_header(&s, index, epoch, NIB_SHM_HEADER_MEMFD_SIZE, ring_size, "fuzz", err,
                              sizeof err)) {
        FUZZ_ASSERT(strstr(err, "fuzz") != NULL);
        return;
    }
    FUZZ_ASSERT(s.magic == NIB_SHM_MAGIC && s.version == NIB_SHM_VERSION && s.epoch == epoch);
    FUZZ_ASSERT(index < s.max_hosts && s.ring_size == ring_size);
    FUZZ_ASSERT(s.n_slots >= 1 && s.n_slots <= NIB_RING_SLOTS);
    FUZZ_ASSERT(s.slots_offset >= sizeof(struct nib_ring_header) && s.slots_offset % 64 == 0);
    FUZZ_ASSERT(s.slot_size % 64 == 0);
    for (uint32_t i = 0; i < s.n_slots; i++) {
        uint64_t start = s.slots_offset + (uint64_t)i * s.slot_size;
        FUZZ_ASSERT(start + s.slot_size <= ring_size);
    }
    uint64_t prompt_end = (uint64_t)s.prompt_offset + s.prompt_max;
    uint64_t tokens_end = (uint64_t)s.tokens_offset + 4ull * s.slot_tokens;
    uint64_t text_end = (uint64_t)s.text_offset + s.slot_text;
    FUZZ_ASSERT(s.prompt_offset >= sizeof(struct nib_slot));
    FUZZ_ASSERT(prompt_end <= s.tokens_offset && s.tokens_offset % 4 == 0);
    FUZZ_ASSERT(tokens_end <= s.text_offset && text_end <= s.slot_size);
    FUZZ_ASSERT(s.prompt_max >= NIB_PROMPT_MIN && s.slot_text >= NIB_TEXT_MIN && s.slot_tokens);
}

/* A vision model's header (TENSOR) and its tensor table, from the model
 * bytes: an accepted table puts every tensor inside its area, in order,
 * without overlap, its bytes the product of its dims. */
static void check_tensors(const uint8_t *data, size_t size)
{
    uint8_t in[FIXED] = {0};
    memcpy(in, data, size < FIXED ? size : FIXED);
    struct nib_shm_header s;
    memcpy(&s, in, sizeof s);
    uint32_t index;
    uint64_t epoch, ring_size;
    memcpy(&index, in + sizeof s, 4);
    memcpy(&epoch, in + sizeof s + 4, 8);
    memcpy(&ring_size, in + sizeof s + 12, 8);
    char err[320];
    if (nib_host_check_header(&s, index, epoch, NIB_SHM_HEADER_MEMFD_SIZE_TENSOR, ring_size, "fuzz",
                              err, sizeof err))
        return;
    FUZZ_ASSERT(s.features == NIB_FEAT_TENSOR && s.n_inputs >= 1 && s.n_outputs >= 1 &&
                s.n_inputs + s.n_outputs <= NIB_TENSOR_MAX);
    FUZZ_ASSERT(s.inputs_len <= s.prompt_max && s.outputs_len <= s.slot_text);
    FUZZ_ASSERT((uint64_t)s.text_offset + s.slot_text <= s.slot_size &&
                (uint64_t)s.prompt_offset + s.prompt_max <= s.text_offset);
    struct nib_shm_tensor t[NIB_TENSOR_MAX];
    memset(t, 0, sizeof t);
    if (size > FIXED)
        memcpy(t, data + FIXED, size - FIXED < sizeof t ? size - FIXED : sizeof t);
    if (nib_host_check_tensors(&s, t, "fuzz", err, sizeof err)) {
        FUZZ_ASSERT(strstr(err, "fuzz") != NULL);
        return;
    }
    uint64_t end[2] = {0, 0};
    for (uint32_t i = 0; i < s.n_inputs + s.n_outputs; i++) {
        uint32_t dir = i >= s.n_inputs;
        uint64_t limit = dir ? s.outputs_len : s.inputs_len, bytes = t[i].dtype == 1 ? 4 : 1;
        for (uint32_t d = 0; d < t[i].rank; d++)
            bytes *= t[i].dims[d];
        FUZZ_ASSERT(t[i].dir == dir && bytes == t[i].bytes && memchr(t[i].name, 0, 64));
        FUZZ_ASSERT(t[i].area_off >= end[dir] && t[i].area_off + t[i].bytes <= limit);
        end[dir] = t[i].area_off + t[i].bytes;
    }
}

static void check_utf8(const uint8_t *b, size_t n, size_t cut)
{
    uint8_t *out = malloc(3 * n + 1), *again = malloc(3 * n + 1), *streamed = malloc(3 * n + 1);
    size_t m = nib_utf8_sanitize(b, n, out, 3 * n);
    FUZZ_ASSERT(m <= 3 * n && m == nib_utf8_sanitized_len(b, n));
    FUZZ_ASSERT(nib_utf8_ready(out, m) == m);
    FUZZ_ASSERT(nib_utf8_sanitize(out, m, again, 3 * n) == m && !memcmp(out, again, m));
    size_t k = nib_utf8_ready(b, cut);
    FUZZ_ASSERT(k <= cut && cut - k <= 3);
    size_t o = nib_utf8_sanitize(b, k, streamed, 3 * n);
    o += nib_utf8_sanitize(b + k, n - k, streamed + o, 3 * n - o);
    FUZZ_ASSERT(o == m && !memcmp(streamed, out, m));
    free(out);
    free(again);
    free(streamed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_geometry(data, size);
    check_tensors(data, size);
    if (size > FIXED) {
        const uint8_t *b = data + FIXED;
        size_t n = size - FIXED;
        check_utf8(b, n, (size_t)b[0] % (n + 1));
    }
    return 0;
}
