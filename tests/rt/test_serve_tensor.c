/* The serve loop with a vision model (docs/ring.md section 6.4), in
 * process, over memfd rings as boot makes them and a host attached over a
 * socketpair: the header's tensor table and geometry come from the blob's
 * io table; a TENSOR request comes back byte-exact through an identity
 * blob (tests/common/vision_blob.h; outputs in another order than the
 * inputs); every malformed request (wrong byte count, text or chat to a
 * vision model, tokens, temperature, flags, reserved) is refused naming
 * the field, and the requests after it are served; a host that changes
 * its slot during the run gets nothing written. */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "model_blob/blob_view.h"
#include "proto/ctl.h"
#include "proto/private/ctl_io.h"
#include "proto/private/sync.h"
#include "rt/serve.h"
#include "tests/common/test_util.h"
#include "tests/common/vision_blob.h"

static uint8_t *blob, *mem, *scratch, *ring;
static struct nib_blob_view view;
static struct nib_server srv;
static struct nib_shm_header *hdr;
static int header_fd, ring_fd, host_sock;
static uint64_t next_ticket;

static void *map_memfd(uint64_t size, int *fd)
{
    *fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ck_assert_int_ge(*fd, 0);
    ck_assert_int_eq(ftruncate(*fd, (off_t)size), 0);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    return p;
}

