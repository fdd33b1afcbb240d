/* nib inspect OUT.blob: print the header, tensor table, plan and sizes, and
 * verify everything the appliance verifies at boot (checksum included). */
#include <stdio.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/tokenizer.h"
#include "tools/cli/cli.h"
#include "tools/util/args.h"
#include "tools/util/tool_util.h"

/* The parameters of one op, by name. */
static void print_params(const struct nib_op *op)
{
    if (op->code == NIB_OP_MATMUL) {
        const struct nib_matmul_params *p = &op->matmul;
        if (op->flags & NIB_OPF_NORM_IN)
            printf(" norm=t%u eps=%g", p->norm.tensor, (double)p->norm.eps);
        if (op->flags & NIB_EPI_ROPE_KV)
            printf(" rope=t%u q=%u k@%u v@%u kv=%u head=%u rope_dim=%u v_cache=+%u",
                   p->rope_kv.table, p->rope_kv.q_rows, p->rope_kv.k_off, p->rope_kv.v_off,
                   p->rope_kv.kv_rows, p->rope_kv.head_dim, p->rope_kv.rope_dim,
                   p->rope_kv.v_cache_off);
        if (op->flags & NIB_EPI_SILU_MUL)
            printf(" out=%u", p->silu_mul.n_out);
        if ((op->flags & NIB_EPI_SILU_MUL) && (op->flags & NIB_OPF_QOUT))
            printf(" qblock=%u", p->silu_mul.qblock);
    } else if (op->code == NIB_OP_ATTENTION) {
        const struct nib_attention_params *p = &op->attention;
        printf(" kv_heads=%u cache_stride=%u v_cache=+%u scale=%g scratch=%llu", p->n_kv_heads,
               p->cache_stride, p->v_cache_off, (double)p->scale, (unsigned long long)p->scratch);
        if (op->flags & NIB_OPF_QOUT)
            printf(" qblock=%u unit_heads=%u", p->qblock, p->unit_heads);
    } else if (op->code == NIB_OP_QUANT) {
        printf(" block=%u", op->quant.block);
    }
}

