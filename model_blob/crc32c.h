/* CRC32C (Castagnoli), as used by iSCSI/ext4: reflected polynomial 0x82F63B78,
 * initial value and final xor 0xFFFFFFFF. The blob checksum. */
#ifndef NIB_CRC32C_H
#define NIB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc = nib_crc32c(0, p, n) for a whole buffer; chain by passing the last result. */
uint32_t nib_crc32c(uint32_t crc, const void *p, size_t n);
/* The portable byte-at-a-time version (reference for the hardware path). */
uint32_t nib_crc32c_scalar(uint32_t crc, const void *p, size_t n);

#endif
