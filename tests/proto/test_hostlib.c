/* libnibhost against segments made by hand (every inconsistent header is
 * refused with the field named; a layout of another version is refused as
 * such) and against the real serve loop running on a thread over a real
 * /dev/shm segment: back-pressure, cancel, release, wait timeouts, dead
 * hosts' slots reclaimed, and every way of noticing the appliance is gone. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model_blob/blob_view.h"
#include "rt/serve.h"
#include "proto/private/sync.h"
#include "proto/shm_layout.h"
#include "tests/common/test_util.h"
#include "tools/host/nibhost.h"

static char name[64], path[80];
static void *seg;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A segment as a v2 appliance (this process) would write it, READY. */
static void make_segment(uint64_t size)
{
    static int n;
    snprintf(name, sizeof name, "hl%d-%d", (int)getpid(), n++);
    snprintf(path, sizeof path, "/nibble-%s", name);
    int fd = shm_open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
    seg = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(seg, MAP_FAILED);
    close(fd);
    struct nib_shm_header *h = seg;
    if (size < sizeof *h)
        return;
    h->magic = NIB_SHM_MAGIC;
    h->version = NIB_SHM_VERSION;
    h->header_size = sizeof *h;
    h->segment_size = NIB_SHM_SIZE;
    h->epoch = 1;
    h->n_slots = NIB_SLOTS;
    h->slot_size = sizeof(struct nib_slot);
    h->slots_offset = NIB_SHM_SLOTS_OFFSET;
    h->stats_offset = NIB_SHM_STATS_OFFSET;
    h->appliance_pid = (uint32_t)getpid();
    h->vocab_size = 512;
    h->prompt_max = NIB_PROMPT_MAX;
    h->slot_tokens = NIB_SLOT_TOKENS;
    h->slot_text = NIB_SLOT_TEXT;
    h->ctx_len = 256;
    h->bos_id = 1;
    h->eos_id = 2;
    h->add_bos = 1;
    h->errmsg_max = NIB_ERRMSG_MAX;
    h->stats_size = sizeof(struct nib_stats);
    h->heartbeat_ns = nib_now_ns();
    h->state = NIB_APP_READY;
}

static void drop_segment(uint64_t size)
{
    munmap(seg, size);
    shm_unlink(path);
}

/* Attach must fail with a message containing `want`. */
static void refused(const char *want)
{
    struct nib_host *h;
    ck_assert_int_ne(nib_host_attach(&h, name), NIB_HOST_OK);
    ck_assert_msg(strstr(nib_host_error(h), want), "error '%s' should mention '%s'",
                  nib_host_error(h), want);
    nib_host_detach(h);
}

START_TEST(no_segment_is_a_clear_error)
{
    snprintf(name, sizeof name, "hl%d-none", (int)getpid());
    refused("no appliance is serving");
    snprintf(name, sizeof name, "bad/name");
    refused("may only hold");
}
END_TEST

START_TEST(short_or_foreign_files_refused)
{
    make_segment(100);
    refused("too small");
    drop_segment(100);
    make_segment(NIB_SHM_SIZE);
    ((struct nib_shm_header *)seg)->magic ^= 1;
    refused("bad magic");
    drop_segment(NIB_SHM_SIZE);
}
END_TEST

START_TEST(other_layout_version_refused)
{
    const uint32_t versions[] = {1, NIB_SHM_VERSION + 1, 0xFFFFFFFFu};
    for (int i = 0; i < 3; i++) {
        /* Another version may have another size: only the header is there. */
        make_segment(i == 0 ? 4096 : NIB_SHM_SIZE);
        ((struct nib_shm_header *)seg)->version = versions[i];
        char want[96];
        snprintf(want, sizeof want, "layout version %u, this host library speaks version %u",
                 versions[i], NIB_SHM_VERSION);
        refused(want);
        drop_segment(i == 0 ? 4096 : NIB_SHM_SIZE);
    }
}
END_TEST

