/* The multiplexer's relay (tools/cli/vm_relay.c) against a guest that
 * writes hostile values into its ring of the VM region: each value is
 * clamped or refused before anything reaches the local host, and shutdown
 * ends what was forwarded without touching results the host has not read.
 * Two rings in plain memory, no VM. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/test_util.h"
#include "tools/cli/vm_relay.h"

static struct nib_shm_header h;
static uint8_t *local, *remote;
static uint32_t done_seq;
static struct vm_relay_ring r;

static void setup(void)
{
    memset(&h, 0, sizeof h);
    nib_ring_geometry(&h, 16, 4); /* 16 ids, text area rounded up to 64 bytes */
    local = aligned_alloc(64, h.ring_size);
    remote = aligned_alloc(64, h.ring_size);
    ck_assert(local && remote);
    memset(local, 0, h.ring_size);
    memset(remote, 0, h.ring_size);
    done_seq = 0;
    r = (struct vm_relay_ring){.local = local, .remote = remote, .done_seq = &done_seq};
    vm_relay_reset(&r);
}

static void teardown(void)
{
    free(local);
    free(remote);
}

static struct nib_slot *L(uint32_t i)
{
    return nib_ring_slot(local, &h, i);
}
static struct nib_slot *G(uint32_t i)
{
    return nib_ring_slot(remote, &h, i);
}

/* The host submits in slot i; the relay forwards it. */
static void forwarded(uint32_t i, uint64_t ticket)
{
    L(i)->ticket = ticket;
    L(i)->req.prompt_len = 4;
    L(i)->req.max_tokens = 8;
    memcpy(nib_slot_prompt(L(i), &h), "Once", 4);
    L(i)->state = NIB_SLOT_SUBMITTED;
    ck_assert_int_eq(vm_relay_pass(&r, &h, 0), 1);
    ck_assert_uint_eq(L(i)->state, NIB_SLOT_RUNNING);
    ck_assert_uint_eq(G(i)->state, NIB_SLOT_SUBMITTED);
    ck_assert_uint_eq(G(i)->ticket, ticket);
    ck_assert_mem_eq(nib_slot_prompt(G(i), &h), "Once", 4);
}

START_TEST(counts_clamped)
{
    forwarded(0, 5);
    for (uint32_t k = 0; k < h.slot_tokens; k++)
        nib_slot_tokens(G(0), &h)[k] = 100 + k;
    memset(nib_slot_text(G(0), &h), 'x', h.slot_text);
    G(0)->n_tokens = 0xffffffffu;
    G(0)->text_len = 0xfffffff0u;
    G(0)->n_prompt = 0x7fffffffu;
    vm_relay_pass(&r, &h, 0);
    ck_assert_uint_eq(L(0)->n_tokens, h.slot_tokens);
    ck_assert_uint_eq(L(0)->text_len, h.slot_text);
    ck_assert_uint_eq(L(0)->n_prompt, h.slot_tokens); /* never past n_tokens */
    ck_assert_uint_eq(nib_slot_tokens(L(0), &h)[h.slot_tokens - 1], 100 + h.slot_tokens - 1);
    /* the slot after it is untouched */
    ck_assert_uint_eq(L(1)->state, NIB_SLOT_FREE);
    ck_assert_uint_eq(L(1)->ticket, 0);
}
END_TEST

START_TEST(counts_never_shrink)
{
    forwarded(0, 5);
    nib_slot_tokens(G(0), &h)[0] = 7;
    nib_slot_tokens(G(0), &h)[1] = 8;
    G(0)->n_tokens = 2;
    vm_relay_pass(&r, &h, 0);
    ck_assert_uint_eq(L(0)->n_tokens, 2);
    /* The guest takes ids back and rewrites them: what the host was given stays. */
    G(0)->n_tokens = 1;
    nib_slot_tokens(G(0), &h)[0] = 99;
    vm_relay_pass(&r, &h, 0);
    ck_assert_uint_eq(L(0)->n_tokens, 2);
    ck_assert_uint_eq(nib_slot_tokens(L(0), &h)[0], 7);
}
END_TEST

START_TEST(status_refused)
{
    static const uint32_t bad[] = {NIB_ST_PENDING, NIB_ST_COUNT, 0xffffffffu};
    for (unsigned k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        forwarded(0, 10 + k);
        G(0)->status = bad[k];
        memset(G(0)->error, 'E', NIB_ERRMSG_MAX); /* no terminating NUL */
        G(0)->state = NIB_SLOT_DONE;
        vm_relay_pass(&r, &h, 0);
        ck_assert_uint_eq(L(0)->state, NIB_SLOT_DONE);
        ck_assert_uint_eq(L(0)->status, NIB_ST_SHUTDOWN);
        ck_assert_uint_eq(L(0)->served_ticket, 10 + k);
        ck_assert_uint_eq(strlen(L(0)->error), NIB_ERRMSG_MAX - 1);
        ck_assert_uint_eq(G(0)->state, NIB_SLOT_FREE); /* handed back to the guest */
        L(0)->state = NIB_SLOT_FREE;
    }
    ck_assert_uint_eq(done_seq, 3);
}
END_TEST

