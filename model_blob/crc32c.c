#include "model_blob/crc32c.h"

#include <string.h>

#define CRC32C_POLY 0x82F63B78u

/* Table built on first use; 1 KiB, computed rather than pasted. */
static uint32_t crc_table[256];
static int crc_table_ready;

static void crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int b = 0; b < 8; b++)
            c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
        crc_table[i] = c;
    }
    crc_table_ready = 1;
}

uint32_t nib_crc32c_scalar(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;
    if (!crc_table_ready)
        crc_table_init();
    crc = ~crc;
    while (n--)
        crc = (crc >> 8) ^ crc_table[(crc ^ *b++) & 0xFF];
    return ~crc;
}

#if defined(__x86_64__) && defined(__SSE4_2__)
#include <nmmintrin.h>
/* SSE4.2 crc32 instruction, 8 bytes per step: fast enough to check a
 * multi-gigabyte blob at boot. */
uint32_t nib_crc32c(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t c = ~crc;
    while (n && ((uintptr_t)b & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *b++);
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, b, 8);
        c = _mm_crc32_u64(c, v);
        b += 8;
        n -= 8;
    }
    while (n--)
        c = _mm_crc32_u8((uint32_t)c, *b++);
    return ~(uint32_t)c;
}
#else
uint32_t nib_crc32c(uint32_t crc, const void *p, size_t n)
{
    return nib_crc32c_scalar(crc, p, n);
}
#endif