/* Every field a host relies on, made wrong one at a time. */
START_TEST(inconsistent_header_refused_field_by_field)
{
    struct {
        size_t off, width;
        uint64_t value;
        const char *want;
    } cases[] = {
        {offsetof(struct nib_shm_header, header_size), 4, 128, "header_size"},
        {offsetof(struct nib_shm_header, segment_size), 8, NIB_SHM_SIZE * 2, "segment_size"},
        {offsetof(struct nib_shm_header, n_slots), 4, 1000, "n_slots"},
        {offsetof(struct nib_shm_header, slot_size), 4, 64, "slot_size"},
        {offsetof(struct nib_shm_header, slots_offset), 8, 1ull << 40, "slots_offset"},
        {offsetof(struct nib_shm_header, stats_offset), 8, 8, "stats_offset"},
        {offsetof(struct nib_shm_header, prompt_max), 4, 1u << 30, "prompt_max"},
        {offsetof(struct nib_shm_header, slot_tokens), 4, 5, "slot_tokens"},
        {offsetof(struct nib_shm_header, slot_text), 4, 0, "slot_text"},
        {offsetof(struct nib_shm_header, errmsg_max), 4, 4096, "errmsg_max"},
        {offsetof(struct nib_shm_header, stats_size), 4, 1u << 20, "stats_size"},
        {offsetof(struct nib_shm_header, vocab_size), 4, 0, "vocab_size"},
        {offsetof(struct nib_shm_header, ctx_len), 4, 0, "ctx_len"},
        {offsetof(struct nib_shm_header, bos_id), 4, 512, "bos_id"},
        {offsetof(struct nib_shm_header, eos_id), 4, 99999, "eos_id"},
        {offsetof(struct nib_shm_header, add_bos), 4, 7, "add_bos"},
        {offsetof(struct nib_shm_header, appliance_pid), 4, 0, "appliance_pid"},
        {offsetof(struct nib_shm_header, epoch), 8, 0, "epoch"},
        {offsetof(struct nib_shm_header, state), 4, 9, "state"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        make_segment(NIB_SHM_SIZE);
        uint8_t *p = (uint8_t *)seg + cases[i].off;
        if (cases[i].width == 4) {
            uint32_t v = (uint32_t)cases[i].value;
            memcpy(p, &v, 4);
        } else {
            memcpy(p, &cases[i].value, 8);
        }
        refused("inconsistent header");
        refused(cases[i].want);
        drop_segment(NIB_SHM_SIZE);
    }
    /* The header claims the right size but the file is shorter. */
    make_segment(NIB_SHM_SIZE - 4096);
    refused("the file is");
    drop_segment(NIB_SHM_SIZE - 4096);
}
END_TEST

START_TEST(not_ready_or_stale_refused)
{
    make_segment(NIB_SHM_SIZE);
    ((struct nib_shm_header *)seg)->state = NIB_APP_STOPPED;
    refused("not ready");
    ((struct nib_shm_header *)seg)->state = NIB_APP_READY;
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    ((struct nib_shm_header *)seg)->appliance_pid = (uint32_t)child; /* exited */
    refused("stale segment");
    drop_segment(NIB_SHM_SIZE);
}
END_TEST

/* ---- against the real serve loop on a thread ---- */

static uint8_t *blob, *mem, *scratch;
static size_t blob_size;
static struct nib_blob_view view;
static struct nib_server srv;
static pthread_t thr;
static volatile int thr_stop, thr_running;

static void *serve_thread(void *arg)
{
    (void)arg;
    while (!thr_stop)
        if (!nib_server_poll(&srv))
            sleep_ms(0);
    return NULL;
}

static void server_start(void)
{
    thr_stop = 0;
    thr_running = 1;
    ck_assert_int_eq(pthread_create(&thr, NULL, serve_thread, NULL), 0);
}

static void server_stop(void)
{
    if (!thr_running)
        return;
    thr_stop = 1;
    pthread_join(thr, NULL);
    thr_running = 0;
}

static void live_setup(void)
{
    char err[256];
    blob = tu_read_file(tu_env_path("NIB_TEST_BLOB"), &blob_size);
    ck_assert_int_eq(nib_blob_open(&view, blob, blob_size, 1, err, sizeof err), 0);
    mem = aligned_alloc(64, (view.mem_size + 63) & ~63ull);
    scratch = aligned_alloc(64, nib_server_scratch_footprint());
    make_segment(NIB_SHM_SIZE);
    memset(seg, 0, NIB_SHM_SIZE);
    nib_server_init(&srv, &view, mem, scratch, seg, (uint32_t)getpid(), 42);
    nib_store_rel(&srv.hdr->state, NIB_APP_READY);
}

static void live_teardown(void)
{
    server_stop();
    drop_segment(NIB_SHM_SIZE);
    free(blob);
    free(mem);
    free(scratch);
}

static struct nib_host *attach(void)
{
    struct nib_host *h;
    int rc = nib_host_attach(&h, name);
    ck_assert_msg(rc == NIB_HOST_OK, "attach: %s", nib_host_error(h));
    return h;
}

START_TEST(submit_wait_release)
{
    struct nib_host *h = attach();
    ck_assert_uint_eq(nib_host_epoch(h), 42);
    ck_assert_uint_eq(nib_host_vocab_size(h), view.h->hp.vocab_size);
    server_start();
    struct nib_gen_params p = {.max_tokens = 6, .request_id = 0xABCDEF};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "Once upon", 9, &p, &r), NIB_HOST_OK);
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert(pr.done);
    ck_assert(pr.status == NIB_ST_OK || pr.status == NIB_ST_EOS);
    ck_assert_uint_eq(pr.request_id, 0xABCDEF);
    ck_assert_uint_eq(pr.tokens[0], view.h->hp.bos_id);
    ck_assert_uint_le(pr.n_tokens - pr.n_prompt, 6);
    /* The same prompt as ids gives the same continuation. */
    uint32_t ids[64], gen[8];
    uint32_t n_ids = pr.n_prompt, n_gen = pr.n_tokens - pr.n_prompt;
    memcpy(ids, pr.tokens, n_ids * 4);
    memcpy(gen, pr.tokens + n_ids, n_gen * 4);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_ERR); /* twice */
    ck_assert_int_eq(nib_host_poll(h, &r, &pr), NIB_HOST_ERR);
    p.prompt_ids = 1;
    ck_assert_int_eq(nib_host_submit(h, ids, n_ids, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_uint_eq(pr.n_prompt, n_ids);
    ck_assert_uint_eq(pr.n_tokens - pr.n_prompt, n_gen);
    ck_assert_mem_eq(pr.tokens + n_ids, gen, n_gen * 4);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    /* Arguments the appliance would refuse are refused here first. */
    uint32_t bad = 100000;
    ck_assert_int_eq(nib_host_submit(h, &bad, 1, &p, &r), NIB_HOST_ERR);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "vocabulary"));
    p.prompt_ids = 0;
    p.temperature = -1;
    ck_assert_int_eq(nib_host_submit(h, "x", 1, &p, &r), NIB_HOST_ERR);
    nib_host_detach(h);
}
END_TEST

