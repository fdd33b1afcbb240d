/* The region shared across a VM boundary (proto/vm_region.h, docs/ring.md
 * §19), on a plain memfd mapped twice, as the multiplexer and the guest
 * each map it: sizes, the multiplexer's identity line as the guest checks
 * it, the guest's layout as the multiplexer checks it (every field broken
 * in turn is refused by name), the mailbox across the two mappings, the
 * heartbeat watch and the poll back-off. No VM. */
#include <check.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "proto/ctl.h"
#include "proto/vm_region.h"
#include "tests/common/test_util.h"

static int fd = -1;
static uint8_t *mux, *guest; /* two mappings of one memfd */
static uint64_t size;
static struct nib_shm_header geo;

static void setup(void)
{
    memset(&geo, 0, sizeof geo);
    nib_ring_geometry(&geo, 512, 16);
    size = nib_vmr_region_size(geo.ring_size, NIB_SHM_HEADER_MEMFD_SIZE, 4);
    ck_assert_uint_ne(size, 0);
    fd = memfd_create("test-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
    mux = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    guest = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert(mux != MAP_FAILED && guest != MAP_FAILED && mux != guest);
}

static void teardown(void)
{
    munmap(mux, size);
    munmap(guest, size);
    close(fd);
}

static struct nib_vmr_header *mux_h(void)
{
    return (struct nib_vmr_header *)(void *)mux;
}
static struct nib_vmr_header *guest_h(void)
{
    return (struct nib_vmr_header *)(void *)guest;
}

/* What the guest does at boot: check line 0, write its header (hdr_size
 * bytes: one page, two for a vision model) and layout. */
static void guest_boot_header(uint32_t max_hosts, uint32_t hdr_size)
{
    char err[160];
    struct nib_vmr_header copy = *guest_h();
    ck_assert_msg(nib_vmr_check_mux(&copy, size, err, sizeof err) == 0, "%s", err);
    struct nib_shm_header *app = (void *)(guest + NIB_VMR_APP_HEADER_OFFSET);
    *app = geo;
    app->epoch = 1234;
    app->header_memfd_size = hdr_size;
    ck_assert_msg(
        nib_vmr_layout(guest_h(), geo.ring_size, hdr_size, max_hosts, 1234, err, sizeof err) == 0,
        "%s", err);
    app->max_hosts = guest_h()->n_rings;
}

static void guest_boot(uint32_t max_hosts)
{
    guest_boot_header(max_hosts, NIB_SHM_HEADER_MEMFD_SIZE);
}

static int mux_check(char *err, size_t errlen)
{
    struct nib_vmr_header copy = *mux_h();
    struct nib_shm_header app = *(struct nib_shm_header *)(void *)(mux + NIB_VMR_APP_HEADER_OFFSET);
    return nib_vmr_check_layout(&copy, &app, size, 77, err, errlen);
}

START_TEST(region_size_is_a_power_of_two_that_holds_the_rings)
{
    const uint32_t hdr[2] = {NIB_SHM_HEADER_MEMFD_SIZE, NIB_SHM_HEADER_MEMFD_SIZE_TENSOR};
    for (int k = 0; k < 2; k++)
        for (uint32_t n = 1; n <= NIB_VMR_RINGS_MAX; n++) {
            uint64_t s = nib_vmr_region_size(geo.ring_size, hdr[k], n);
            uint64_t need = NIB_VMR_PAGE + hdr[k] + n * geo.ring_size;
            ck_assert_uint_ne(s, 0);
            ck_assert_uint_eq(s & (s - 1), 0);
            ck_assert_uint_ge(s, need);
            ck_assert_uint_lt(s / 2, need);
        }
    const uint32_t h1 = NIB_SHM_HEADER_MEMFD_SIZE;
    ck_assert_uint_eq(nib_vmr_region_size(geo.ring_size, h1, 0), 0);
    ck_assert_uint_eq(nib_vmr_region_size(geo.ring_size, h1, NIB_VMR_RINGS_MAX + 1), 0);
    ck_assert_uint_eq(nib_vmr_region_size(geo.ring_size + 1, h1, 1), 0);
    ck_assert_uint_eq(nib_vmr_region_size(1ull << 40, h1, 2), 0);
    ck_assert_uint_eq(nib_vmr_region_size(geo.ring_size, 3 * NIB_VMR_PAGE, 1), 0);
    ck_assert_uint_eq(nib_vmr_region_size(geo.ring_size, 0, 1), 0);
}
END_TEST

/* Line 0 with fault k applied; NULL when k is past the last fault. */
static const char *mux_fault(struct nib_vmr_header *h, int k)
{
    switch (k) {
    case 0: h->magic ^= 1; return "magic";
    case 1: h->version = 1; return "region version 1, this appliance speaks 2";
    case 2: h->header_size = 512; return "header_size";
    case 3: h->region_size = size / 2; return "differs from the device";
    case 4: h->mux_epoch = 0; return "mux_epoch";
    case 5: h->max_rings = 0; return "max_rings";
    case 6: h->max_rings = NIB_VMR_RINGS_MAX + 1; return "max_rings";
    case 7: h->reserved0 = 1; return "reserved0";
    default: return NULL;
    }
}

START_TEST(guest_accepts_the_multiplexer_line_and_refuses_each_fault)
{
    char err[160];
    nib_vmr_init(mux_h(), size, 77, 4);
    struct nib_vmr_header good = *guest_h(); /* written through the other mapping */
    ck_assert_msg(nib_vmr_check_mux(&good, size, err, sizeof err) == 0, "%s", err);
    int k = 0;
    for (;; k++) {
        struct nib_vmr_header bad = good;
        const char *want = mux_fault(&bad, k);
        if (!want)
            break;
        err[0] = 0;
        ck_assert_int_eq(nib_vmr_check_mux(&bad, size, err, sizeof err), -1);
        ck_assert_msg(strstr(err, want), "fault %d: \"%s\" does not say %s", k, err, want);
    }
    ck_assert_int_eq(k, 8);
    /* A device whose memory differs from what the multiplexer made. */
    ck_assert_int_eq(nib_vmr_check_mux(&good, size * 2, err, sizeof err), -1);
    /* A region size that is not a power of two, even when the BAR agrees. */
    good.region_size = size - NIB_VMR_PAGE;
    ck_assert_int_eq(nib_vmr_check_mux(&good, size - NIB_VMR_PAGE, err, sizeof err), -1);
    ck_assert(strstr(err, "power of two"));
}
END_TEST

/* The guest's layout with fault k applied; NULL past the last. */
static const char *layout_fault(struct nib_vmr_header *h, struct nib_shm_header *app, int k)
{
    switch (k) {
    case 0: h->magic = 0; return "identity";
    case 1: h->region_size *= 2; return "identity";
    case 2: h->mux_epoch = 78; return "identity";
    case 3: h->guest_epoch = 0; return "guest_epoch is 0";
    case 4: app->epoch += 1; return "epoch differs";
    case 5: h->app_header_offset = 8192; return "app_header_offset";
    case 6: h->n_rings = 0; return "n_rings 0";
    case 7: h->n_rings = h->max_rings + 1; return "n_rings";
    case 8: app->max_hosts += 1; return "max_hosts";
    case 9: app->ring_size += NIB_VMR_PAGE; return "ring_size differs";
    case 10:
        h->ring_size += 64;
        app->ring_size += 64;
        return "whole number of pages";
    case 11: h->ring_offset[1] += 64; return "ring_offset[1]";
    case 12: h->ring_offset[0] = 0; return "ring_offset[0]";
    case 13: h->ring_offset[0] = NIB_VMR_APP_HEADER_OFFSET; return "ring_offset[0]";
    case 14: h->ring_offset[h->n_rings - 1] = size - NIB_VMR_PAGE; return "inside the region";
    case 15: h->ring_offset[1] = h->ring_offset[0]; return "ring 1 overlaps ring 0";
    case 16: h->ring_offset[2] = h->ring_offset[1] + NIB_VMR_PAGE; return "overlaps ring 1";
    case 17: h->ring_offset[h->n_rings] = h->ring_offset[0]; return "past n_rings";
    case 18: h->reserved6[5] = 1; return "reserved";
    case 19: h->ring_offset[0] = ~0ull - NIB_VMR_PAGE + 1; return "ring_offset[0]";
    case 20: h->app_header_size = 3 * NIB_VMR_PAGE; return "app_header_size 12288";
    case 21: app->header_memfd_size = NIB_SHM_HEADER_MEMFD_SIZE_TENSOR; return "app_header_size";
    case 22: h->app_header_size = 0; return "app_header_size 0";
    case 23:
        /* A vision header's second page over a decoder layout: ring 0
         * would cover the tensor table. */
        h->app_header_size = NIB_SHM_HEADER_MEMFD_SIZE_TENSOR;
        app->header_memfd_size = NIB_SHM_HEADER_MEMFD_SIZE_TENSOR;
        return "ring_offset[0]";
    default: return NULL;
    }
}

START_TEST(multiplexer_accepts_the_guest_layout_and_refuses_each_fault)
{
    char err[200];
    nib_vmr_init(mux_h(), size, 77, 8);
    guest_boot(8);
    ck_assert_msg(mux_check(err, sizeof err) == 0, "%s", err);
    struct nib_vmr_header good = *mux_h();
    /* As many rings as fit: at least the 4 it was sized for. */
    ck_assert_uint_eq(good.n_rings, (size - 2 * NIB_VMR_PAGE) / geo.ring_size);
    ck_assert_uint_ge(good.n_rings, 4);
    struct nib_shm_header app = *(struct nib_shm_header *)(void *)(mux + NIB_VMR_APP_HEADER_OFFSET);
    /* Every slot area of every ring lies inside the region. */
    for (uint32_t r = 0; r < good.n_rings; r++) {
        uint8_t *ring = mux + good.ring_offset[r];
        struct nib_slot *last = nib_ring_slot(ring, &app, app.n_slots - 1);
        ck_assert((uint8_t *)nib_slot_text(last, &app) + app.slot_text <= mux + size);
        ck_assert((uint8_t *)nib_slot_text(last, &app) + app.slot_text <= ring + good.ring_size);
    }
    int k = 0;
    for (;; k++) {
        struct nib_vmr_header bad = good;
        struct nib_shm_header bad_app = app;
        const char *want = layout_fault(&bad, &bad_app, k);
        if (!want)
            break;
        err[0] = 0;
        ck_assert_int_eq(nib_vmr_check_layout(&bad, &bad_app, size, 77, err, sizeof err), -1);
        ck_assert_msg(strstr(err, want), "fault %d: \"%s\" does not say %s", k, err, want);
    }
    ck_assert_int_eq(k, 24);
}
END_TEST

START_TEST(layout_fits_what_the_region_and_multiplexer_allow)
{
    char err[160];
    nib_vmr_init(mux_h(), size, 77, 2);
    guest_boot(8);
    ck_assert_uint_eq(mux_h()->n_rings, 2); /* max_rings */
    ck_assert_msg(mux_check(err, sizeof err) == 0, "%s", err);
    memset(mux, 0, NIB_VMR_PAGE);
    nib_vmr_init(mux_h(), size, 77, 8);
    guest_boot(3);
    ck_assert_uint_eq(mux_h()->n_rings, 3); /* the appliance's --max-hosts */
    ck_assert_msg(mux_check(err, sizeof err) == 0, "%s", err);
    /* Too small for one ring after the two header pages. */
    const uint32_t h1 = NIB_SHM_HEADER_MEMFD_SIZE;
    struct nib_vmr_header h;
    memset(&h, 0, sizeof h);
    nib_vmr_init(&h, 4 * NIB_VMR_PAGE, 77, 8);
    ck_assert_int_eq(nib_vmr_layout(&h, geo.ring_size, h1, 8, 9, err, sizeof err), -1);
    ck_assert(strstr(err, "cannot hold one ring"));
    ck_assert_int_eq(nib_vmr_layout(&h, 100, h1, 8, 9, err, sizeof err), -1);
    ck_assert(strstr(err, "pages"));
    /* One ring page fits after a decoder's header page, not after a vision
     * model's two. */
    ck_assert_int_eq(nib_vmr_layout(&h, 2 * NIB_VMR_PAGE, h1, 8, 9, err, sizeof err), 0);
    ck_assert_int_eq(nib_vmr_layout(&h, 2 * NIB_VMR_PAGE, NIB_SHM_HEADER_MEMFD_SIZE_TENSOR, 8, 9,
                                    err, sizeof err),
                     -1);
    ck_assert(strstr(err, "after its 12288 header bytes"));
    ck_assert_int_eq(nib_vmr_layout(&h, NIB_VMR_PAGE, 3 * NIB_VMR_PAGE, 8, 9, err, sizeof err), -1);
    ck_assert(strstr(err, "neither one page nor two"));
}
END_TEST

/* A vision model's header is two pages (its tensor table on the second):
 * the rings start after both, and the multiplexer accepts that layout. */
START_TEST(vision_header_takes_two_pages_before_the_rings)
{
    char err[200];
    nib_vmr_init(mux_h(), size, 77, 8);
    guest_boot_header(2, NIB_SHM_HEADER_MEMFD_SIZE_TENSOR);
    ck_assert_uint_eq(mux_h()->app_header_size, NIB_SHM_HEADER_MEMFD_SIZE_TENSOR);
    ck_assert_uint_eq(mux_h()->ring_offset[0],
                      NIB_VMR_APP_HEADER_OFFSET + NIB_SHM_HEADER_MEMFD_SIZE_TENSOR);
    ck_assert_msg(mux_check(err, sizeof err) == 0, "%s", err);
    /* The same layout claimed as a decoder's one-page header is refused:
     * the appliance header says two pages. */
    mux_h()->app_header_size = NIB_SHM_HEADER_MEMFD_SIZE;
    ck_assert_int_eq(mux_check(err, sizeof err), -1);
    ck_assert(strstr(err, "app_header_size 4096"));
}
END_TEST

START_TEST(mailbox_crosses_the_two_mappings)
{
    char err[160];
    nib_vmr_init(mux_h(), size, 77, 4);
    guest_boot(4);
    uint32_t seen = 0;
    struct nib_vmr_cmd got;
    ck_assert_int_eq(nib_vmr_cmd_take(guest_h(), seen, &got), 0); /* nothing posted */
    struct nib_vmr_cmd c = {.seq = 1, .type = NIB_VMR_CMD_ATTACH, .ring = 3, .uid = 1000};
    nib_vmr_cmd_post(mux_h(), &c);
    ck_assert_int_eq(nib_vmr_cmd_take(guest_h(), seen, &got), 1);
    ck_assert_int_eq(nib_vmr_parse_cmd(&got, guest_h()->n_rings, err, sizeof err),
                     NIB_VMR_CMD_ATTACH);
    ck_assert_uint_eq(got.ring, 3);
    ck_assert_uint_eq(got.uid, 1000);
    seen = got.seq;
    ck_assert_int_eq(nib_vmr_cmd_take(guest_h(), seen, &got), 0); /* taken once */
    struct nib_vmr_ans none;
    ck_assert_int_eq(nib_vmr_ans_take(mux_h(), 1, &none), 0); /* not answered yet */
    struct nib_vmr_ans a = {.seq = 1, .type = NIB_VMR_CMD_ATTACH, .ring = 3, .attach_seq = 1};
    nib_vmr_ans_post(guest_h(), &a);
    struct nib_vmr_ans back;
    ck_assert_int_eq(nib_vmr_ans_take(mux_h(), 1, &back), 1);
    ck_assert_int_eq(nib_vmr_parse_ans(&back, &c, err, sizeof err), 0);
    ck_assert_uint_eq(back.attach_seq, 1);
    /* Answers that are not to the command sent, or malformed. */
    struct nib_vmr_ans bad = back;
    bad.ring = 2;
    ck_assert_int_eq(nib_vmr_parse_ans(&bad, &c, err, sizeof err), -1);
    bad = back;
    bad.type = NIB_VMR_CMD_DETACH;
    ck_assert_int_eq(nib_vmr_parse_ans(&bad, &c, err, sizeof err), -1);
    bad = back;
    bad.status = NIB_CTL_NOT_READY + 1;
    ck_assert_int_eq(nib_vmr_parse_ans(&bad, &c, err, sizeof err), -1);
    ck_assert(strstr(err, "status"));
    bad = back;
    bad.reserved[43] = 1;
    ck_assert_int_eq(nib_vmr_parse_ans(&bad, &c, err, sizeof err), -1);
    struct nib_vmr_cmd stop = {.seq = 2, .type = NIB_VMR_CMD_STOP};
    struct nib_vmr_ans sa = {.seq = 2, .type = NIB_VMR_CMD_STOP, .attach_seq = 5};
    ck_assert_int_eq(nib_vmr_parse_ans(&sa, &stop, err, sizeof err), -1);
    ck_assert(strstr(err, "attach_seq"));
}
END_TEST

START_TEST(commands_are_checked)
{
    char err[160];
    struct nib_vmr_cmd ok[] = {
        {.seq = 1, .type = NIB_VMR_CMD_ATTACH, .ring = 0, .uid = 5},
        {.seq = 2, .type = NIB_VMR_CMD_DETACH, .ring = 3},
        {.seq = 3, .type = NIB_VMR_CMD_STOP},
    };
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(nib_vmr_parse_cmd(&ok[i], 4, err, sizeof err), (int)ok[i].type);
    struct {
        struct nib_vmr_cmd c;
        const char *want;
    } bad[] = {
        {{.type = 0}, "unknown command type 0"},
        {{.type = 9}, "unknown command type 9"},
        {{.type = NIB_VMR_CMD_ATTACH, .ring = 4}, "ring 4, the appliance has 4"},
        {{.type = NIB_VMR_CMD_DETACH, .ring = ~0u}, "ring"},
        {{.type = NIB_VMR_CMD_STOP, .ring = 1}, "STOP names a ring"},
        {{.type = NIB_VMR_CMD_DETACH, .uid = 1}, "uid"},
        {{.type = NIB_VMR_CMD_ATTACH, .reserved = {[47] = 1}}, "reserved"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        ck_assert_int_eq(nib_vmr_parse_cmd(&bad[i].c, 4, err, sizeof err), -1);
        ck_assert_msg(strstr(err, bad[i].want), "case %zu: \"%s\"", i, err);
    }
}
END_TEST

START_TEST(heartbeat_watch_and_backoff)
{
    uint64_t shared = 0, count = 0;
    struct nib_vmr_watch w;
    nib_vmr_watch_start(&w, nib_vmr_beat_read(&shared), 1000);
    ck_assert_int_eq(nib_vmr_watch_alive(&w, nib_vmr_beat_read(&shared), 1000 + 4999, 5000), 1);
    ck_assert_int_eq(nib_vmr_watch_alive(&w, nib_vmr_beat_read(&shared), 1000 + 5000, 5000), 0);
    nib_vmr_beat(&shared, &count);
    ck_assert_uint_eq(shared, 1);
    ck_assert_int_eq(nib_vmr_watch_alive(&w, nib_vmr_beat_read(&shared), 9000, 5000), 1);
    ck_assert_int_eq(nib_vmr_watch_alive(&w, nib_vmr_beat_read(&shared), 9000 + 4999, 5000), 1);
    ck_assert_int_eq(nib_vmr_watch_alive(&w, nib_vmr_beat_read(&shared), 9000 + 5000, 5000), 0);
    /* The writer never reads its word back: a scribble does not steer it. */
    shared = 100;
    nib_vmr_beat(&shared, &count);
    ck_assert_uint_eq(shared, 2);
    ck_assert_int_eq(nib_vmr_watch_alive(&w, nib_vmr_beat_read(&shared), 15000, 5000), 1);
    /* A beat that moves backwards (a reboot's fresh counter) is movement. */
    ck_assert_int_eq(nib_vmr_watch_alive(&w, 1, 20000, 5000), 1);
    ck_assert_int_eq(nib_vmr_watch_alive(&w, 1, 25000, 5000), 0);
    uint64_t b = 0, steps = 0;
    do {
        uint64_t n = nib_vmr_backoff(b);
        ck_assert_uint_ge(n, b);
        ck_assert_uint_le(n, NIB_VMR_POLL_MAX_NS);
        b = n;
    } while (b < NIB_VMR_POLL_MAX_NS && ++steps < 64);
    ck_assert_uint_eq(nib_vmr_backoff(0), NIB_VMR_POLL_MIN_NS);
    ck_assert_uint_eq(b, NIB_VMR_POLL_MAX_NS);
    ck_assert_uint_eq(nib_vmr_backoff(NIB_VMR_POLL_MAX_NS), NIB_VMR_POLL_MAX_NS);
    ck_assert_uint_le(steps, 8);
}
END_TEST

TU_SUITE("vm-region", "vm-region", setup, teardown, 0,
         region_size_is_a_power_of_two_that_holds_the_rings,
         guest_accepts_the_multiplexer_line_and_refuses_each_fault,
         multiplexer_accepts_the_guest_layout_and_refuses_each_fault,
         layout_fits_what_the_region_and_multiplexer_allow,
         vision_header_takes_two_pages_before_the_rings, mailbox_crosses_the_two_mappings,
         commands_are_checked, heartbeat_watch_and_backoff)
