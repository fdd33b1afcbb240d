/* Fuzz target: the multiplexer's relay (tools/cli/vm_relay.c), its reading
 * of the guest's ring in the VM region. The guest may write anything into
 * its ring at any time; the local host may write anything into the parts
 * of its own ring that are the host's (line 0, the request, the prompt).
 *
 * Invariants after every pass:
 *   - what the relay copies back to the local host is clamped: n_tokens <=
 *     slot_tokens, text_len <= slot_text, n_prompt <= n_tokens, and a DONE
 *     it posted has a known final status and a NUL-terminated error;
 *   - its own counts stay in range (tokens_sent, text_sent);
 *   - every ring is exactly ring_size bytes (ASan sees any escape);
 * and after the closing shutdown pass nothing is left forwarded and every
 * request the relay had taken is DONE: nothing lost silently.
 *
 * Input: one byte of context length (the geometry comes from it through
 * nib_ring_geometry, as the checked appliance header's does), then
 * operations: a byte (op = b % 6, slot = b / 6 % 4) and its payload:
 *   0 host submits in slot (u64 ticket, 64 bytes of request, prompt)
 *   1 guest writes slot's response line and state (56 bytes, u32 state)
 *   2 a relay pass
 *   3 host writes its slot's state and cancel (u32, u32)
 *   4 guest writes up to 255 bytes at an offset of its ring (u32, u8 n)
 *   5 host writes up to 255 bytes in its slot's host part (u16, u8 n)
 * Missing bytes are zero. */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/cli/vm_relay.h"

struct cursor {
    const uint8_t *p;
    size_t left;
};

static void take(struct cursor *c, void *out, size_t n)
{
    size_t k = n < c->left ? n : c->left;
    memset(out, 0, n);
    memcpy(out, c->p, k);
    c->p += k;
    c->left -= k;
}

static uint32_t take32(struct cursor *c)
{
    uint32_t v;
    take(c, &v, 4);
    return v;
}

static void check(const struct vm_relay_ring *r, const struct nib_shm_header *h)
{
    for (uint32_t i = 0; i < h->n_slots; i++) {
        struct nib_slot *l = nib_ring_slot(r->local, h, i);
        FUZZ_ASSERT(l->n_tokens <= h->slot_tokens);
        FUZZ_ASSERT(l->text_len <= h->slot_text);
        FUZZ_ASSERT(l->n_prompt <= l->n_tokens);
        FUZZ_ASSERT(r->fwd[i].state <= VM_FWD_ABANDONED);
        FUZZ_ASSERT(r->fwd[i].tokens_sent <= h->slot_tokens);
        FUZZ_ASSERT(r->fwd[i].text_sent <= h->slot_text);
    }
}

