/* nib inspect OUT.blob: print the header, tensor table, plan and sizes, and
 * verify everything the appliance verifies at boot (checksum included).
 * --json prints the same facts as one JSON object.
 *
 * Footprint (struct footprint below), two different numbers:
 *   resident bytes   the whole weights section: what the appliance copies into
 *                    memory at boot and keeps there;
 *   bytes per token  what one decode step streams from memory: every matmul
 *                    weight of the plan once (a weight two matmuls share, such
 *                    as a tied LM head, counts once) plus one row of the
 *                    embedding table (its size / rows: codes and scales of one
 *                    row), unless that table is also a matmul weight (tied
 *                    head), which then counts whole. The rest of the section
 *                    (norm weights, RoPE tables, biases) is listed apart as
 *                    "other": small, read at most once per token. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/tokenizer.h"
#include "tools/cli/cli.h"
#include "tools/compiler/llama_import.h"
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
            printf(" rope=t%u q=%u k@%u v@%u kv=%u head=%u rope_dim=%u v_cache=+%u "
                   "head_stride=%u",
                   p->rope_kv.table, p->rope_kv.q_rows, p->rope_kv.k_off, p->rope_kv.v_off,
                   p->rope_kv.kv_rows, p->rope_kv.head_dim, p->rope_kv.rope_dim,
                   p->rope_kv.v_cache_off, p->rope_kv.head_stride);
        if ((op->flags & NIB_EPI_ROPE_KV) && p->rope_kv.q_norm != UINT32_MAX)
            printf(" q_norm=t%u k_norm=t%u qk_eps=%g", p->rope_kv.q_norm, p->rope_kv.k_norm,
                   (double)p->rope_kv.qk_eps);
        if (op->flags & NIB_EPI_BIAS)
            printf(" bias=t%u", p->bias);
        if (op->flags & NIB_EPI_SOFTCAP)
            printf(" cap=%g", (double)p->softcap);
        if (op->flags & NIB_EPI_SILU_MUL)
            printf(" out=%u%s", p->silu_mul.n_out, p->silu_mul.act ? " act=gelu" : "");
        if ((op->flags & NIB_EPI_SILU_MUL) && (op->flags & NIB_OPF_QOUT))
            printf(" qblock=%u", p->silu_mul.qblock);
    } else if (op->code == NIB_OP_ATTENTION) {
        const struct nib_attention_params *p = &op->attention;
        printf(" kv_heads=%u cache_stride=%u head_stride=%u v_cache=+%u scale=%g scratch=%llu",
               p->n_kv_heads, p->cache_stride, p->head_stride, p->v_cache_off, (double)p->scale,
               (unsigned long long)p->scratch);
        if (op->flags & NIB_OPF_QOUT)
            printf(" qblock=%u unit_heads=%u", p->qblock, p->unit_heads);
        if (p->window)
            printf(" window=%u", p->window);
        if (p->softcap > 0)
            printf(" cap=%g", (double)p->softcap);
    } else if (op->code == NIB_OP_QUANT) {
        printf(" block=%u", op->quant.block);
    } else if (op->code == NIB_OP_EMBED) {
        if (op->embed.scale != 1.0f)
            printf(" scale=%g", (double)op->embed.scale);
    } else if (op->code == NIB_OP_NORM_ADD) {
        printf(" eps=%g", (double)op->norm_add.eps);
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
    printf(
        "model: %s, dim %u, layers %u, heads %u (kv %u, head_dim %u), ffn %u, vocab %u, ctx %u\n",
        llama_arch_name(hp->arch), hp->dim, hp->n_layers, hp->n_heads, hp->n_kv_heads, hp->head_dim,
        hp->ffn_dim, hp->vocab_size, hp->ctx_len);
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
            {NIB_EPI_ARGMAX, "+argmax"},    {NIB_EPI_BIAS, "+bias"},
            {NIB_EPI_SOFTCAP, "+softcap"},
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

/* Where each tensor's bytes go, per token (see the top of this file). */
enum tensor_role { ROLE_OTHER, ROLE_MATMUL, ROLE_EMBED };
static const char *const role_names[] = {"other", "matmul", "embedding"};

