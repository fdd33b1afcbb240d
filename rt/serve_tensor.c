/* A vision model behind the protocol (docs/ring.md section 6.4): the
 * header's tensor table and ring geometry from the blob's io table, the
 * check of a TENSOR request, and serving one: the slot's input bytes
 * straight to their io offsets in the arena, one run of the plan, the
 * outputs straight into the slot's text area. No allocation, no system
 * call, no private copy beyond the arena itself. */
#include <string.h>

#include "proto/private/sync.h"
#include "proto/stats.h"
#include "rt/serve.h"

static uint64_t up64(uint64_t x)
{
    return (x + 63) & ~63ull;
}

void nib_tensor_layout(const struct nib_blob_view *v, struct nib_shm_tensor *t, uint64_t *in_len,
                       uint64_t *out_len)
{
    uint64_t end[2] = {0, 0}, pos[2] = {0, 0};
    for (uint32_t i = 0; i < v->n_io && i < NIB_TENSOR_MAX; i++) {
        const struct nib_io_rec *r = &v->io[i];
        uint32_t dir = r->dir == NIB_IO_OUTPUT;
        if (t) {
            memset(&t[i], 0, sizeof t[i]);
            /* NUL-terminated in the blob (validated), shorter than ours */
            memcpy(t[i].name, r->name, strnlen(r->name, NIB_NAME_MAX - 1));
            t[i].dir = dir;
            t[i].dtype = r->dtype == NIB_IO_F32 ? NIB_TENSOR_F32 : NIB_TENSOR_U8;
            t[i].rank = r->rank;
            memcpy(t[i].dims, r->dims, sizeof t[i].dims);
            t[i].area_off = pos[dir];
            t[i].bytes = r->bytes;
        }
        end[dir] = pos[dir] + r->bytes;
        pos[dir] = up64(end[dir]);
    }
    *in_len = end[0];
    *out_len = end[1];
}

_Static_assert(NIB_TENSOR_MAX == NIB_IO_MAX && NIB_TENSOR_MAX_RANK == NIB_IO_MAX_RANK &&
                   NIB_TENSOR_NAME_MAX >= NIB_NAME_MAX,
               "the tensor table holds any io table");
_Static_assert((int)NIB_TENSOR_F32 == (int)NIB_IO_F32 && (int)NIB_TENSOR_U8 == (int)NIB_IO_U8,
               "the same element type numbers");

uint32_t nib_server_header_size(const struct nib_blob_view *v)
{
    return v->h->model_kind == NIB_MODEL_VISION ? NIB_SHM_HEADER_MEMFD_SIZE_TENSOR
                                                : NIB_SHM_HEADER_MEMFD_SIZE;
}

int nib_server_tensor_check(const struct nib_blob_view *v, char *err, size_t errlen)
{
    if (v->h->model_kind != NIB_MODEL_VISION)
        return 0;
    uint64_t in_len, out_len;
    nib_tensor_layout(v, NULL, &in_len, &out_len);
    if (up64(in_len) > NIB_TENSOR_AREA_LIMIT || up64(out_len) > NIB_TENSOR_AREA_LIMIT)
        return nib_req_fail(err, errlen, "io table",
                            "inputs of %llu bytes or outputs of %llu pass a slot's 256 MiB", in_len,
                            out_len);
    return 0;
}

void nib_server_init_tensors(struct nib_server *s)
{
    struct nib_shm_header *h = s->hdr;
    struct nib_shm_tensor *t =
        (struct nib_shm_tensor *)(void *)((uint8_t *)h + NIB_SHM_TENSORS_OFFSET);
    uint64_t in_len, out_len;
    nib_tensor_layout(s->v, t, &in_len, &out_len);
    h->features = NIB_FEAT_TENSOR; /* no text, chat or measurement */
    h->tensors_offset = NIB_SHM_TENSORS_OFFSET;
    h->n_inputs = s->v->n_inputs;
    h->n_outputs = s->v->n_io - s->v->n_inputs;
    h->inputs_len = (uint32_t)in_len; /* <= NIB_TENSOR_AREA_LIMIT: nib_server_tensor_check */
    h->outputs_len = (uint32_t)out_len;
}

int nib_req_decode_tensor(const struct nib_request *r, const struct nib_req_limits *lim,
                          struct nib_req_decoded *out, char *err, size_t errlen)
{
    if (r->prompt_len != lim->tensor_in)
        return nib_req_fail(err, errlen, "prompt_len",
                            "%llu bytes, the model's inputs take exactly %llu (the tensor table)",
                            r->prompt_len, lim->tensor_in);
    if (r->max_tokens)
        return nib_req_fail(err, errlen, "max_tokens", "%llu: a tensor request takes 0",
                            r->max_tokens, 0);
    if (r->temperature != 0.0f) /* NaN included */
        return nib_req_fail(err, errlen, "temperature", "must be 0 for a tensor request", 0, 0);
    if (r->flags)
        return nib_req_fail(err, errlen, "flags", "a tensor request takes no flags (0x%llx set)",
                            r->flags, 0);
    for (size_t i = 0; i < sizeof r->reserved; i++)
        if (r->reserved[i])
            return nib_req_fail(err, errlen, "reserved", "byte %llu is not zero", i, 0);
    out->prompt_len = r->prompt_len;
    out->kind = NIB_REQ_KIND_TENSOR;
    return 0;
}

void nib_serve_tensor(struct nib_server *s, struct nib_run *r, struct nib_slot *slot)
{
    const struct nib_shm_header *h = s->hdr;
    const struct nib_shm_tensor *t = nib_shm_tensors(h);
    const struct nib_io_rec *io = s->v->io;
    uint8_t *mem = s->exec.mem;
    /* The inputs, at the length checked against the appliance's own table
     * (never the slot's): a host that rewrites them meanwhile changes only
     * its own request. */
    const uint8_t *in = nib_slot_prompt(slot, h);
    for (uint32_t i = 0; i < s->v->n_inputs; i++)
        memcpy(mem + io[i].off, in + t[i].area_off, io[i].bytes);
    if (!nib_serve_own(s, r)) {
        nib_serve_finish(s, r, NIB_ST_HOST_CHANGED, NULL);
        return;
    }
    /* acquire: pairs with the release of cancel in nibhost.c nib_host_cancel() */
    if (nib_load_acq(&slot->cancel)) {
        nib_serve_finish(s, r, NIB_ST_CANCELLED, NULL);
        return;
    }
    if (nib_server_stopping(s)) {
        nib_serve_finish(s, r, NIB_ST_SHUTDOWN, NULL);
        return;
    }
    nib_exec_run(&s->exec);
    uint64_t t_done = nib_now_ns();
    if (s->pass_hook)
        s->pass_hook(s, s->pass_hook_arg);
    if (!nib_serve_own(s, r)) {
        nib_serve_finish(s, r, NIB_ST_HOST_CHANGED, NULL);
        return;
    }
    slot->t_first_ns = t_done;
    uint8_t *out = (uint8_t *)nib_slot_text(slot, h);
    for (uint32_t i = s->v->n_inputs; i < s->v->n_io; i++)
        memcpy(out + t[i].area_off, mem + io[i].off, io[i].bytes);
    /* The whole answer at once: nib_serve_finish stores text_len (release)
     * before DONE (release), pairing with nibhost.c nib_host_poll()'s
     * acquires of text_len and state. */
    r->text_len = h->outputs_len;
    nib_serve_finish(s, r, NIB_ST_OK, NULL);
}