/* A DONE the relay posted (served_ticket is ours). */
static void check_done(const struct nib_slot *l)
{
    FUZZ_ASSERT(l->status != NIB_ST_PENDING && l->status < NIB_ST_COUNT);
    FUZZ_ASSERT(memchr(l->error, 0, NIB_ERRMSG_MAX) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cursor c = {data, size};
    uint8_t ctx;
    take(&c, &ctx, 1);
    struct nib_shm_header h;
    memset(&h, 0, sizeof h);
    nib_ring_geometry(&h, 1u + ctx % 128u, 1u + ctx / 128u * 7u);
    uint8_t *local = aligned_alloc(64, h.ring_size), *remote = aligned_alloc(64, h.ring_size);
    FUZZ_ASSERT(local && remote);
    memset(local, 0, h.ring_size);
    memset(remote, 0, h.ring_size);
    uint32_t done_seq = 0;
    struct vm_relay_ring r = {.local = local, .remote = remote, .done_seq = &done_seq};
    vm_relay_reset(&r);

    for (int ops = 0; c.left && ops < 4096; ops++) {
        uint8_t b;
        take(&c, &b, 1);
        uint32_t i = b / 6u % NIB_RING_SLOTS;
        struct nib_slot *l = nib_ring_slot(local, &h, i), *g = nib_ring_slot(remote, &h, i);
        switch (b % 6u) {
        case 0: /* what nibhost does to submit: claim, write, SUBMITTED */
            if (l->state != NIB_SLOT_FREE && l->state != NIB_SLOT_DONE)
                break;
            take(&c, &l->ticket, 8);
            take(&c, &l->req, sizeof l->req);
            take(&c, nib_slot_prompt(l, &h), h.prompt_max < 64 ? h.prompt_max : 64);
            memset(&l->n_tokens, 0,
                   offsetof(struct nib_slot, error) + NIB_ERRMSG_MAX -
                       offsetof(struct nib_slot, n_tokens));
            l->cancel = 0;
            l->state = NIB_SLOT_SUBMITTED;
            break;
        case 1:
            take(&c, &g->n_tokens, 56);
            take(&c, g->error, 8);
            g->state = take32(&c);
            break;
        case 2: {
            struct vm_fwd was[NIB_RING_SLOTS];
            int held[NIB_RING_SLOTS];
            memcpy(was, r.fwd, sizeof was);
            for (uint32_t k = 0; k < h.n_slots; k++) {
                struct nib_slot *lk = nib_ring_slot(local, &h, k);
                held[k] = was[k].state == VM_FWD_RUNNING && lk->state == NIB_SLOT_RUNNING &&
                          lk->ticket == was[k].ticket;
            }
            vm_relay_pass(&r, &h, 0);
            check(&r, &h);
            for (uint32_t k = 0; k < h.n_slots; k++)
                if (held[k] && r.fwd[k].state == VM_FWD_IDLE) {
                    /* finished: posted DONE for the ticket it held */
                    struct nib_slot *lk = nib_ring_slot(local, &h, k);
                    FUZZ_ASSERT(lk->state == NIB_SLOT_DONE && lk->served_ticket == was[k].ticket);
                    check_done(lk);
                }
            break;
        }
        case 3:
            l->state = take32(&c);
            l->cancel = take32(&c);
            break;
        case 4: {
            uint32_t off = take32(&c);
            uint8_t n;
            take(&c, &n, 1);
            off %= (uint32_t)h.ring_size;
            if (n > h.ring_size - off)
                n = (uint8_t)(h.ring_size - off);
            take(&c, remote + off, n);
            break;
        }
        case 5: { /* the host part of its slot: line 0, the request, the prompt */
            uint16_t off;
            uint8_t n;
            take(&c, &off, 2);
            take(&c, &n, 1);
            uint32_t host_part = offsetof(struct nib_slot, n_tokens);
            uint32_t prompt_end = h.prompt_offset + h.prompt_max;
            uint32_t o = off % (host_part + h.prompt_max);
            if (o >= host_part)
                o = h.prompt_offset + (o - host_part);
            uint32_t end = o < host_part ? host_part : prompt_end;
            if (n > end - o)
                n = (uint8_t)(end - o);
            take(&c, (uint8_t *)l + o, n);
            break;
        }
        }
    }
    /* Which requests the relay holds for its host at shutdown; the
     * others' slots (a result not yet read, a slot taken back) it must
     * leave exactly as they are. */
    int ours[NIB_RING_SLOTS] = {0};
    static uint8_t before[NIB_RING_SLOTS][sizeof(struct nib_slot)];
    for (uint32_t k = 0; k < h.n_slots; k++) {
        struct nib_slot *l = nib_ring_slot(local, &h, k);
        ours[k] = (r.fwd[k].state == VM_FWD_IDLE && l->state == NIB_SLOT_SUBMITTED) ||
                  (r.fwd[k].state == VM_FWD_RUNNING && l->state == NIB_SLOT_RUNNING &&
                   l->ticket == r.fwd[k].ticket);
        memcpy(before[k], l, sizeof *l);
    }
    uint32_t seq0 = done_seq;
    vm_relay_pass(&r, &h, 1);
    check(&r, &h);
    uint32_t ended = 0;
    for (uint32_t k = 0; k < h.n_slots; k++) {
        struct nib_slot *l = nib_ring_slot(local, &h, k);
        FUZZ_ASSERT(r.fwd[k].state == VM_FWD_IDLE);
        if (ours[k]) {
            FUZZ_ASSERT(l->state == NIB_SLOT_DONE);
            FUZZ_ASSERT(l->served_ticket == l->ticket);
            check_done(l);
            ended++;
        } else {
            FUZZ_ASSERT(!memcmp(before[k], l, sizeof *l));
        }
    }
    FUZZ_ASSERT(done_seq - seq0 == ended);
    free(local);
    free(remote);
    return 0;
}