struct footprint {
    uint64_t resident;   /* the weights section */
    uint64_t matmul;     /* distinct matmul weights, whole */
    uint64_t embed_row;  /* one row's share of the embedding table (0: tied, counted in matmul) */
    uint64_t embed_size; /* the embedding table, whole */
    uint64_t other;      /* resident - matmul - embedding table (padding included) */
    uint64_t per_token;  /* matmul + embed_row */
    uint32_t embed;      /* tensor index, UINT32_MAX: none */
    uint8_t *role;       /* per tensor, enum tensor_role */
};

static int footprint(const struct nib_blob_view *v, struct footprint *f)
{
    const struct nib_blob_header *h = v->h;
    memset(f, 0, sizeof *f);
    f->embed = UINT32_MAX;
    f->role = calloc(h->n_tensors ? h->n_tensors : 1, 1);
    if (!f->role)
        return -1;
    for (uint32_t i = 0; i < h->n_ops; i++) {
        const struct nib_op *op = &v->ops[i];
        if (op->tensor >= h->n_tensors)
            continue;
        if (op->code == NIB_OP_MATMUL)
            f->role[op->tensor] = ROLE_MATMUL;
        else if (op->code == NIB_OP_EMBED && f->embed == UINT32_MAX)
            f->embed = op->tensor;
    }
    f->resident = h->weights.size;
    for (uint32_t i = 0; i < h->n_tensors; i++)
        if (f->role[i] == ROLE_MATMUL)
            f->matmul += v->tensors[i].size;
    if (f->embed != UINT32_MAX) {
        const struct nib_tensor_rec *t = &v->tensors[f->embed];
        f->embed_size = t->size;
        if (f->role[f->embed] != ROLE_MATMUL) {
            f->role[f->embed] = ROLE_EMBED;
            f->embed_row = t->rows ? (t->size + t->rows - 1) / t->rows : 0;
        }
    }
    uint64_t counted = f->matmul + (f->embed_row ? f->embed_size : 0);
    f->other = f->resident > counted ? f->resident - counted : 0;
    f->per_token = f->matmul + f->embed_row;
    return 0;
}

static void print_footprint(const struct nib_blob_view *v, const struct footprint *f)
{
    printf("weights: resident %" PRIu64 " bytes (%.1f MiB: the weights section, in memory from "
           "boot on)\n",
           f->resident, f->resident / 1048576.0);
    printf("         read per token %" PRIu64 " bytes (%.1f MiB): matmul weights %" PRIu64,
           f->per_token, f->per_token / 1048576.0, f->matmul);
    if (f->embed == UINT32_MAX)
        printf(", no embedding table\n");
    else if (f->embed_row)
        printf(" + one embedding row %" PRIu64 " (of '%s', %s, %" PRIu64 " bytes whole)\n",
               f->embed_row, v->tensors[f->embed].name, nib_dtype_name(v->tensors[f->embed].dtype),
               f->embed_size);
    else
        printf(" (the embedding table '%s' is the LM head's weight: counted whole)\n",
               v->tensors[f->embed].name);
    printf("         other %" PRIu64 " bytes (norm weights, RoPE tables, biases, alignment)\n",
           f->other);
}