START_TEST(full_table_is_busy_never_loss)
{
    struct nib_host *h = attach();
    struct nib_req_handle r[NIB_SLOTS + 1];
    struct nib_gen_params p = {.max_tokens = 2};
    for (int i = 0; i < NIB_SLOTS; i++) {
        p.request_id = (uint64_t)i;
        ck_assert_int_eq(nib_host_submit(h, "abc", 3, &p, &r[i]), NIB_HOST_OK);
    }
    ck_assert_int_eq(nib_host_submit(h, "abc", 3, &p, &r[NIB_SLOTS]), NIB_HOST_BUSY);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "busy"));
    p.busy_wait_ms = 30;
    ck_assert_int_eq(nib_host_submit(h, "abc", 3, &p, &r[NIB_SLOTS]), NIB_HOST_BUSY);
    /* Nothing served yet: a wait times out, and says so. */
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_wait(h, &r[0], NIB_HOST_WAIT_DONE, 20, &pr), NIB_HOST_TIMEOUT);
    ck_assert_int_eq(nib_host_wait(h, &r[0], 0, 20, &pr), NIB_HOST_TIMEOUT);
    server_start();
    for (int i = 0; i < NIB_SLOTS; i++) {
        ck_assert_int_eq(nib_host_wait(h, &r[i], NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
        ck_assert_uint_eq(pr.request_id, (uint64_t)i);
        ck_assert_int_eq(nib_host_release(h, &r[i]), NIB_HOST_OK);
    }
    ck_assert_uint_eq(srv.stats->requests_done, NIB_SLOTS);
    nib_host_detach(h);
}
END_TEST

START_TEST(cancel_completes_and_frees_the_slot)
{
    struct nib_host *h = attach();
    struct nib_gen_params p = {.max_tokens = 4000};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "Once upon a time", 16, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_cancel(h, &r), NIB_HOST_OK);
    server_start();
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_uint_eq(pr.status, NIB_ST_CANCELLED);
    ck_assert_uint_le(pr.n_tokens - pr.n_prompt, 1);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    /* Every slot can be claimed again. */
    server_stop();
    struct nib_req_handle all[NIB_SLOTS];
    p.max_tokens = 1;
    for (int i = 0; i < NIB_SLOTS; i++)
        ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &all[i]), NIB_HOST_OK);
    ck_assert_uint_eq(srv.stats->requests_cancelled, 1);
    nib_host_detach(h);
}
END_TEST