static void setup_which(int which)
{
    char err[256];
    blob = aligned_alloc(64, NIB_TEST_VISION_BLOB_SIZE);
    size_t n = nib_test_vision_blob(blob, which);
    ck_assert_msg(nib_blob_open(&view, blob, n, 1, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(nib_server_tensor_check(&view, err, sizeof err), 0);
    mem = aligned_alloc(64, (view.mem_size + 63) & ~63ull);
    memset(mem, 0, view.mem_size);
    scratch = aligned_alloc(64, nib_server_scratch_footprint(&view));
    hdr = map_memfd(nib_server_header_size(&view), &header_fd);
    nib_server_init(&srv, &view, mem, scratch, hdr, 1, 1234, 42);
    ring = map_memfd(hdr->ring_size, &ring_fd);
    nib_server_set_ring(&srv, 0, ring, ring_fd);
    srv.header_fd = header_fd;
    srv.uid = (uint32_t)getuid();
    srv.gid = (uint32_t)getgid();
    nib_store_rel(&hdr->state, NIB_APP_READY);
    /* attach, as libnibhost does */
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    ck_assert_int_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    ck_assert_int_ge(nib_control_adopt(&srv, sv[0], (uint32_t)getuid(), (uint32_t)getgid(), 1), 0);
    host_sock = sv[1];
    struct nib_ctl_msg m = nib_ctl_make(NIB_CTL_ATTACH);
    ck_assert_int_eq(send(host_sock, &m, sizeof m, 0), (ssize_t)sizeof m);
    nib_control_pass(&srv, 0);
    int fds[2], nfds = 0;
    ck_assert_int_eq(nib_ctl_recv(host_sock, &m, sizeof m, MSG_DONTWAIT, fds, 2, &nfds),
                     (ssize_t)sizeof m);
    ck_assert_uint_eq(m.type, NIB_CTL_ATTACHED);
    ck_assert_uint_eq(m.header_size, NIB_SHM_HEADER_MEMFD_SIZE_TENSOR);
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    next_ticket = 0;
}

static void setup_two(void)
{
    setup_which(NIB_TEST_VISION_TWO);
}

static void setup_one(void)
{
    setup_which(NIB_TEST_VISION_ONE);
}

static void teardown(void)
{
    for (int c = 0; c < NIB_CONNS_MAX; c++)
        nib_control_drop(&srv, c);
    close(host_sock);
    munmap(ring, hdr->ring_size);
    close(ring_fd);
    munmap(hdr, NIB_SHM_HEADER_MEMFD_SIZE_TENSOR);
    close(header_fd);
    free(blob);
    free(mem);
    free(scratch);
}

/* Slot i: request r with the prompt area filled from in (len bytes),
 * submitted. */
static struct nib_slot *submit(uint32_t i, const struct nib_request *r, const uint8_t *in,
                               size_t len)
{
    struct nib_slot *s = nib_ring_slot(ring, hdr, i);
    ck_assert_uint_eq(nib_load_acq(&s->state), NIB_SLOT_FREE);
    memcpy(&s->req, r, sizeof *r);
    memcpy(nib_slot_prompt(s, hdr), in, len);
    nib_store_rel(&s->ticket, ++next_ticket);
    nib_store_rel(&s->state, NIB_SLOT_SUBMITTED);
    return s;
}

static struct nib_request tensor_req(void)
{
    struct nib_request r;
    memset(&r, 0, sizeof r);
    r.kind = NIB_REQ_KIND_TENSOR;
    r.prompt_len = hdr->inputs_len;
    return r;
}

static void fill_random(uint8_t *p, size_t n, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (uint8_t)(*seed >> 56);
    }
}

static void release(struct nib_slot *s)
{
    nib_store_rel(&s->state, NIB_SLOT_FREE);
}

START_TEST(header_describes_the_model)
{
    ck_assert_uint_eq(hdr->features, NIB_FEAT_TENSOR);
    ck_assert_uint_eq(hdr->header_memfd_size, NIB_SHM_HEADER_MEMFD_SIZE_TENSOR);
    ck_assert_uint_eq(hdr->tensors_offset, NIB_SHM_TENSORS_OFFSET);
    ck_assert_uint_eq(hdr->n_inputs, 2);
    ck_assert_uint_eq(hdr->n_outputs, 2);
    ck_assert_uint_eq(hdr->vocab_size, 0);
    const struct nib_shm_tensor *t = nib_shm_tensors(hdr);
    /* what the blob's io table says, each at a 64-byte aligned offset of
     * its area, in order */
    for (uint32_t i = 0; i < 4; i++) {
        ck_assert_str_eq(t[i].name, view.io[i].name);
        ck_assert_uint_eq(t[i].dir, view.io[i].dir);
        ck_assert_uint_eq(t[i].dtype, view.io[i].dtype);
        ck_assert_uint_eq(t[i].rank, view.io[i].rank);
        ck_assert_mem_eq(t[i].dims, view.io[i].dims, sizeof t[i].dims);
        ck_assert_uint_eq(t[i].bytes, view.io[i].bytes);
        ck_assert_uint_eq(t[i].area_off % 64, 0);
    }
    ck_assert_uint_eq(t[0].area_off, 0);
    ck_assert_uint_eq(t[1].area_off, 768);
    ck_assert_uint_eq(hdr->inputs_len, 768 + 10);
    ck_assert_uint_eq(t[2].area_off, 0);
    ck_assert_uint_eq(t[3].area_off, 64);
    ck_assert_uint_eq(hdr->outputs_len, 64 + 768);
    ck_assert_uint_ge(hdr->prompt_max, hdr->inputs_len);
    ck_assert_uint_ge(hdr->slot_text, hdr->outputs_len);
    ck_assert_uint_eq(hdr->slot_tokens, 0);
    ck_assert_uint_eq(hdr->n_slots, NIB_RING_SLOTS_TENSOR);
    ck_assert_uint_le(hdr->slots_offset + hdr->n_slots * hdr->slot_size, hdr->ring_size);
    ck_assert_uint_le((uint64_t)hdr->text_offset + hdr->slot_text, hdr->slot_size);
}
END_TEST

START_TEST(tensors_come_back_byte_exact)
{
    uint64_t seed = 5;
    uint8_t in[1024];
    for (int round = 0; round < 6; round++) {
        fill_random(in, sizeof in, &seed);
        struct nib_request r = tensor_req();
        struct nib_slot *s = submit((uint32_t)round % 2, &r, in, hdr->inputs_len);
        ck_assert_int_eq(nib_server_poll(&srv), 1);
        ck_assert_uint_eq(nib_load_acq(&s->state), NIB_SLOT_DONE);
        ck_assert_msg(s->status == NIB_ST_OK, "status %u: %s", s->status, s->error);
        ck_assert_uint_eq(nib_load_acq(&s->text_len), hdr->outputs_len);
        ck_assert_uint_eq(s->n_tokens, 0);
        const uint8_t *out = (const uint8_t *)nib_slot_text(s, hdr);
        /* b_out = b (10 u8), a_out = a (768 bytes of f32, NaNs and all) */
        ck_assert_mem_eq(out + 0, in + 768, 10);
        ck_assert_mem_eq(out + 64, in + 0, 768);
        ck_assert_uint_ge(s->t_done_ns, s->t_start_ns);
        release(s);
    }
    ck_assert_uint_eq(srv.stats->requests_done, 6);
    ck_assert_uint_eq(srv.stats->tokens_run, 6);
}
END_TEST

START_TEST(one_input_aliased_output)
{
    uint64_t seed = 9;
    uint8_t in[768];
    fill_random(in, sizeof in, &seed);
    struct nib_request r = tensor_req();
    ck_assert_uint_eq(r.prompt_len, 768);
    struct nib_slot *s = submit(0, &r, in, sizeof in);
    ck_assert_int_eq(nib_server_poll(&srv), 1);
    ck_assert_uint_eq(s->status, NIB_ST_OK);
    ck_assert_mem_eq(nib_slot_text(s, hdr), in, 768);
}
END_TEST

/* r refused naming `field`; the good request after it is served. */
static void expect_refused(const struct nib_request *r, const char *field)
{
    uint8_t in[1024] = {1, 2, 3};
    struct nib_slot *s = submit(0, r, in, hdr->inputs_len);
    ck_assert_int_eq(nib_server_poll(&srv), 1);
    ck_assert_uint_eq(nib_load_acq(&s->state), NIB_SLOT_DONE);
    ck_assert_uint_eq(s->status, NIB_ST_BAD_REQUEST);
    size_t n = strlen(field);
    ck_assert_msg(!strncmp(s->error, field, n) && s->error[n] == ':', "error '%s' should name %s",
                  s->error, field);
    ck_assert_uint_eq(s->text_len, 0);
    release(s);
    struct nib_request good = tensor_req();
    s = submit(1, &good, in, hdr->inputs_len);
    ck_assert_int_eq(nib_server_poll(&srv), 1);
    ck_assert_uint_eq(s->status, NIB_ST_OK);
    ck_assert_mem_eq((const uint8_t *)nib_slot_text(s, hdr) + 64, in, 768);
    release(s);
}

START_TEST(malformed_requests_name_the_field)
{
    struct nib_request r = tensor_req();
    r.prompt_len = hdr->inputs_len - 1;
    expect_refused(&r, "prompt_len");
    r.prompt_len = hdr->inputs_len + 1;
    expect_refused(&r, "prompt_len");
    r.prompt_len = 0;
    expect_refused(&r, "prompt_len");
    r.prompt_len = UINT32_MAX;
    expect_refused(&r, "prompt_len");
    r = tensor_req();
    r.max_tokens = 4;
    expect_refused(&r, "max_tokens");
    r = tensor_req();
    r.temperature = 0.5f;
    expect_refused(&r, "temperature");
    r = tensor_req();
    r.flags = NIB_REQ_NO_BOS;
    expect_refused(&r, "flags");
    r = tensor_req();
    r.reserved[35] = 1;
    expect_refused(&r, "reserved");
    /* text, chat and measurements to a vision model */
    const uint32_t kinds[] = {NIB_REQ_KIND_TEXT, NIB_REQ_KIND_CHAT, NIB_REQ_KIND_MEASURE, 4, 99};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        memset(&r, 0, sizeof r);
        r.kind = kinds[i];
        r.prompt_len = 5;
        r.max_tokens = 8;
        expect_refused(&r, "kind");
    }
    ck_assert_uint_eq(srv.stats->requests_rejected, 13);
}
END_TEST

