/* Boot step for an appliance in a virtual machine (docs/ring.md §19): find
 * the ivshmem-plain PCI device (vendor 0x1af4, device 0x1110) that carries
 * the region shared with the host's multiplexer, and map its BAR2. Done at
 * boot only, before the seccomp filters: nothing is mapped later. Kept
 * apart from boot.h so tests build it on its own (libc only). */
#ifndef NIB_BOOT_IVSHMEM_H
#define NIB_BOOT_IVSHMEM_H

#include <stddef.h>
#include <stdint.h>

#include "proto/vm_region.h"

#define NIB_IVSHMEM_VENDOR 0x1af4u
#define NIB_IVSHMEM_DEVICE 0x1110u

/* The first device (in name order) under SYSFS/bus/pci/devices whose
 * vendor and device files read 0x1af4 and 0x1110: its resource2 path into
 * path and that file's size (the BAR's) into *size. Returns 0; 1 when no
 * such device exists (err says so); -1 on an error (err). sysfs is "/sys"
 * at boot, a directory of files in tests. */
int boot_ivshmem_find(const char *sysfs, char *path, size_t pathlen, uint64_t *size, char *err,
                      size_t errlen);

/* Map size bytes of path shared and read-write (MAP_POPULATE). NULL with
 * err on failure. */
void *boot_ivshmem_map(const char *path, uint64_t size, char *err, size_t errlen);

/* The boot step: the region at spec ("auto": the ivshmem device's BAR2;
 * else a file of the region's size, for tests outside a VM) mapped, its
 * multiplexer line checked (nib_vmr_check_mux), guest_state set ABSENT,
 * everything after the region header page zeroed (prefaulting it), and the
 * rings laid out for geo's ring_size after an appliance header of
 * app_header_size bytes (one page, two for a vision model), at most
 * *max_hosts, which becomes the number laid out, their offsets in
 * ring_offset (the appliance's own copy: never read back from the
 * region). Returns the mapping (guest_state still ABSENT: the caller
 * stores READY), or NULL with err. */
struct nib_vmr_header *boot_vm_region(const char *spec, const struct nib_shm_header *geo,
                                      uint32_t app_header_size, uint32_t *max_hosts, uint64_t epoch,
                                      uint64_t ring_offset[NIB_VMR_RINGS_MAX], char *err,
                                      size_t errlen);

#endif