/* The id and text of a token, for the tokenizer lines. */
static void print_token(const struct nib_blob_view *v, uint32_t id)
{
    uint32_t len;
    const uint8_t *p = nib_tok_piece(v, id, &len);
    printf(" %u '", id);
    for (uint32_t i = 0; p && i < len; i++)
        printf(p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' ? "%c" : "\\x%02x", p[i]);
    printf("'");
}

static void print_tokenizer(const struct nib_blob_view *v)
{
    const struct nib_tok_header *t = v->tok;
    uint32_t merges = 0;
    for (uint32_t i = 0; i < v->tok_merge_slots; i++)
        merges += v->tok_merges[i].left != NIB_TOK_NONE;
    static const char *const flag_names[] = {"byte-level",    "byte-fallback", "fuse-unk",
                                             "ignore-merges", "add-bos",       "add-eos"};
    printf("tokenizer: %s, %u pieces, pre-tokenizer %s, %u merges, %u added-token trie nodes, "
           "%u normalizer and %u pre-tokenizer steps, chat template %s\n",
           t->model == NIB_TOKM_SPM ? "SentencePiece (scores)" : "BPE (merge ranks)", t->n_vocab,
           t->pre_name[0] ? t->pre_name : "-", merges, v->tok_n_nodes, v->tok_n_norm, v->tok_n_pre,
           v->tok_chat ? "yes" : "no");
    printf("           flags:");
    for (unsigned b = 0; b < 6; b++)
        if (t->flags & (1u << b))
            printf(" %s", flag_names[b]);
    printf("\n           unk");
    if (t->unk_id == NIB_TOK_NONE)
        printf(" none");
    else
        print_token(v, t->unk_id);
    printf(", bos");
    if (t->bos_id == NIB_TOK_NONE)
        printf(" none");
    else
        print_token(v, t->bos_id);
    printf(", eos");
    if (t->eos_id == NIB_TOK_NONE)
        printf(" none");
    else
        print_token(v, t->eos_id);
    printf("\n           end of generation:");
    for (uint32_t i = 0; i < t->n_eog; i++)
        print_token(v, t->eog[i]);
    printf("\n");
}

static void print_blob(const struct nib_blob_view *v, int show_plan)
{
    const struct nib_blob_header *h = v->h;
    const struct nib_hparams *hp = &h->hp;
    printf("blob: format version %u, %llu bytes, crc32c %08x, isa 0x%x\n", h->version,
           (unsigned long long)h->blob_size, h->crc32c, h->isa_required);
    printf("model: dim %u, layers %u, heads %u (kv %u, head_dim %u), ffn %u, vocab %u, ctx %u\n",
           hp->dim, hp->n_layers, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->ffn_dim,
           hp->vocab_size, hp->ctx_len);
    printf("       rope dim %u theta %g, rms eps %g, bos %u eos %u add_bos %u\n", hp->rope_dim,
           (double)hp->rope_theta, (double)hp->norm_eps, hp->bos_id, hp->eos_id, hp->add_bos);
    printf("sections: tensors @%llu (%llu), plan @%llu (%llu), tokenizer @%llu (%llu), weights "
           "@%llu (%llu)\n",
           (unsigned long long)h->tensors.offset, (unsigned long long)h->tensors.size,
           (unsigned long long)h->plan.offset, (unsigned long long)h->plan.size,
           (unsigned long long)h->tokenizer.offset, (unsigned long long)h->tokenizer.size,
           (unsigned long long)h->weights.offset, (unsigned long long)h->weights.size);
    printf("runtime memory: activations %llu + kv cache %llu bytes\n",
           (unsigned long long)h->act_size, (unsigned long long)h->kv_size);
    print_tokenizer(v);
    printf("\ntensors (%u):\n", h->n_tensors);
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        const struct nib_tensor_rec *t = &v->tensors[i];
        printf("  %3u %-24s %-4s %6u x %-6u tile %ux%u group %u  @%llu  %llu bytes\n", i, t->name,
               nib_dtype_name(t->dtype), t->rows, t->cols, t->tile_n, t->tile_k, t->group,
               (unsigned long long)t->offset, (unsigned long long)t->size);
    }
    if (!show_plan)
        return;
    printf("\nplan (%u ops):\n", h->n_ops);
    for (uint32_t i = 0; i < h->n_ops; i++) {
        const struct nib_op *op = &v->ops[i];
        printf("  %4u %-9s t=%-4d src0=%-8llu src1=%-8llu dst=%-8llu n=%-6u k=%-6u", i,
               nib_op_name(op->code), op->tensor == UINT32_MAX ? -1 : (int)op->tensor,
               (unsigned long long)op->src0, (unsigned long long)op->src1,
               (unsigned long long)op->dst, op->n, op->k);
        static const struct {
            uint32_t bit;
            const char *name;
        } flags[] = {
            {NIB_OPF_LAST_ROW, "last-row"}, {NIB_OPF_NORM_IN, "norm-in"},
            {NIB_OPF_QOUT, "int8-out"},     {NIB_EPI_ADD, "+residual"},
            {NIB_EPI_ROPE_KV, "+rope+kv"},  {NIB_EPI_SILU_MUL, "+silu*up"},
            {NIB_EPI_ARGMAX, "+argmax"},
        };
        for (size_t j = 0; j < sizeof flags / sizeof flags[0]; j++)
            if (op->flags & flags[j].bit)
                printf(" %s", flags[j].name);
        if (op->aux)
            printf(" aux=%llu", (unsigned long long)op->aux);
        print_params(op);
        printf("\n");
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: nib inspect BLOB [--no-plan]\n");
}

int nib_inspect_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {{"--no-plan", NIB_ARGS_OPT, 0}, {NULL, 0, 0}};
    const char *path = NULL;
    int show_plan = 1;
    struct nib_args a;
    nib_args_init(&a, "nib inspect", argc, argv, opts, usage, &path);
    int o;
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        show_plan = 0; /* --no-plan */
    }
    if (o == NIB_ARGS_EXIT)
        return a.status;
    if (!path)
        return nib_args_missing(&a);
    char err[512];
    const uint8_t *data;
    size_t size;
    if (nib_map_file(path, &data, &size, err, sizeof err)) {
        fprintf(stderr, "nib inspect: %s\n", err);
        return 1;
    }
    struct nib_blob_view v;
    int rc = 0;
    if (nib_blob_open(&v, data, size, 1, err, sizeof err) || nib_tok_check(&v, err, sizeof err)) {
        fprintf(stderr, "nib inspect: %s: invalid blob: %s\n", path, err);
        rc = 1;
    } else {
        print_blob(&v, show_plan);
        printf("\nchecksum: ok\n");
    }
    nib_unmap_file(data, size);
    return rc;
}
