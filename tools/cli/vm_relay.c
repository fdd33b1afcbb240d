#include "tools/cli/vm_relay.h"

#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/private/sync.h"

void vm_relay_reset(struct vm_relay_ring *r)
{
    memset(r->fwd, 0, sizeof r->fwd);
}

/* The local slot is still the request we took: RUNNING under its ticket. */
static int own(struct nib_slot *l, const struct vm_fwd *f)
{
    /* acquire: pairs with the host's releases of state (nibhost.c) */
    return nib_load_acq(&l->state) == NIB_SLOT_RUNNING && nib_load_relaxed(&l->ticket) == f->ticket;
}

static void announce_done(struct vm_relay_ring *r)
{
    struct nib_ring_header *rh = (struct nib_ring_header *)(void *)r->local;
    *r->done_seq += 1;
    /* seq_cst store then load: pairs with the host's seq_cst store of
     * done_waiters then load of done_seq (docs/ring.md §8) */
    nib_store_seqcst(&rh->done_seq, *r->done_seq);
    if (nib_load_seqcst(&rh->done_waiters))
        syscall(SYS_futex, &rh->done_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void submit(struct nib_slot *l, struct nib_slot *g, const struct nib_shm_header *h,
                   struct vm_fwd *f)
{
    f->ticket = nib_load_relaxed(&l->ticket);
    uint32_t len = l->req.prompt_len;
    memcpy(&g->req, &l->req, sizeof g->req);
    memcpy(nib_slot_prompt(g, h), nib_slot_prompt(l, h), len < h->prompt_max ? len : h->prompt_max);
    g->ticket = f->ticket;
    g->cancel = 0;
    g->request_id = 0;
    memset(&g->n_tokens, 0,
           offsetof(struct nib_slot, error) + NIB_ERRMSG_MAX - offsetof(struct nib_slot, n_tokens));
    f->tokens_sent = f->text_sent = 0;
    f->state = VM_FWD_RUNNING;
    /* release: pairs with the appliance's acquire of state in its scan */
    nib_store_rel(&g->state, NIB_SLOT_SUBMITTED);
}

/* Ids and text the guest published since the last pass, clamped. */
static int stream(struct nib_slot *l, struct nib_slot *g, const struct nib_shm_header *h,
                  struct vm_fwd *f)
{
    int moved = 0;
    /* acquire: pairs with the appliance's release of n_tokens / text_len */
    uint32_t n = nib_load_acq(&g->n_tokens), t = nib_load_acq(&g->text_len);
    if (n > h->slot_tokens)
        n = h->slot_tokens;
    if (t > h->slot_text)
        t = h->slot_text;
    if (n > f->tokens_sent) {
        memcpy(nib_slot_tokens(l, h) + f->tokens_sent, nib_slot_tokens(g, h) + f->tokens_sent,
               4ull * (n - f->tokens_sent));
        uint32_t np = nib_load_relaxed(&g->n_prompt);
        l->n_prompt = np <= n ? np : n;
        /* release: pairs with the host's acquire of n_tokens */
        nib_store_rel(&l->n_tokens, n);
        f->tokens_sent = n;
        moved = 1;
    }
    if (t > f->text_sent) {
        memcpy(nib_slot_text(l, h) + f->text_sent, nib_slot_text(g, h) + f->text_sent,
               t - f->text_sent);
        /* release: pairs with the host's acquire of text_len */
        nib_store_rel(&l->text_len, t);
        f->text_sent = t;
        moved = 1;
    }
    return moved;
}

static void finish(struct vm_relay_ring *r, struct nib_slot *l, struct nib_slot *g,
                   const struct nib_shm_header *h, struct vm_fwd *f, uint32_t status)
{
    if (own(l, f)) {
        l->status = status < NIB_ST_COUNT && status != NIB_ST_PENDING ? status : NIB_ST_SHUTDOWN;
        memcpy(l->error, g->error, NIB_ERRMSG_MAX);
        l->error[NIB_ERRMSG_MAX - 1] = 0;
        l->t_start_ns = g->t_start_ns;
        l->t_first_ns = g->t_first_ns;
        l->t_done_ns = g->t_done_ns;
        l->served_ticket = f->ticket;
        uint32_t expect = NIB_SLOT_RUNNING;
        /* acq_rel: the release publishes the result to the host's acquire of DONE */
        if (nib_cas(&l->state, &expect, NIB_SLOT_DONE))
            announce_done(r);
    }
    (void)h;
    f->state = VM_FWD_IDLE;
    /* release: the guest's next scan sees a FREE slot after our reads */
    nib_store_rel(&g->state, NIB_SLOT_FREE);
}

int vm_relay_pass(struct vm_relay_ring *r, const struct nib_shm_header *h, int shutdown)
{
    int moved = 0;
    for (uint32_t i = 0; i < h->n_slots && i < NIB_RING_SLOTS; i++) {
        struct nib_slot *l = nib_ring_slot(r->local, h, i), *g = nib_ring_slot(r->remote, h, i);
        struct vm_fwd *f = &r->fwd[i];
        if (f->state == VM_FWD_IDLE) {
            if (shutdown) {
                /* Queued and never forwarded: ends `shutdown`, as a local
                 * appliance ends what it had not picked up. Taken (RUNNING)
                 * before its result is written, so a slot that is not
                 * queued (a result the host has not read yet) is left as
                 * it is. */
                uint32_t expect = NIB_SLOT_SUBMITTED;
                /* acquire: pairs with the host's release of SUBMITTED */
                if (nib_load_acq(&l->state) == NIB_SLOT_SUBMITTED &&
                    nib_cas(&l->state, &expect, NIB_SLOT_RUNNING)) {
                    l->status = NIB_ST_SHUTDOWN;
                    l->error[0] = 0;
                    l->served_ticket = nib_load_relaxed(&l->ticket);
                    uint32_t running = NIB_SLOT_RUNNING;
                    /* acq_rel: the release publishes the result to the host's acquire of DONE */
                    if (nib_cas(&l->state, &running, NIB_SLOT_DONE))
                        announce_done(r);
                    moved = 1;
                }
                continue;
            }
            /* acquire: pairs with the host's release of SUBMITTED */
            uint32_t expect = NIB_SLOT_SUBMITTED;
            if (nib_load_acq(&l->state) == NIB_SLOT_SUBMITTED &&
                nib_cas(&l->state, &expect, NIB_SLOT_RUNNING)) {
                submit(l, g, h, f);
                moved = 1;
            }
            continue;
        }
        /* acquire: pairs with the appliance's release of DONE */
        uint32_t gs = nib_load_acq(&g->state);
        if (f->state == VM_FWD_RUNNING && !own(l, f)) {
            /* The host took its slot back: cancel ours, write nothing more
             * (at shutdown the region's slot is let go below at once). */
            nib_store_rel(&g->cancel, 1u);
            f->state = VM_FWD_ABANDONED;
            moved = 1;
        }
        if (f->state == VM_FWD_RUNNING) {
            if (nib_load_acq(&l->cancel) || shutdown)
                nib_store_rel(&g->cancel, 1u);
            moved |= stream(l, g, h, f);
            if (gs == NIB_SLOT_DONE) {
                stream(l, g, h, f);
                finish(r, l, g, h, f, nib_load_relaxed(&g->status));
                moved = 1;
            } else if (shutdown) {
                finish(r, l, g, h, f, NIB_ST_SHUTDOWN);
            }
        } else if (gs == NIB_SLOT_DONE || shutdown) {
            f->state = VM_FWD_IDLE;
            nib_store_rel(&g->state, NIB_SLOT_FREE);
            moved = 1;
        }
    }
    return moved;
}