static void json_str(const char *s, size_t max)
{
    putchar('"');
    for (size_t i = 0; i < max && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(const struct nib_blob_view *v, const struct footprint *f)
{
    const struct nib_blob_header *h = v->h;
    const struct nib_hparams *hp = &h->hp;
    printf("{\"format_version\": %u, \"blob_bytes\": %" PRIu64 ", \"crc32c\": \"%08x\", "
           "\"checksum_ok\": true,\n",
           h->version, (uint64_t)h->blob_size, h->crc32c);
    printf(" \"model\": {\"dim\": %u, \"layers\": %u, \"heads\": %u, \"kv_heads\": %u, "
           "\"head_dim\": %u, \"ffn\": %u, \"vocab\": %u, \"ctx\": %u},\n",
           hp->dim, hp->n_layers, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->ffn_dim,
           hp->vocab_size, hp->ctx_len);
    printf(" \"sections\": {\"tensors\": %" PRIu64 ", \"plan\": %" PRIu64
           ", \"tokenizer\": %" PRIu64 ", \"weights\": %" PRIu64 "},\n",
           (uint64_t)h->tensors.size, (uint64_t)h->plan.size, (uint64_t)h->tokenizer.size,
           (uint64_t)h->weights.size);
    printf(" \"runtime_bytes\": {\"activations\": %" PRIu64 ", \"kv_cache\": %" PRIu64 "},\n",
           (uint64_t)h->act_size, (uint64_t)h->kv_size);
    printf(" \"weights\": {\"resident_bytes\": %" PRIu64 ", \"per_token_bytes\": %" PRIu64
           ", \"matmul_bytes\": %" PRIu64 ", \"embedding_row_bytes\": %" PRIu64
           ", \"embedding_bytes\": %" PRIu64 ", \"embedding_tensor\": ",
           f->resident, f->per_token, f->matmul, f->embed_row, f->embed_size);
    if (f->embed == UINT32_MAX)
        printf("null");
    else
        json_str(v->tensors[f->embed].name, sizeof v->tensors[f->embed].name);
    printf(", \"other_bytes\": %" PRIu64 "},\n", f->other);
    printf(" \"n_ops\": %u,\n \"tensors\": [", h->n_ops);
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        const struct nib_tensor_rec *t = &v->tensors[i];
        printf("%s\n  {\"name\": ", i ? "," : "");
        json_str(t->name, sizeof t->name);
        printf(
            ", \"dtype\": \"%s\", \"rows\": %u, \"cols\": %u, \"group\": %u, \"offset\": %" PRIu64
            ", \"bytes\": %" PRIu64 ", \"role\": \"%s\"}",
            nib_dtype_name(t->dtype), t->rows, t->cols, t->group, (uint64_t)t->offset,
            (uint64_t)t->size, role_names[f->role[i]]);
    }
    printf("]}\n");
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nib inspect BLOB [--no-plan] [--json]\n"
            "  prints the header, the tokenizer, the tensor table, the plan and the weight\n"
            "  bytes: resident (the whole weights section, kept in memory) and read per token\n"
            "  (every matmul weight once plus one embedding row), and verifies the blob as\n"
            "  the appliance does at boot; --json: the same facts (no plan) as one JSON object\n");
}

int nib_inspect_main(int argc, char **argv)
{
    enum { O_NO_PLAN = NIB_ARGS_OPT, O_JSON };
    static const struct nib_opt opts[] = {
        {"--no-plan", O_NO_PLAN, 0}, {"--json", O_JSON, 0}, {NULL, 0, 0}};
    const char *path = NULL;
    int show_plan = 1, json = 0;
    struct nib_args a;
    nib_args_init(&a, "nib inspect", argc, argv, opts, usage, &path);
    int o;
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        if (o == O_NO_PLAN)
            show_plan = 0;
        else if (o == O_JSON)
            json = 1;
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
    } else if (v.h->model_kind == NIB_MODEL_VISION) {
        nib_inspect_vision(&v, show_plan, json);
    } else {
        struct footprint f;
        if (footprint(&v, &f)) {
            fprintf(stderr, "nib inspect: out of memory\n");
            rc = 1;
        } else if (json) {
            print_json(&v, &f);
        } else {
            print_blob(&v, show_plan);
            printf("\n");
            print_footprint(&v, &f);
            printf("\nchecksum: ok\n");
        }
        free(f.role);
    }
    nib_unmap_file(data, size);
    return rc;
}
