/* Fuzz target: the VM region's checks (proto/vm_region.c), each side's
 * reading of what the other wrote.
 *
 *   - nib_vmr_check_mux: an accepted line 0 has the magic, version and
 *     size, a power-of-two region_size equal to the device's, a nonzero
 *     epoch and 1..64 rings; then nib_vmr_layout over it either refuses
 *     with a message or writes a layout nib_vmr_check_layout accepts;
 *   - nib_vmr_check_layout: an accepted layout keeps every ring inside the
 *     region (each is written whole in a buffer of the region's size, so
 *     ASan sees any escape), clear of the region header page, of the
 *     appliance header's one or two pages and of every other ring (each
 *     page is claimed once);
 *   - the mailbox parsers: an accepted command names a ring below n_rings
 *     (STOP: none) and has zero reserved bytes; an accepted answer matches
 *     the command it answers.
 *
 * Input: 1024 bytes of region header, 256 of appliance header, 64 of
 * command, 64 of answer, then u64 ring_size, u32 max_hosts and u32
 * app_header_size (0 stands for 4096) for the layout (missing bytes are
 * zero). A first byte 'N' makes line 0 valid, so
 * the paths behind it are reached often. */
#include <stdlib.h>
#include <string.h>

#include "proto/vm_region.h"
#include "tests/fuzz/fuzz.h"

#define REGION (1u << 20) /* the device's memory in this target */
#define PAGES (REGION / NIB_VMR_PAGE)

struct input {
    struct nib_vmr_header h;
    struct nib_shm_header app;
    struct nib_vmr_cmd cmd;
    struct nib_vmr_ans ans;
    uint64_t ring_size;
    uint32_t max_hosts;
    uint32_t app_header_size;
};

static void check_layout_accepted(const struct nib_vmr_header *h)
{
    static uint8_t *region;
    static uint8_t owner[PAGES];
    if (!region)
        region = malloc(REGION);
    FUZZ_ASSERT(region);
    memset(owner, 0, sizeof owner);
    FUZZ_ASSERT(h->app_header_size == NIB_SHM_HEADER_MEMFD_SIZE ||
                h->app_header_size == NIB_SHM_HEADER_MEMFD_SIZE_TENSOR);
    /* the region header page and the appliance header's pages */
    for (uint64_t p = 0; p < (NIB_VMR_APP_HEADER_OFFSET + h->app_header_size) / NIB_VMR_PAGE; p++)
        owner[p] = 0xff;
    FUZZ_ASSERT(h->n_rings >= 1 && h->n_rings <= NIB_VMR_RINGS_MAX);
    FUZZ_ASSERT(h->ring_size && h->ring_size % NIB_VMR_PAGE == 0);
    for (uint32_t i = 0; i < h->n_rings; i++) {
        uint64_t off = h->ring_offset[i];
        FUZZ_ASSERT(off % NIB_VMR_PAGE == 0 && off + h->ring_size <= REGION);
        memset(region + off, (int)i, h->ring_size);
        for (uint64_t p = off / NIB_VMR_PAGE; p < (off + h->ring_size) / NIB_VMR_PAGE; p++) {
            FUZZ_ASSERT(owner[p] == 0);
            owner[p] = (uint8_t)(i + 1);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in;
    memset(&in, 0, sizeof in);
    memcpy(&in, data, size < sizeof in ? size : sizeof in);
    if (size && data[0] == 'N') {
        in.h.magic = NIB_VMR_MAGIC;
        in.h.version = NIB_VMR_VERSION;
        in.h.header_size = sizeof in.h;
        in.h.region_size = REGION;
    }
    char err[200];

    struct nib_vmr_header h = in.h;
    if (nib_vmr_check_mux(&h, REGION, err, sizeof err) == 0) {
        FUZZ_ASSERT(h.magic == NIB_VMR_MAGIC && h.version == NIB_VMR_VERSION);
        FUZZ_ASSERT(h.region_size == REGION && h.mux_epoch != 0);
        FUZZ_ASSERT(h.max_rings >= 1 && h.max_rings <= NIB_VMR_RINGS_MAX);
        /* The guest's layout over it is refused or accepted by the other side. */
        struct nib_vmr_header g = h;
        memset(&g.guest_epoch, 0, sizeof g - offsetof(struct nib_vmr_header, guest_epoch));
        err[0] = 0;
        uint32_t hs = in.app_header_size ? in.app_header_size : NIB_SHM_HEADER_MEMFD_SIZE;
        if (nib_vmr_layout(&g, in.ring_size, hs, in.max_hosts, 5, err, sizeof err) == 0) {
            FUZZ_ASSERT(g.app_header_size == hs);
            struct nib_shm_header app = {.epoch = 5,
                                         .ring_size = in.ring_size,
                                         .max_hosts = g.n_rings,
                                         .header_memfd_size = hs};
            FUZZ_ASSERT(nib_vmr_check_layout(&g, &app, REGION, h.mux_epoch, err, sizeof err) == 0);
            check_layout_accepted(&g);
        } else {
            FUZZ_ASSERT(err[0] != 0);
        }
    } else {
        FUZZ_ASSERT(err[0] != 0);
    }

    err[0] = 0;
    if (nib_vmr_check_layout(&in.h, &in.app, REGION, in.h.mux_epoch, err, sizeof err) == 0) {
        FUZZ_ASSERT(in.h.guest_epoch != 0 && in.h.guest_epoch == in.app.epoch);
        FUZZ_ASSERT(in.h.ring_size == in.app.ring_size && in.app.max_hosts == in.h.n_rings);
        FUZZ_ASSERT(in.h.app_header_size == in.app.header_memfd_size);
        check_layout_accepted(&in.h);
    } else {
        FUZZ_ASSERT(err[0] != 0);
    }

    uint32_t n_rings = in.max_hosts % (NIB_VMR_RINGS_MAX + 1);
    err[0] = 0;
    int t = nib_vmr_parse_cmd(&in.cmd, n_rings, err, sizeof err);
    if (t < 0) {
        FUZZ_ASSERT(err[0] != 0);
    } else {
        FUZZ_ASSERT((uint32_t)t == in.cmd.type);
        if (t == NIB_VMR_CMD_STOP)
            FUZZ_ASSERT(in.cmd.ring == 0 && in.cmd.uid == 0);
        else
            FUZZ_ASSERT((t == NIB_VMR_CMD_ATTACH || t == NIB_VMR_CMD_DETACH) &&
                        in.cmd.ring < n_rings);
        for (size_t i = 0; i < sizeof in.cmd.reserved; i++)
            FUZZ_ASSERT(in.cmd.reserved[i] == 0);
    }
    err[0] = 0;
    if (nib_vmr_parse_ans(&in.ans, &in.cmd, err, sizeof err) == 0) {
        FUZZ_ASSERT(in.ans.seq == in.cmd.seq && in.ans.type == in.cmd.type &&
                    in.ans.ring == in.cmd.ring && in.ans.status <= 4);
        for (size_t i = 0; i < sizeof in.ans.reserved; i++)
            FUZZ_ASSERT(in.ans.reserved[i] == 0);
    } else {
        FUZZ_ASSERT(err[0] != 0);
    }
    return 0;
}
