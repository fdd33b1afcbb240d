#include "rt/vm_link.h"

#include <string.h>

#include "proto/ctl.h"
#include "proto/private/sync.h"
#include "rt/serve.h"

void nib_vm_link_init(struct nib_vm_link *l, struct nib_vmr_header *h, uint32_t n_rings,
                      uint64_t now_ns)
{
    memset(l, 0, sizeof *l);
    l->h = h;
    l->n_rings = n_rings;
    /* acquire: pairs with the release in nib_vmr_cmd_post; commands posted
     * before this boot are not ours to act on */
    l->last_seq = nib_load_acq(&h->cmd.seq);
    l->beat_ns = now_ns;
    nib_vmr_watch_start(&l->mux, nib_vmr_beat_read(&h->mux_beat), now_ns);
}

static void drop_all(struct nib_server *s, struct nib_vm_link *l)
{
    for (uint32_t i = 0; i < l->n_rings; i++)
        nib_control_vm_detach(s, i);
}

static void answer(struct nib_server *s, struct nib_vm_link *l, const struct nib_vmr_cmd *c,
                   int type)
{
    struct nib_vmr_ans a = {.seq = c->seq, .type = c->type, .ring = c->ring};
    if (type < 0) {
        l->malformed++;
        a.status = NIB_CTL_MALFORMED;
    } else if (type == NIB_VMR_CMD_ATTACH) {
        a.status = nib_control_vm_attach(s, c->ring, c->uid, &a.attach_seq);
    } else if (type == NIB_VMR_CMD_DETACH) {
        a.status = nib_control_vm_detach(s, c->ring);
    } else {
        s->stop = 1;
    }
    nib_vmr_ans_post(l->h, &a);
}

int nib_vm_link_pass(struct nib_server *s)
{
    struct nib_vm_link *l = s->vm;
    uint64_t now = nib_now_ns();
    if (now - l->beat_ns >= NIB_VMR_BEAT_NS / 2) {
        nib_vmr_beat(&l->h->guest_beat, &l->beat);
        l->beat_ns = now;
    }
    if (!nib_vmr_watch_alive(&l->mux, nib_vmr_beat_read(&l->h->mux_beat), now, NIB_VMR_STALE_NS)) {
        if (!l->mux_gone) {
            /* The multiplexer died: its hosts with it. */
            drop_all(s, l);
            l->mux_gone = 1;
            l->mux_losses++;
        }
        return 0;
    }
    l->mux_gone = 0;
    struct nib_vmr_cmd c;
    if (!nib_vmr_cmd_take(l->h, l->last_seq, &c))
        return 0;
    l->last_seq = c.seq;
    l->commands++;
    char err[96];
    answer(s, l, &c, nib_vmr_parse_cmd(&c, l->n_rings, err, sizeof err));
    return 1;
}