START_TEST(dead_hosts_slots_reclaimed)
{
    /* A child submits two requests and dies without reading them; another
     * claims a slot by hand and dies before submitting. */
    pid_t child = fork();
    if (child == 0) {
        struct nib_host *h;
        struct nib_req_handle r;
        struct nib_gen_params p = {.max_tokens = 3};
        if (nib_host_attach(&h, name) || nib_host_submit(h, "a", 1, &p, &r) ||
            nib_host_submit(h, "b", 1, &p, &r))
            _exit(1);
        struct nib_slot *s = nib_shm_slot(seg, NIB_SLOTS - 1);
        s->owner_pid = (uint32_t)getpid();
        nib_store_rel(&s->state, NIB_SLOT_CLAIMED);
        _exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    server_start();
    for (int i = 0; i < 500 && srv.stats->slots_reclaimed < 3; i++)
        sleep_ms(10);
    ck_assert_uint_eq(srv.stats->slots_reclaimed, 3);
    for (uint32_t i = 0; i < NIB_SLOTS; i++)
        ck_assert_uint_eq(nib_load_acq(&nib_shm_slot(seg, i)->state), NIB_SLOT_FREE);
}
END_TEST

static int owner_dies_after_first_check(uint32_t pid)
{
    static int calls;
    (void)pid;
    return calls++ == 0; /* alive at pick-up, dead at the next check */
}

START_TEST(running_request_of_dead_owner_stops_early)
{
    struct nib_host *h = attach();
    struct nib_gen_params p = {.max_tokens = 4000};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "Once", 4, &p, &r), NIB_HOST_OK);
    srv.last_reclaim_ns = nib_now_ns(); /* keep the periodic reclaim out of this */
    srv.owner_alive = owner_dies_after_first_check;
    ck_assert_int_eq(nib_server_poll(&srv), 1);
    struct nib_slot *s = nib_shm_slot(seg, r.slot);
    ck_assert_uint_eq(nib_load_acq(&s->state), NIB_SLOT_FREE);
    ck_assert_uint_eq(s->status, NIB_ST_OWNER_GONE);
    /* Stopped at the first check, NIB_OWNER_CHECK_TOKENS tokens in at most. */
    ck_assert_uint_le(s->n_tokens - s->n_prompt, NIB_OWNER_CHECK_TOKENS);
    ck_assert_uint_eq(srv.stats->slots_reclaimed, 1);
    nib_host_detach(h);
}
END_TEST

