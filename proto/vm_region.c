#include "proto/vm_region.h"

#include <stdio.h>
#include <string.h>

#include "proto/ctl.h"
#include "proto/private/sync.h"

#define REGION_SIZE_LIMIT (1ull << 40)

static int fail(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s", what);
    return -1;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* The appliance header is one page, or two for a vision model. */
static int app_header_size_ok(uint32_t app_header_size)
{
    return app_header_size == NIB_SHM_HEADER_MEMFD_SIZE ||
           app_header_size == NIB_SHM_HEADER_MEMFD_SIZE_TENSOR;
}

uint64_t nib_vmr_region_size(uint64_t ring_size, uint32_t app_header_size, uint32_t n_rings)
{
    if (!ring_size || ring_size % NIB_VMR_PAGE || !n_rings || n_rings > NIB_VMR_RINGS_MAX ||
        ring_size > REGION_SIZE_LIMIT || !app_header_size_ok(app_header_size))
        return 0;
    uint64_t need = NIB_VMR_APP_HEADER_OFFSET + app_header_size + ring_size * n_rings;
    uint64_t size = NIB_VMR_PAGE;
    while (size < need && size < REGION_SIZE_LIMIT)
        size *= 2;
    return size >= need ? size : 0;
}

void nib_vmr_init(struct nib_vmr_header *h, uint64_t region_size, uint64_t mux_epoch,
                  uint32_t max_rings)
{
    h->magic = NIB_VMR_MAGIC;
    h->version = NIB_VMR_VERSION;
    h->header_size = sizeof *h;
    h->region_size = region_size;
    h->mux_epoch = mux_epoch;
    h->max_rings = max_rings;
}

int nib_vmr_layout(struct nib_vmr_header *h, uint64_t ring_size, uint32_t app_header_size,
                   uint32_t max_hosts, uint64_t guest_epoch, char *err, size_t errlen)
{
    if (!app_header_size_ok(app_header_size))
        return fail(err, errlen, "the appliance header is neither one page nor two");
    uint64_t first = NIB_VMR_APP_HEADER_OFFSET + app_header_size;
    if (!ring_size || ring_size % NIB_VMR_PAGE)
        return fail(err, errlen, "ring size is not a whole number of pages");
    if (h->region_size < first || h->region_size - first < ring_size) {
        snprintf(err, errlen,
                 "the shared region (%llu bytes) cannot hold one ring of %llu bytes "
                 "after its %llu header bytes",
                 (unsigned long long)h->region_size, (unsigned long long)ring_size,
                 (unsigned long long)first);
        return -1;
    }
    uint64_t fit = (h->region_size - first) / ring_size;
    uint32_t n = max_hosts;
    if (n > h->max_rings)
        n = h->max_rings;
    if (n > NIB_VMR_RINGS_MAX)
        n = NIB_VMR_RINGS_MAX;
    if (n > fit)
        n = (uint32_t)fit;
    if (!n)
        return fail(err, errlen, "the multiplexer allows no ring (max_rings 0)");
    h->guest_epoch = guest_epoch;
    h->app_header_offset = NIB_VMR_APP_HEADER_OFFSET;
    h->ring_size = ring_size;
    h->n_rings = n;
    h->app_header_size = app_header_size;
    for (uint32_t i = 0; i < NIB_VMR_RINGS_MAX; i++)
        h->ring_offset[i] = i < n ? first + (uint64_t)i * ring_size : 0;
    return 0;
}

int nib_vmr_check_mux(const struct nib_vmr_header *c, uint64_t bar_size, char *err, size_t errlen)
{
    if (c->magic != NIB_VMR_MAGIC)
        return fail(err, errlen, "region magic is not NIBLVMR1 (no multiplexer wrote it)");
    if (c->version != NIB_VMR_VERSION) {
        snprintf(err, errlen, "region version %u, this appliance speaks %u", c->version,
                 NIB_VMR_VERSION);
        return -1;
    }
    if (c->header_size != sizeof *c) {
        snprintf(err, errlen, "region header_size %u, want %zu", c->header_size, sizeof *c);
        return -1;
    }
    if (c->region_size != bar_size) {
        snprintf(err, errlen, "region_size %llu differs from the device's memory (%llu bytes)",
                 (unsigned long long)c->region_size, (unsigned long long)bar_size);
        return -1;
    }
    if (c->region_size < 3 * (uint64_t)NIB_VMR_PAGE || (c->region_size & (c->region_size - 1)))
        return fail(err, errlen, "region_size is not a power of two of at least 3 pages");
    if (!c->mux_epoch)
        return fail(err, errlen, "region mux_epoch is 0");
    if (!c->max_rings || c->max_rings > NIB_VMR_RINGS_MAX) {
        snprintf(err, errlen, "region max_rings %u, want 1..%u", c->max_rings, NIB_VMR_RINGS_MAX);
        return -1;
    }
    if (c->reserved0)
        return fail(err, errlen, "region reserved0 is not 0");
    return 0;
}

int nib_vmr_check_layout(const struct nib_vmr_header *c, const struct nib_shm_header *app,
                         uint64_t region_size, uint64_t mux_epoch, char *err, size_t errlen)
{
    if (c->magic != NIB_VMR_MAGIC || c->version != NIB_VMR_VERSION || c->header_size != sizeof *c ||
        c->region_size != region_size || c->mux_epoch != mux_epoch)
        return fail(err, errlen, "the appliance rewrote the multiplexer's identity line");
    if (!c->guest_epoch)
        return fail(err, errlen, "guest_epoch is 0");
    if (c->guest_epoch != app->epoch)
        return fail(err, errlen, "guest_epoch differs from the appliance header's epoch");
    if (c->app_header_offset != NIB_VMR_APP_HEADER_OFFSET)
        return fail(err, errlen, "app_header_offset is not 4096");
    if (!app_header_size_ok(c->app_header_size) || c->app_header_size != app->header_memfd_size) {
        snprintf(err, errlen,
                 "app_header_size %u, want 4096 or 8192 and the appliance header's "
                 "header_memfd_size (%llu)",
                 c->app_header_size, (unsigned long long)app->header_memfd_size);
        return -1;
    }
    if (region_size < NIB_VMR_APP_HEADER_OFFSET + (uint64_t)c->app_header_size)
        return fail(err, errlen, "the appliance header does not fit in the region");
    if (!c->n_rings || c->n_rings > c->max_rings || c->n_rings > NIB_VMR_RINGS_MAX) {
        snprintf(err, errlen, "n_rings %u, want 1..%u", c->n_rings, c->max_rings);
        return -1;
    }
    if (app->max_hosts != c->n_rings)
        return fail(err, errlen, "n_rings differs from the appliance header's max_hosts");
    if (c->ring_size != app->ring_size)
        return fail(err, errlen, "ring_size differs from the appliance header's");
    if (!c->ring_size || c->ring_size % NIB_VMR_PAGE || c->ring_size > region_size)
        return fail(err, errlen, "ring_size is not a whole number of pages within the region");
    uint64_t first = NIB_VMR_APP_HEADER_OFFSET + c->app_header_size;
    for (uint32_t i = 0; i < c->n_rings; i++) {
        uint64_t off = c->ring_offset[i];
        if (off % NIB_VMR_PAGE || off < first || off > region_size - c->ring_size) {
            snprintf(err, errlen,
                     "ring_offset[%u] = %llu is not a page inside the region after "
                     "the header pages",
                     i, (unsigned long long)off);
            return -1;
        }
        for (uint32_t j = 0; j < i; j++) {
            uint64_t o = c->ring_offset[j];
            if (off < o + c->ring_size && o < off + c->ring_size) {
                snprintf(err, errlen, "ring %u overlaps ring %u", i, j);
                return -1;
            }
        }
    }
    for (uint32_t i = c->n_rings; i < NIB_VMR_RINGS_MAX; i++)
        if (c->ring_offset[i])
            return fail(err, errlen, "ring_offset past n_rings is not 0");
    if (c->reserved3 || !all_zero(c->reserved6, sizeof c->reserved6))
        return fail(err, errlen, "a reserved field of the region is not 0");
    return 0;
}

int nib_vmr_parse_cmd(const struct nib_vmr_cmd *c, uint32_t n_rings, char *err, size_t errlen)
{
    switch (c->type) {
    case NIB_VMR_CMD_ATTACH:
    case NIB_VMR_CMD_DETACH:
        if (c->ring >= n_rings) {
            snprintf(err, errlen, "command ring %u, the appliance has %u", c->ring, n_rings);
            return -1;
        }
        break;
    case NIB_VMR_CMD_STOP:
        if (c->ring)
            return fail(err, errlen, "STOP names a ring");
        break;
    default: snprintf(err, errlen, "unknown command type %u", c->type); return -1;
    }
    if (c->type != NIB_VMR_CMD_ATTACH && c->uid)
        return fail(err, errlen, "uid in a command other than ATTACH");
    if (!all_zero(c->reserved, sizeof c->reserved))
        return fail(err, errlen, "command reserved bytes are not 0");
    return (int)c->type;
}

int nib_vmr_parse_ans(const struct nib_vmr_ans *a, const struct nib_vmr_cmd *sent, char *err,
                      size_t errlen)
{
    if (a->seq != sent->seq || a->type != sent->type || a->ring != sent->ring)
        return fail(err, errlen, "the answer is not to the command sent");
    if (a->status > NIB_CTL_NOT_READY) {
        snprintf(err, errlen, "answer status %u unknown", a->status);
        return -1;
    }
    if (a->type != NIB_VMR_CMD_ATTACH && a->attach_seq)
        return fail(err, errlen, "attach_seq in an answer other than ATTACH");
    if (!all_zero(a->reserved, sizeof a->reserved))
        return fail(err, errlen, "answer reserved bytes are not 0");
    return 0;
}

void nib_vmr_watch_start(struct nib_vmr_watch *w, uint64_t beat, uint64_t now_ns)
{
    w->beat = beat;
    w->seen_ns = now_ns;
}

int nib_vmr_watch_alive(struct nib_vmr_watch *w, uint64_t beat, uint64_t now_ns, uint64_t stale_ns)
{
    if (beat != w->beat) {
        w->beat = beat;
        w->seen_ns = now_ns;
        return 1;
    }
    return now_ns - w->seen_ns < stale_ns;
}

uint64_t nib_vmr_backoff(uint64_t prev_ns)
{
    if (prev_ns < NIB_VMR_POLL_MIN_NS)
        return NIB_VMR_POLL_MIN_NS;
    return prev_ns >= NIB_VMR_POLL_MAX_NS / 2 ? NIB_VMR_POLL_MAX_NS : prev_ns * 2;
}

void nib_vmr_cmd_post(struct nib_vmr_header *h, const struct nib_vmr_cmd *c)
{
    struct nib_vmr_cmd *m = &h->cmd;
    m->type = c->type;
    m->ring = c->ring;
    m->uid = c->uid;
    memcpy(m->reserved, c->reserved, sizeof m->reserved);
    /* release: pairs with the acquire in nib_vmr_cmd_take */
    nib_store_rel(&m->seq, c->seq);
}

int nib_vmr_cmd_take(const struct nib_vmr_header *h, uint32_t last_seq, struct nib_vmr_cmd *out)
{
    /* acquire: pairs with the release in nib_vmr_cmd_post */
    uint32_t seq = nib_load_acq(&h->cmd.seq);
    if (seq == last_seq)
        return 0;
    memcpy(out, &h->cmd, sizeof *out);
    out->seq = seq;
    return 1;
}

void nib_vmr_ans_post(struct nib_vmr_header *h, const struct nib_vmr_ans *a)
{
    struct nib_vmr_ans *m = &h->ans;
    m->type = a->type;
    m->status = a->status;
    m->ring = a->ring;
    m->attach_seq = a->attach_seq;
    memcpy(m->reserved, a->reserved, sizeof m->reserved);
    /* release: pairs with the acquire in nib_vmr_ans_take */
    nib_store_rel(&m->seq, a->seq);
}

int nib_vmr_ans_take(const struct nib_vmr_header *h, uint32_t want_seq, struct nib_vmr_ans *out)
{
    /* acquire: pairs with the release in nib_vmr_ans_post */
    uint32_t seq = nib_load_acq(&h->ans.seq);
    if (seq != want_seq)
        return 0;
    memcpy(out, &h->ans, sizeof *out);
    out->seq = seq;
    return 1;
}

void nib_vmr_beat(uint64_t *shared, uint64_t *count)
{
    *count += 1;
    /* release: pairs with the acquire in nib_vmr_beat_read */
    nib_store_rel(shared, *count);
}

uint64_t nib_vmr_beat_read(const uint64_t *shared)
{
    /* acquire: pairs with the release in nib_vmr_beat */
    return nib_load_acq(shared);
}