static void flip_to_free(struct nib_server *s, void *arg)
{
    (void)s;
    nib_store_rel(&((struct nib_slot *)arg)->state, NIB_SLOT_FREE);
}

START_TEST(slot_changed_during_the_run_gets_nothing)
{
    uint8_t in[1024];
    memset(in, 0x5a, sizeof in);
    struct nib_request r = tensor_req();
    struct nib_slot *s = submit(0, &r, in, hdr->inputs_len);
    memset(nib_slot_text(s, hdr), 0, hdr->slot_text);
    srv.pass_hook = flip_to_free;
    srv.pass_hook_arg = s;
    ck_assert_int_eq(nib_server_poll(&srv), 1);
    srv.pass_hook = NULL;
    ck_assert_uint_eq(nib_load_acq(&s->state), NIB_SLOT_FREE);
    ck_assert_uint_eq(s->text_len, 0);
    const uint8_t *out = (const uint8_t *)nib_slot_text(s, hdr);
    for (uint32_t i = 0; i < hdr->outputs_len; i++)
        ck_assert_uint_eq(out[i], 0);
    ck_assert_uint_eq(srv.stats->requests_host_changed, 1);
}
END_TEST

START_TEST(cancelled_before_the_run)
{
    uint8_t in[1024] = {0};
    struct nib_request r = tensor_req();
    struct nib_slot *s = nib_ring_slot(ring, hdr, 0);
    s->cancel = 1;
    s = submit(0, &r, in, hdr->inputs_len);
    ck_assert_int_eq(nib_server_poll(&srv), 1);
    ck_assert_uint_eq(s->status, NIB_ST_CANCELLED);
    ck_assert_uint_eq(s->text_len, 0);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("serve-tensor");
    TU_CASE(s, "two", setup_two, teardown, 60, header_describes_the_model,
            tensors_come_back_byte_exact, malformed_requests_name_the_field,
            slot_changed_during_the_run_gets_nothing, cancelled_before_the_run);
    TU_CASE(s, "one", setup_one, teardown, 60, one_input_aliased_output);
    return s;
}