START_TEST(status_passed)
{
    forwarded(0, 3);
    G(0)->status = NIB_ST_EOS;
    G(0)->state = NIB_SLOT_DONE;
    vm_relay_pass(&r, &h, 0);
    ck_assert_uint_eq(L(0)->status, NIB_ST_EOS);
    ck_assert_uint_eq(done_seq, 1);
}
END_TEST

START_TEST(guest_state_ignored_when_idle)
{
    /* DONE (or anything) in a slot the relay never forwarded: nothing moves. */
    G(2)->state = NIB_SLOT_DONE;
    G(2)->status = NIB_ST_OK;
    G(2)->n_tokens = 5;
    ck_assert_int_eq(vm_relay_pass(&r, &h, 0), 0);
    ck_assert_uint_eq(L(2)->state, NIB_SLOT_FREE);
    ck_assert_uint_eq(L(2)->n_tokens, 0);
    ck_assert_uint_eq(done_seq, 0);
}
END_TEST

START_TEST(host_takes_back)
{
    forwarded(1, 4);
    L(1)->state = NIB_SLOT_FREE; /* the host's own slot, taken back mid-request */
    vm_relay_pass(&r, &h, 0);
    ck_assert_uint_eq(G(1)->cancel, 1);
    G(1)->n_tokens = 3;
    G(1)->status = NIB_ST_OK;
    G(1)->state = NIB_SLOT_DONE;
    vm_relay_pass(&r, &h, 0);
    ck_assert_uint_eq(L(1)->state, NIB_SLOT_FREE); /* nothing written into it */
    ck_assert_uint_eq(L(1)->n_tokens, 0);
    ck_assert_uint_eq(G(1)->state, NIB_SLOT_FREE);
    ck_assert_uint_eq(done_seq, 0);
}
END_TEST

START_TEST(shutdown_ends_forwarded_keeps_results)
{
    forwarded(0, 1); /* forwarded, running in the guest */
    forwarded(1, 2); /* forwarded, finished, not read yet */
    G(1)->status = NIB_ST_OK;
    G(1)->state = NIB_SLOT_DONE;
    vm_relay_pass(&r, &h, 0);
    ck_assert_uint_eq(L(1)->status, NIB_ST_OK);
    L(2)->ticket = 3; /* queued, never forwarded */
    L(2)->state = NIB_SLOT_SUBMITTED;
    uint32_t seq = done_seq;
    vm_relay_pass(&r, &h, 1);
    ck_assert_uint_eq(L(0)->state, NIB_SLOT_DONE);
    ck_assert_uint_eq(L(0)->status, NIB_ST_SHUTDOWN);
    ck_assert_uint_eq(L(0)->served_ticket, 1);
    ck_assert_uint_eq(L(1)->status, NIB_ST_OK); /* the unread result kept */
    ck_assert_uint_eq(L(1)->served_ticket, 2);
    ck_assert_uint_eq(L(2)->state, NIB_SLOT_DONE);
    ck_assert_uint_eq(L(2)->status, NIB_ST_SHUTDOWN);
    ck_assert_uint_eq(L(2)->served_ticket, 3);
    ck_assert_uint_eq(L(3)->state, NIB_SLOT_FREE);
    ck_assert_uint_eq(done_seq - seq, 2);
    for (uint32_t i = 0; i < NIB_RING_SLOTS; i++)
        ck_assert_uint_eq(r.fwd[i].state, VM_FWD_IDLE);
}
END_TEST

START_TEST(shutdown_lets_abandoned_go)
{
    forwarded(0, 1);
    L(0)->state = NIB_SLOT_CLAIMED; /* the host took it back; the guest never answers */
    vm_relay_pass(&r, &h, 1);
    ck_assert_uint_eq(r.fwd[0].state, VM_FWD_IDLE);
    ck_assert_uint_eq(L(0)->state, NIB_SLOT_CLAIMED);
    ck_assert_uint_eq(done_seq, 0);
}
END_TEST

TU_SUITE("vm-relay", "relay", setup, teardown, 0, counts_clamped, counts_never_shrink,
         status_refused, status_passed, guest_state_ignored_when_idle, host_takes_back,
         shutdown_ends_forwarded_keeps_results, shutdown_lets_abandoned_go)