START_TEST(gone_when_stopped_or_epoch_changes)
{
    struct nib_host *h = attach();
    ck_assert_int_eq(nib_host_check(h), NIB_HOST_OK);
    struct nib_gen_params p = {.max_tokens = 2};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r), NIB_HOST_OK);
    struct nib_progress pr;
    srv.hdr->state = NIB_APP_STOPPING;
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 5000, &pr), NIB_HOST_GONE);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "stopping"));
    srv.hdr->state = NIB_APP_READY;
    srv.hdr->epoch = 43;
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r), NIB_HOST_GONE);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "restarted"));
    nib_host_detach(h);
}
END_TEST

START_TEST(gone_when_appliance_dies)
{
    pid_t app = fork();
    if (app == 0) {
        pause();
        _exit(0);
    }
    srv.hdr->appliance_pid = (uint32_t)app;
    struct nib_host *h = attach();
    struct nib_gen_params p = {.max_tokens = 2};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r), NIB_HOST_OK);
    kill(app, SIGKILL);
    waitpid(app, NULL, 0);
    struct nib_progress pr;
    /* Nobody serves the request; the wait ends because the pid is gone. */
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 30000, &pr), NIB_HOST_GONE);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "died"));
    nib_host_detach(h);
}
END_TEST

/* Put a new segment under `path` with seg's header but another epoch. */
static void *replace_name(uint64_t epoch)
{
    shm_unlink(path);
    int fd = shm_open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)NIB_SHM_SIZE), 0);
    struct nib_shm_header *nh = mmap(NULL, NIB_SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(nh, MAP_FAILED);
    close(fd);
    memcpy(nh, seg, sizeof *nh);
    nh->epoch = epoch;
    nh->heartbeat_ns = nib_now_ns();
    return nh;
}

START_TEST(gone_when_name_moves_on)
{
    /* The appliance's pid still exists (as after pid reuse) but its
     * heartbeat is stale: the name is looked at again. */
    struct nib_host *h = attach();
    srv.hdr->heartbeat_ns = 1;
    shm_unlink(path);
    ck_assert_int_eq(nib_host_check(h), NIB_HOST_GONE);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "removed"));
    nib_host_detach(h);
    /* Attached to a boot of epoch 42 whose name then goes to epoch 4242. */
    struct nib_shm_header *a = replace_name(42);
    h = attach();
    a->heartbeat_ns = 1;
    struct nib_shm_header *b = replace_name(4242);
    ck_assert_int_eq(nib_host_check(h), NIB_HOST_GONE);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "new boot (epoch 4242"));
    nib_host_detach(h);
    munmap(a, NIB_SHM_SIZE);
    munmap(b, NIB_SHM_SIZE);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("hostlib");
    TU_CASE(s, "hand-made segments", NULL, NULL, 0, no_segment_is_a_clear_error,
        short_or_foreign_files_refused, other_layout_version_refused,
        inconsistent_header_refused_field_by_field, not_ready_or_stale_refused);
    TU_CASE(s, "serve loop", live_setup, live_teardown, 60, submit_wait_release,
        full_table_is_busy_never_loss, cancel_completes_and_frees_the_slot,
        dead_hosts_slots_reclaimed, running_request_of_dead_owner_stops_early,
        gone_when_stopped_or_epoch_changes, gone_when_appliance_dies, gone_when_name_moves_on);
    return s;
}
