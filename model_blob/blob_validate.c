/* Blob validation: the runtime never trusts the blob. Every count, offset and
 * size is checked with overflow-safe arithmetic before any pointer is formed,
 * and every plan op is checked against the memory it will touch. */
#include "model_blob/blob_view.h"
#include "model_blob/blob_validate_vision.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels/qkernels.h"
#include "model_blob/crc32c.h"

int nib_blob_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

const char *nib_dtype_name(uint32_t dtype)
{
    static const char *const names[NIB_DT_COUNT] = {"f32", "q4",  "q4a", "q4c",
                                                    "q8c", "q4f", "q8f", "q4h"};
    return dtype < NIB_DT_COUNT ? names[dtype] : "unknown";
}

const char *nib_op_name(uint32_t code)
{
    static const char *const names[NIB_OP_COUNT] = {
        "?",         "embed",         "(v1 rmsnorm)", "matmul",  "(v1 rope)", "(v1 kv_store)",
        "attention", "(v1 silu_mul)", "quant",        "norm_add"};
    return code < NIB_OP_COUNT ? names[code] : nib_vop_name(code);
}

uint64_t nib_tensor_bytes(uint32_t dtype, uint32_t rows, uint32_t cols, uint32_t group)
{
    if (!nib_qformat_valid(dtype, group))
        return 0;
    return nib_qformat_size(dtype, group, rows, cols);
}

uint32_t nib_blob_crc(const void *blob, uint64_t size)
{
    return nib_crc32c(0, (const uint8_t *)blob + NIB_CRC_START, size - NIB_CRC_START);
}

/* [off, off+len) inside [0, limit)? Overflow-safe. */
static int range_ok(uint64_t off, uint64_t len, uint64_t limit)
{
    return off <= limit && len <= limit - off;
}

static int check_section(const struct nib_section *s, const char *name, uint64_t min_off,
                         uint64_t size, char *err, size_t errlen)
{
    if (s->offset % NIB_SECTION_ALIGN)
        return nib_blob_fail(err, errlen, "%s section offset %llu is not %u-byte aligned", name,
                             (unsigned long long)s->offset, NIB_SECTION_ALIGN);
    if (s->offset < min_off)
        return nib_blob_fail(err, errlen, "%s section offset %llu overlaps the section before it",
                             name, (unsigned long long)s->offset);
    if (!range_ok(s->offset, s->size, size))
        return nib_blob_fail(
            err, errlen, "%s section [%llu, +%llu) lies outside the blob (size %llu)", name,
            (unsigned long long)s->offset, (unsigned long long)s->size, (unsigned long long)size);
    return 0;
}

static int check_hparams(const struct nib_hparams *hp, char *err, size_t errlen)
{
    const struct {
        const char *name;
        uint32_t v, max;
    } dims[] = {
        {"dim", hp->dim, NIB_MAX_DIM},
        {"n_layers", hp->n_layers, NIB_MAX_LAYERS},
        {"n_heads", hp->n_heads, NIB_MAX_DIM},
        {"n_kv_heads", hp->n_kv_heads, NIB_MAX_DIM},
        {"head_dim", hp->head_dim, NIB_MAX_DIM},
        {"ffn_dim", hp->ffn_dim, 4 * NIB_MAX_DIM},
        {"vocab_size", hp->vocab_size, NIB_MAX_VOCAB},
        {"ctx_len", hp->ctx_len, NIB_MAX_CTX},
        {"rope_dim", hp->rope_dim, NIB_MAX_DIM},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v == 0 || dims[i].v > dims[i].max)
            return nib_blob_fail(err, errlen, "hyper-parameter %s = %u is outside 1..%u",
                                 dims[i].name, dims[i].v, dims[i].max);
    if (hp->n_heads % hp->n_kv_heads)
        return nib_blob_fail(err, errlen, "n_heads %u is not a multiple of n_kv_heads %u",
                             hp->n_heads, hp->n_kv_heads);
    if (hp->rope_dim > hp->head_dim || hp->rope_dim % 2 || hp->head_dim % 2)
        return nib_blob_fail(err, errlen, "rope_dim %u does not fit head_dim %u", hp->rope_dim,
                             hp->head_dim);
    if (hp->bos_id >= hp->vocab_size || hp->eos_id >= hp->vocab_size)
        return nib_blob_fail(err, errlen, "bos/eos id outside the vocabulary");
    if (!(hp->norm_eps > 0.0f && hp->norm_eps < 1.0f))
        return nib_blob_fail(err, errlen, "norm_eps %g is not in (0, 1)", (double)hp->norm_eps);
    if (!(hp->rope_theta > 1.0f && hp->rope_theta < 1e9f))
        return nib_blob_fail(err, errlen, "rope_theta %g is not in (1, 1e9)",
                             (double)hp->rope_theta);
    return 0;
}

static int check_tensors(struct nib_blob_view *v, char *err, size_t errlen)
{
    const struct nib_blob_header *h = v->h;
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        const struct nib_tensor_rec *t = &v->tensors[i];
        if (memchr(t->name, 0, NIB_NAME_MAX) == NULL)
            return nib_blob_fail(err, errlen, "tensor %u: name is not NUL-terminated", i);
        if (t->dtype >= NIB_DT_COUNT)
            return nib_blob_fail(err, errlen, "tensor %u '%s': unknown dtype %u", i, t->name,
                                 t->dtype);
        if (t->rows == 0 || t->cols == 0 || t->rows > NIB_MAX_VOCAB || t->cols > NIB_MAX_CTX * 4)
            return nib_blob_fail(err, errlen, "tensor %u '%s': shape %ux%u out of range", i,
                                 t->name, t->rows, t->cols);
        uint64_t want = nib_tensor_bytes(t->dtype, t->rows, t->cols, t->group);
        if (want == 0 || t->size != want)
            return nib_blob_fail(err, errlen,
                                 "tensor %u '%s': size %llu, expected %llu for %s %ux%u", i,
                                 t->name, (unsigned long long)t->size, (unsigned long long)want,
                                 nib_dtype_name(t->dtype), t->rows, t->cols);
        if (t->offset % NIB_SECTION_ALIGN)
            return nib_blob_fail(err, errlen, "tensor %u '%s': offset %llu is not aligned", i,
                                 t->name, (unsigned long long)t->offset);
        if (!range_ok(t->offset, t->size, h->weights.size))
            return nib_blob_fail(
                err, errlen, "tensor %u '%s': data [%llu, +%llu) outside the weights section", i,
                t->name, (unsigned long long)t->offset, (unsigned long long)t->size);
    }
    return 0;
}

/* A table of the tokenizer section: 8-aligned, inside the section. */
static const void *tok_table(const uint8_t *sec, uint64_t size, const struct nib_tok_range *r,
                             uint64_t elem, const char *name, char *err, size_t errlen)
{
    if (r->offset % 8 || !range_ok(r->offset, (uint64_t)r->count * elem, size)) {
        nib_blob_fail(err, errlen,
                      "tokenizer %s [%u, +%u x %llu) misaligned or outside the section", name,
                      r->offset, r->count, (unsigned long long)elem);
        return NULL;
    }
    return sec + r->offset;
}

static int check_tok_entries(struct nib_blob_view *v, char *err, size_t errlen)
{
    uint32_t n = v->tok->n_vocab;
    for (uint32_t i = 0; i < n; i++) {
        const struct nib_tok_entry *e = &v->tok_entries[i];
        if (e->len > v->tok->max_piece_len || !range_ok(e->offset, e->len, v->tok_bytes_size))
            return nib_blob_fail(err, errlen,
                                 "token %u: piece [%u, +%u) outside the tokenizer bytes", i,
                                 e->offset, e->len);
        if (e->type < NIB_TOK_NORMAL || e->type > NIB_TOK_BYTE)
            return nib_blob_fail(err, errlen, "token %u: unknown type %u", i, e->type);
    }
    /* The sorted index must be sorted, or the runtime's binary search would
     * silently mis-tokenize. */
    for (uint32_t i = 0; i < n; i++) {
        if (v->tok_sorted[i] >= n)
            return nib_blob_fail(err, errlen, "tokenizer sorted index %u holds id %u", i,
                                 v->tok_sorted[i]);
        if (i == 0)
            continue;
        const struct nib_tok_entry *a = &v->tok_entries[v->tok_sorted[i - 1]];
        const struct nib_tok_entry *b = &v->tok_entries[v->tok_sorted[i]];
        uint32_t m = a->len < b->len ? a->len : b->len;
        int c = memcmp(v->tok_bytes + a->offset, v->tok_bytes + b->offset, m);
        if (c > 0 || (c == 0 && a->len > b->len))
            return nib_blob_fail(err, errlen, "tokenizer sorted index is not sorted at %u", i);
    }
    return 0;
}

/* Every merge must be found where the runtime looks: from its home slot,
 * within merge_max_probe steps, with no other slot of the same key first. */
static int check_tok_merges(const struct nib_blob_view *v, char *err, size_t errlen)
{
    uint32_t slots = v->tok_merge_slots, n = v->tok->n_vocab, probe = v->tok->merge_max_probe;
    if (slots & (slots - 1) || slots > NIB_TOK_MAX_MERGES)
        return nib_blob_fail(err, errlen,
                             "tokenizer merge table has %u slots, not a power of two <= %u", slots,
                             NIB_TOK_MAX_MERGES);
    if (probe > 1024 || (slots && probe >= slots))
        return nib_blob_fail(err, errlen, "tokenizer merge probe bound %u is too large", probe);
    for (uint32_t i = 0; i < slots; i++) {
        const struct nib_tok_merge *m = &v->tok_merges[i];
        if (m->left == NIB_TOK_NONE)
            continue;
        if (m->left >= n || m->right >= n || m->result >= n)
            return nib_blob_fail(err, errlen, "tokenizer merge slot %u: id outside the vocabulary",
                                 i);
        if (m->rank >= (1u << 24))
            return nib_blob_fail(err, errlen, "tokenizer merge slot %u: rank %u too large", i,
                                 m->rank);
        uint32_t mask = slots - 1, s = nib_tok_merge_hash(m->left, m->right) & mask;
        for (uint32_t d = 0;; d++, s = (s + 1) & mask) {
            if (d > probe)
                return nib_blob_fail(err, errlen,
                                     "tokenizer merge slot %u lies beyond the probe bound", i);
            const struct nib_tok_merge *o = &v->tok_merges[s];
            if (s == i)
                break;
            if (o->left == NIB_TOK_NONE)
                return nib_blob_fail(err, errlen, "tokenizer merge slot %u is not reachable", i);
            if (o->left == m->left && o->right == m->right)
                return nib_blob_fail(err, errlen, "tokenizer merge slot %u repeats a key", i);
        }
    }
    return 0;
}

/* The added-token trie: breadth-first order, every node reached once,
 * edges sorted, terminals inside the vocabulary, depth bounded. */
static int check_tok_trie(const struct nib_blob_view *v, uint32_t n_edges, char *err, size_t errlen)
{
    uint32_t nn = v->tok_n_nodes, next = 1, edge = 0;
    if (nn == 0)
        return n_edges ? nib_blob_fail(err, errlen, "tokenizer trie has edges but no nodes") : 0;
    for (uint32_t i = 0; i < nn; i++) {
        const struct nib_tok_trie_node *t = &v->tok_nodes[i];
        if (t->edge_start != edge || t->n_edges > 256 || t->n_edges > n_edges - edge)
            return nib_blob_fail(err, errlen, "tokenizer trie node %u: edges out of order", i);
        if (t->flags & ~0x1Fu || (!(t->flags & NIB_TOKA_TERMINAL) && t->flags) ||
            ((t->flags & NIB_TOKA_TERMINAL) && (i == 0 || t->id >= v->tok->n_vocab)))
            return nib_blob_fail(err, errlen, "tokenizer trie node %u: bad token or flags", i);
        for (uint32_t k = 0; k < t->n_edges; k++, edge++) {
            const struct nib_tok_trie_edge *e = &v->tok_edges[edge];
            if (e->byte > 255 || (k && e->byte <= v->tok_edges[edge - 1].byte))
                return nib_blob_fail(err, errlen, "tokenizer trie node %u: edges not sorted", i);
            if (e->child != next++)
                return nib_blob_fail(err, errlen,
                                     "tokenizer trie node %u: edge to %u breaks the order", i,
                                     e->child);
        }
    }
    if (next != nn || edge != n_edges)
        return nib_blob_fail(err, errlen, "tokenizer trie: %u nodes reached of %u", next, nn);
    uint32_t lo = 0, hi = 1, depth = 0;
    while (lo < hi) {
        uint32_t kids = 0;
        for (uint32_t i = lo; i < hi; i++)
            kids += v->tok_nodes[i].n_edges;
        lo = hi;
        hi += kids;
        if (++depth > NIB_MAX_PIECE + 1)
            return nib_blob_fail(err, errlen, "tokenizer trie deeper than %u", NIB_MAX_PIECE);
    }
    return 0;
}

static int data_ok(const struct nib_blob_view *v, uint32_t off, uint32_t len, uint32_t max)
{
    return len <= max && range_ok(off, len, v->tok_data_size);
}

static int check_tok_steps(const struct nib_blob_view *v, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < v->tok_n_norm; i++) {
        const struct nib_tok_norm_step *s = &v->tok_norm[i];
        int ok = 0;
        if (s->kind == NIB_TOKN_NFC)
            ok = s->pat_len == 0 && s->arg_len == 0;
        else if (s->kind == NIB_TOKN_PREPEND)
            ok = s->pat_len == 0 && s->arg_len > 0 &&
                 data_ok(v, s->arg_off, s->arg_len, NIB_TOK_MAX_ARG);
        else if (s->kind == NIB_TOKN_REPLACE)
            ok = s->pat_len > 0 && data_ok(v, s->pat_off, s->pat_len, NIB_TOK_MAX_ARG) &&
                 data_ok(v, s->arg_off, s->arg_len, NIB_TOK_MAX_ARG);
        if (!ok)
            return nib_blob_fail(
                err, errlen, "tokenizer normalizer step %u: bad kind %u or strings", i, s->kind);
    }
    for (uint32_t i = 0; i < v->tok_n_pre; i++) {
        const struct nib_tok_pre_step *s = &v->tok_pre[i];
        int ok = s->flags <= NIB_TOKP_ALL;
        switch (s->kind) {
        case NIB_TOKP_SPLIT_REGEX:
        case NIB_TOKP_SPLIT_STRING:
        case NIB_TOKP_BYTELEVEL_REGEX:
            ok = ok && s->behavior >= NIB_TOKS_ISOLATED && s->behavior <= NIB_TOKS_MATCHES &&
                 s->pat_len > 0 &&
                 data_ok(v, s->pat_off, s->pat_len,
                         s->kind == NIB_TOKP_SPLIT_STRING ? NIB_TOK_MAX_ARG : NIB_TOK_MAX_DATA);
            break;
        case NIB_TOKP_DIGITS: break;
        case NIB_TOKP_METASPACE:
            ok = ok && s->replacement > 0 && s->replacement <= 0x10FFFF &&
                 (s->replacement < 0xD800 || s->replacement > 0xDFFF);
            break;
        default: ok = 0;
        }
        if (!ok)
            return nib_blob_fail(
                err, errlen, "tokenizer pre-tokenizer step %u: bad kind %u or fields", i, s->kind);
    }
    return 0;
}

/* The tokenizer section at sec (size bytes, 8-aligned); vocab: the
 * model's vocabulary size, or 0 for a section on its own. */
static int check_tokenizer(struct nib_blob_view *v, const uint8_t *sec, uint64_t size,
                           uint32_t vocab, char *err, size_t errlen)
{
    if (size < sizeof(struct nib_tok_header))
        return nib_blob_fail(err, errlen, "tokenizer section too small");
    if (size > UINT32_MAX)
        return nib_blob_fail(err, errlen, "tokenizer section larger than 4 GiB");
    if ((uintptr_t)sec % 8)
        return nib_blob_fail(err, errlen, "tokenizer section is not 8-byte aligned");
    const struct nib_tok_header *t = (const struct nib_tok_header *)(const void *)sec;
    v->tok = t;
    uint32_t n = t->n_vocab;
    if (vocab && n != vocab)
        return nib_blob_fail(err, errlen, "tokenizer has %u entries, model vocab is %u", n, vocab);
    if (n == 0 || n > NIB_MAX_VOCAB)
        return nib_blob_fail(err, errlen, "tokenizer has %u entries (1..%u)", n, NIB_MAX_VOCAB);
    if (t->model != NIB_TOKM_SPM && t->model != NIB_TOKM_BPE)
        return nib_blob_fail(err, errlen, "tokenizer model %u is unknown", t->model);
    if (t->flags & ~NIB_TOKF_ALL ||
        (t->model == NIB_TOKM_SPM &&
         (t->flags & (NIB_TOKF_BYTE_LEVEL | NIB_TOKF_FUSE_UNK | NIB_TOKF_IGNORE_MERGES))))
        return nib_blob_fail(err, errlen, "tokenizer flags 0x%x unknown for its model", t->flags);
    if (t->max_piece_len > NIB_MAX_PIECE)
        return nib_blob_fail(err, errlen, "tokenizer max piece length %u > %u", t->max_piece_len,
                             NIB_MAX_PIECE);
    if ((t->unk_id != NIB_TOK_NONE && t->unk_id >= n) ||
        (t->model == NIB_TOKM_SPM && t->unk_id >= n))
        return nib_blob_fail(err, errlen, "tokenizer unk id %u outside the vocabulary", t->unk_id);
    if ((t->bos_id != NIB_TOK_NONE && t->bos_id >= n) ||
        (t->eos_id != NIB_TOK_NONE && t->eos_id >= n) ||
        ((t->flags & NIB_TOKF_ADD_BOS) && t->bos_id == NIB_TOK_NONE) ||
        ((t->flags & NIB_TOKF_ADD_EOS) && t->eos_id == NIB_TOK_NONE))
        return nib_blob_fail(err, errlen, "tokenizer bos/eos id outside the vocabulary");
    if (t->n_eog > NIB_TOK_MAX_EOG)
        return nib_blob_fail(err, errlen, "tokenizer end-of-generation set of %u ids > %u",
                             t->n_eog, NIB_TOK_MAX_EOG);
    for (uint32_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] >= n)
            return nib_blob_fail(
                err, errlen, "tokenizer end-of-generation id %u outside the vocabulary", t->eog[i]);
    if (t->strip_leading > NIB_TOK_MAX_ARG || memchr(t->pre_name, 0, sizeof t->pre_name) == NULL)
        return nib_blob_fail(err, errlen, "tokenizer decoder strip or pre-tokenizer name is bad");
    if (t->entries.count != n || t->sorted.count != n || t->byte_ids.count != 256)
        return nib_blob_fail(err, errlen, "tokenizer tables do not hold %u tokens and 256 bytes",
                             n);
    if (t->norm.count > NIB_TOK_MAX_STEPS || t->pre.count > NIB_TOK_MAX_STEPS ||
        t->trie_nodes.count > NIB_TOK_MAX_TRIE || t->trie_edges.count > NIB_TOK_MAX_TRIE ||
        t->data.count > NIB_TOK_MAX_DATA || t->chat.count > NIB_TOK_MAX_CHAT)
        return nib_blob_fail(err, errlen, "tokenizer step, trie, data or chat table is too large");
    if (t->model == NIB_TOKM_SPM && (t->merges.count || t->norm.count || t->pre.count))
        return nib_blob_fail(err, errlen, "SentencePiece tokenizer with merges or pipeline steps");
    if (!(v->tok_entries = tok_table(sec, size, &t->entries, sizeof(struct nib_tok_entry),
                                     "entries", err, errlen)) ||
        !(v->tok_sorted = tok_table(sec, size, &t->sorted, 4, "sorted index", err, errlen)) ||
        !(v->tok_bytes = tok_table(sec, size, &t->bytes, 1, "bytes", err, errlen)) ||
        !(v->tok_byte_ids = tok_table(sec, size, &t->byte_ids, 4, "byte ids", err, errlen)) ||
        !(v->tok_merges = tok_table(sec, size, &t->merges, sizeof(struct nib_tok_merge), "merges",
                                    err, errlen)) ||
        !(v->tok_nodes = tok_table(sec, size, &t->trie_nodes, sizeof(struct nib_tok_trie_node),
                                   "trie nodes", err, errlen)) ||
        !(v->tok_edges = tok_table(sec, size, &t->trie_edges, sizeof(struct nib_tok_trie_edge),
                                   "trie edges", err, errlen)) ||
        !(v->tok_norm = tok_table(sec, size, &t->norm, sizeof(struct nib_tok_norm_step),
                                  "normalizer", err, errlen)) ||
        !(v->tok_pre = tok_table(sec, size, &t->pre, sizeof(struct nib_tok_pre_step),
                                 "pre-tokenizer", err, errlen)) ||
        !(v->tok_data = tok_table(sec, size, &t->data, 1, "data", err, errlen)) ||
        !(v->tok_chat = tok_table(sec, size, &t->chat, 1, "chat program", err, errlen)))
        return -1;
    v->tok_bytes_size = t->bytes.count;
    v->tok_merge_slots = t->merges.count;
    v->tok_n_nodes = t->trie_nodes.count;
    v->tok_n_norm = t->norm.count;
    v->tok_n_pre = t->pre.count;
    v->tok_data_size = t->data.count;
    v->tok_chat_size = t->chat.count;
    if (!t->chat.count)
        v->tok_chat = NULL;
    int need_bytes = (t->flags & (NIB_TOKF_BYTE_LEVEL | NIB_TOKF_BYTE_FALLBACK)) &&
                     (t->model == NIB_TOKM_SPM || (t->flags & NIB_TOKF_BYTE_LEVEL));
    for (uint32_t b = 0; b < 256; b++)
        if (v->tok_byte_ids[b] == NIB_TOK_NONE ? need_bytes : v->tok_byte_ids[b] >= n)
            return nib_blob_fail(err, errlen, "tokenizer byte %u: token %u outside the vocabulary",
                                 b, v->tok_byte_ids[b]);
    if (!data_ok(v, t->dec_from_off, t->dec_from_len, NIB_TOK_MAX_ARG) ||
        !data_ok(v, t->dec_to_off, t->dec_to_len, NIB_TOK_MAX_ARG))
        return nib_blob_fail(err, errlen, "tokenizer decoder strings outside the data");
    if (check_tok_entries(v, err, errlen) || check_tok_merges(v, err, errlen) ||
        check_tok_trie(v, t->trie_edges.count, err, errlen) || check_tok_steps(v, err, errlen))
        return -1;
    return 0;
}

/* A vision model's header: no hparams, no KV cache, one row per run. */
static int check_vision_header(const struct nib_blob_header *h, char *err, size_t errlen)
{
    static const struct nib_hparams zero;
    if (memcmp(&h->hp, &zero, sizeof zero) != 0)
        return nib_blob_fail(err, errlen, "a vision blob has decoder hyper-parameters");
    if (h->kv_size != 0 || h->max_batch != 1 || h->argmax_blocks != 0)
        return nib_blob_fail(err, errlen, "a vision blob has a KV cache, batch rows or an argmax");
    return 0;
}

/* The io table of a vision model (blob_format.h struct nib_io_rec), in the
 * tokenizer section's place: inputs first, at least one of each, every
 * tensor inside the arena; inputs do not overlap one another, nor outputs
 * (an output may alias an input: the run overwrites it). */
static int check_io(struct nib_blob_view *v, const uint8_t *sec, uint64_t size, char *err,
                    size_t errlen)
{
    const struct nib_blob_header *h = v->h;
    if (h->n_io < 2 || h->n_io > NIB_IO_MAX || size != h->n_io * (uint64_t)sizeof *v->io ||
        (uintptr_t)sec % 8)
        return nib_blob_fail(err, errlen, "io table of %u records in %llu bytes (2..%u records)",
                             h->n_io, (unsigned long long)size, NIB_IO_MAX);
    v->io = (const struct nib_io_rec *)(const void *)sec;
    v->n_io = h->n_io;
    uint32_t n_in = 0;
    for (uint32_t i = 0; i < h->n_io; i++) {
        const struct nib_io_rec *r = &v->io[i];
        if (memchr(r->name, 0, NIB_NAME_MAX) == NULL || r->name[0] == 0)
            return nib_blob_fail(err, errlen, "io record %u: name is empty or not NUL-terminated",
                                 i);
        if (r->dir > NIB_IO_OUTPUT || (r->dir == NIB_IO_INPUT && n_in != i))
            return nib_blob_fail(err, errlen, "io record %u: direction %u (inputs come first)", i,
                                 r->dir);
        n_in += r->dir == NIB_IO_INPUT;
        if (r->dtype != NIB_IO_F32 && r->dtype != NIB_IO_U8)
            return nib_blob_fail(err, errlen, "io record %u: element type %u is unknown", i,
                                 r->dtype);
        if (r->rank == 0 || r->rank > NIB_IO_MAX_RANK || r->reserved)
            return nib_blob_fail(err, errlen, "io record %u: rank %u outside 1..%u", i, r->rank,
                                 NIB_IO_MAX_RANK);
        uint64_t bytes = nib_io_elem_size(r->dtype);
        for (uint32_t d = 0; d < NIB_IO_MAX_RANK; d++) {
            if (d < r->rank ? r->dims[d] == 0 : r->dims[d] != 0)
                return nib_blob_fail(err, errlen, "io record %u: dimension %u is %u", i, d,
                                     r->dims[d]);
            if (d < r->rank && (bytes *= r->dims[d]) > NIB_IO_MAX_BYTES)
                return nib_blob_fail(err, errlen, "io record %u: larger than %llu bytes", i,
                                     (unsigned long long)NIB_IO_MAX_BYTES);
        }
        if (r->bytes != bytes || r->off % 64 || !range_ok(r->off, r->bytes, h->act_size))
            return nib_blob_fail(err, errlen,
                                 "io record %u: %llu bytes at %llu, not %llu inside the arena", i,
                                 (unsigned long long)r->bytes, (unsigned long long)r->off,
                                 (unsigned long long)bytes);
        for (uint32_t j = n_in == i + 1 ? 0 : n_in; j < i; j++)
            if (r->off < v->io[j].off + v->io[j].bytes && v->io[j].off < r->off + r->bytes)
                return nib_blob_fail(err, errlen, "io records %u and %u overlap", j, i);
    }
    if (n_in == 0 || n_in == h->n_io)
        return nib_blob_fail(err, errlen,
                             "io table has %u inputs and %u outputs (at least one each)", n_in,
                             h->n_io - n_in);
    v->n_inputs = n_in;
    return 0;
}

/* Each op's operands, as (offset, bytes) ranges in runtime memory. */
struct op_ranges {
    uint64_t off[8], len[8];
    int n;
    int bad_stride;
};

static void add_range(struct op_ranges *r, uint64_t off, uint64_t len)
{
    r->off[r->n] = off;
    r->len[r->n] = len;
    r->n++;
}

/* The bytes a KV cache (K or V) of heads KV heads of hd floats spans over
 * ctx positions, KV head g's row of position t at g x head_stride + t x
 * pos_stride; 0 for any other layout than two: a position's heads side by
 * side (head_stride = hd x 4, pos_stride >= heads x hd x 4) or one head's
 * positions side by side (pos_stride = hd x 4, head_stride >= ctx x
 * pos_stride: what the planner writes, docs/blob-format.md). Either keeps
 * every row apart, and a head's rows or a position's heads are one run of
 * bytes, as the reference loop (rt/refloop.c) reads them. */
static uint64_t kv_cache_extent(uint64_t heads, uint64_t hd, uint64_t ctx, uint64_t pos_stride,
                                uint64_t head_stride)
{
    if (heads == 0 || hd == 0 || ctx == 0 || pos_stride % 4 || head_stride % 4)
        return 0;
    int rows = head_stride == hd * 4 && pos_stride >= heads * hd * 4;
    int by_head = pos_stride == hd * 4 && head_stride >= ctx * pos_stride;
    if (!rows && !by_head)
        return 0;
    return nib_kv_cache_bytes(heads, hd, ctx, pos_stride, head_stride);
}

/* An f32 row operand: rows rows of row_bytes, stride apart. Rows may only
 * overlap (stride < row_bytes) when a single row is ever used. */
static void add_rows(struct op_ranges *r, uint64_t off, uint32_t stride, uint32_t rows,
                     uint64_t row_bytes, int single_row)
{
    if (stride % 4 || (!single_row && rows > 1 && stride < row_bytes))
        r->bad_stride = 1;
    add_range(r, off, (uint64_t)(rows - 1) * stride + row_bytes);
}

/* An int8 activation operand for rows rows of k inputs in blocks of block. */
static int add_qact(struct op_ranges *r, uint64_t off, uint32_t rows, uint64_t k, uint32_t block)
{
    uint64_t fp = k > UINT32_MAX ? 0 : nib_qact_footprint(rows, (uint32_t)k, block);
    if (fp == 0 || off % NIB_QACT_ALIGN)
        return -1;
    add_range(r, off, fp);
    return 0;
}

static int check_op(const struct nib_blob_view *v, uint32_t i, char *err, size_t errlen)
{
    static const uint32_t allowed_flags[NIB_OP_COUNT] = {
        [NIB_OP_EMBED] = 0,
        [NIB_OP_MATMUL] = NIB_OPF_LAST_ROW | NIB_OPF_QOUT | NIB_OPF_NORM_IN | NIB_EPI_ADD |
                          NIB_EPI_ROPE_KV | NIB_EPI_SILU_MUL | NIB_EPI_ARGMAX | NIB_EPI_SOFTCAP |
                          NIB_EPI_BIAS,
        [NIB_OP_ATTENTION] = NIB_OPF_QOUT,
        [NIB_OP_QUANT] = NIB_OPF_LAST_ROW,
        [NIB_OP_NORM_ADD] = 0,
    };
    const struct nib_op *op = &v->ops[i];
    const struct nib_blob_header *h = v->h;
    const struct nib_hparams *hp = &h->hp;
    const struct nib_tensor_rec *t = NULL;
    struct op_ranges r = {0};
    const uint32_t M = h->max_batch;
    uint64_t n = op->n, k = op->k, ctx = hp->ctx_len;
    const char *name = nib_op_name(op->code);

    if (op->code >= NIB_VOP_FIRST || h->model_kind == NIB_MODEL_VISION)
        return nib_check_vision_op(v, i, err, errlen);
    if (op->code != NIB_OP_EMBED && op->code != NIB_OP_MATMUL && op->code != NIB_OP_ATTENTION &&
        op->code != NIB_OP_QUANT && op->code != NIB_OP_NORM_ADD)
        return nib_blob_fail(err, errlen, "plan op %u: unknown opcode %u", i, op->code);
    if (op->flags & ~allowed_flags[op->code])
        return nib_blob_fail(err, errlen,
                             "plan op %u (%s): unknown or misplaced flags or epilogue 0x%x", i,
                             name, op->flags & ~allowed_flags[op->code]);
    const int single = (op->flags & NIB_OPF_LAST_ROW) != 0;
    if (op->code == NIB_OP_EMBED || op->code == NIB_OP_MATMUL || op->code == NIB_OP_NORM_ADD) {
        if (op->tensor >= h->n_tensors)
            return nib_blob_fail(err, errlen, "plan op %u (%s): tensor index %u out of range", i,
                                 name, op->tensor);
        t = &v->tensors[op->tensor];
        /* embeddings and matrices may be in any format (checked with the
         * tensor table); a norm weight is f32 */
        if (t->dtype != NIB_DT_F32 && op->code == NIB_OP_NORM_ADD)
            return nib_blob_fail(err, errlen, "plan op %u (%s): tensor '%s' must be f32, not %s", i,
                                 name, t->name, nib_dtype_name(t->dtype));
    }
    if (n == 0 || n > 4u * NIB_MAX_VOCAB)
        return nib_blob_fail(err, errlen, "plan op %u (%s): n = %llu out of range", i, name,
                             (unsigned long long)n);
    switch (op->code) {
    case NIB_OP_EMBED:
        if (t->cols != n || t->rows != hp->vocab_size)
            return nib_blob_fail(err, errlen, "plan op %u (embed): tensor shape does not match", i);
        if (!isfinite(op->embed.scale))
            return nib_blob_fail(err, errlen, "plan op %u (embed): scale %g is not finite", i,
                                 (double)op->embed.scale);
        add_rows(&r, op->dst, op->dst_stride, M, n * 4, single);
        break;
    case NIB_OP_NORM_ADD: {
        /* dst rows += RMSNorm(src0 rows) * w: every worker normalizes whole
         * rows into its scratch and adds its part, so src0 must not be the
         * dst another worker is writing */
        const uint64_t rb = (uint64_t)(M - 1) * op->src0_stride + n * 4,
                       db = (uint64_t)(M - 1) * op->dst_stride + n * 4;
        if (t->rows != 1 || t->cols != n)
            return nib_blob_fail(err, errlen,
                                 "plan op %u (norm_add): weight '%s' is %ux%u, not 1x%llu", i,
                                 t->name, t->rows, t->cols, (unsigned long long)n);
        if (!(op->norm_add.eps > 0.0f && op->norm_add.eps < 1.0f))
            return nib_blob_fail(err, errlen, "plan op %u (norm_add): eps %g is not in (0, 1)", i,
                                 (double)op->norm_add.eps);
        if (((n * 4 + 63) & ~63ull) > h->wscratch_size)
            return nib_blob_fail(
                err, errlen,
                "plan op %u (norm_add): needs %llu bytes of worker scratch, the blob gives "
                "%u",
                i, (unsigned long long)((n * 4 + 63) & ~63ull), h->wscratch_size);
        if (op->src0 < op->dst + db && op->dst < op->src0 + rb)
            return nib_blob_fail(err, errlen,
                                 "plan op %u (norm_add): source rows overlap the destination", i);
        add_rows(&r, op->src0, op->src0_stride, M, n * 4, single);
        add_rows(&r, op->dst, op->dst_stride, M, n * 4, single);
        break;
    }
    case NIB_OP_MATMUL: {
        const uint32_t f = op->flags;
        if (t->rows != n || t->cols != k)
            return nib_blob_fail(
                err, errlen, "plan op %u (matmul): tensor '%s' is %ux%u, op wants %llux%llu", i,
                t->name, t->rows, t->cols, (unsigned long long)n, (unsigned long long)k);
        int fused = !!(f & NIB_EPI_ROPE_KV) + !!(f & NIB_EPI_SILU_MUL) + !!(f & NIB_EPI_ARGMAX);
        if (fused > 1 || ((f & NIB_EPI_ADD) && (f & NIB_EPI_SILU_MUL)))
            return nib_blob_fail(err, errlen,
                                 "plan op %u (matmul): epilogue flags 0x%x do not combine", i, f);
        if (f & NIB_OPF_NORM_IN) {
            /* f32 rows normalized (and quantized) into each worker's scratch */
            const struct nib_norm_in_params *nm = &op->matmul.norm;
            if (nm->tensor >= h->n_tensors || v->tensors[nm->tensor].dtype != NIB_DT_F32 ||
                v->tensors[nm->tensor].rows != 1 || v->tensors[nm->tensor].cols != k ||
                !(nm->eps > 0.0f && nm->eps < 1.0f))
                return nib_blob_fail(err, errlen, "plan op %u (matmul): bad input norm", i);
            uint64_t need = (uint64_t)M * ((k * 4 + 63) & ~63ull);
            if (t->dtype != NIB_DT_F32)
                need +=
                    nib_qact_footprint(M, (uint32_t)k, nib_qformat_act_block(t->dtype, t->group));
            if (need > h->wscratch_size)
                return nib_blob_fail(
                    err, errlen,
                    "plan op %u (matmul): needs %llu bytes of worker scratch, the blob gives %u", i,
                    (unsigned long long)need, h->wscratch_size);
            add_rows(&r, op->src0, op->src0_stride, M, k * 4, single);
        } else if (t->dtype == NIB_DT_F32) {
            add_rows(&r, op->src0, op->src0_stride, M, k * 4, single);
        } else if (add_qact(&r, op->src0, M, k, nib_qformat_act_block(t->dtype, t->group))) {
            return nib_blob_fail(err, errlen, "plan op %u (matmul): bad quantized input", i);
        }
        if (f & NIB_EPI_ADD)
            add_rows(&r, op->src1, op->src1_stride, M, n * 4, single);
        if (f & NIB_EPI_BIAS) {
            const uint32_t bt = op->matmul.bias;
            if (bt >= h->n_tensors || v->tensors[bt].dtype != NIB_DT_F32 ||
                v->tensors[bt].rows != 1 || v->tensors[bt].cols != n)
                return nib_blob_fail(err, errlen,
                                     "plan op %u (matmul): bias is not an f32 1x%llu tensor", i,
                                     (unsigned long long)n);
        }
        if ((f & NIB_EPI_SOFTCAP) && !(isfinite(op->matmul.softcap) && op->matmul.softcap > 0.0f))
            return nib_blob_fail(err, errlen,
                                 "plan op %u (matmul): soft-cap %g is not finite and > 0", i,
                                 (double)op->matmul.softcap);
        if ((f & NIB_OPF_QOUT) && !(f & NIB_EPI_SILU_MUL))
            return nib_blob_fail(err, errlen,
                                 "plan op %u (matmul): only gate|up quantizes its output", i);
        if (f & NIB_EPI_SILU_MUL) {
            /* n_out outputs from pairs of 8-row tiles */
            const struct nib_silu_mul_params *sm = &op->matmul.silu_mul;
            if (sm->n_out == 0 || n != 2ull * ((sm->n_out + 7ull) / 8 * 8))
                return nib_blob_fail(err, errlen,
                                     "plan op %u (matmul): silu-mul rows do not pair up", i);
            if (sm->act > 1)
                return nib_blob_fail(
                    err, errlen, "plan op %u (matmul): unknown gated activation %u", i, sm->act);
            add_rows(&r, op->aux, op->aux_stride, M, n * 4, single);
            if (!(f & NIB_OPF_QOUT))
                add_rows(&r, op->dst, op->dst_stride, M, sm->n_out * 4ull, single);
            else if (sm->qblock == 0 || sm->qblock > NIB_QACT_MAX_BLOCK ||
                     add_qact(&r, op->dst, M, sm->n_out, sm->qblock))
                return nib_blob_fail(err, errlen,
                                     "plan op %u (matmul): bad quantized gate|up output", i);
        } else {
            add_rows(&r, op->dst, op->dst_stride, M, n * 4, single);
        }
        if (f & NIB_EPI_ROPE_KV) {
            /* Q, K and V rows in that order, whole heads; RoPE on an even prefix */
            const struct nib_rope_kv_params *rk = &op->matmul.rope_kv;
            uint64_t hd = rk->head_dim, rd = rk->rope_dim, kv = rk->kv_rows;
            if (hd == 0 || hd % 2 || rd == 0 || rd % 2 || rd > hd || rk->q_rows % hd || kv % hd ||
                kv == 0 || rk->k_off % 2 || rk->q_rows > rk->k_off || rk->k_off + kv > rk->v_off ||
                rk->v_off + kv > n)
                return nib_blob_fail(err, errlen, "plan op %u (matmul): bad fused QKV geometry", i);
            if (rk->table >= h->n_tensors)
                return nib_blob_fail(err, errlen,
                                     "plan op %u (matmul): RoPE table index out of range", i);
            const struct nib_tensor_rec *rt = &v->tensors[rk->table];
            if (rt->dtype != NIB_DT_F32 || rt->rows != ctx || rt->cols != rd)
                return nib_blob_fail(err, errlen,
                                     "plan op %u (matmul): RoPE table shape does not match", i);
            if (rk->q_norm != UINT32_MAX || rk->k_norm != UINT32_MAX) {
                /* per-head Q/K norms: both, f32 1 x head_dim; K heads start on a
                 * head boundary so shares and steps of whole heads cover them */
                for (int j = 0; j < 2; j++) {
                    uint32_t nt = j ? rk->k_norm : rk->q_norm;
                    if (nt >= h->n_tensors || v->tensors[nt].dtype != NIB_DT_F32 ||
                        v->tensors[nt].rows != 1 || v->tensors[nt].cols != hd)
                        return nib_blob_fail(
                            err, errlen, "plan op %u (matmul): %s norm is not an f32 1x%llu tensor",
                            i, j ? "K" : "Q", (unsigned long long)hd);
                }
                if (!(rk->qk_eps > 0.0f && rk->qk_eps < 1.0f) || rk->k_off % hd)
                    return nib_blob_fail(err, errlen,
                                         "plan op %u (matmul): bad Q/K norm eps or K offset", i);
            }
            uint64_t ext = kv_cache_extent(kv / hd, hd, ctx, op->aux_stride, rk->head_stride);
            if (ext == 0 || rk->v_cache_off % 4)
                return nib_blob_fail(err, errlen,
                                     "plan op %u (matmul): KV cache strides overlap its rows "
                                     "or are not multiples of 4",
                                     i);
            if (op->aux + rk->v_cache_off < op->aux)
                return nib_blob_fail(err, errlen, "plan op %u (matmul): offset overflow", i);
            add_range(&r, op->aux, ext);
            add_range(&r, op->aux + rk->v_cache_off, ext);
        }
        if (f & NIB_EPI_ARGMAX) {
            if (!single || h->argmax_blocks != (n + NIB_ARGMAX_BLOCK - 1) / NIB_ARGMAX_BLOCK)
                return nib_blob_fail(
                    err, errlen, "plan op %u (matmul): argmax epilogue does not match the header",
                    i);
        }
        break;
    }
    case NIB_OP_ATTENTION: {
        /* n heads of k floats; the K cache at src1, n_kv_heads heads' rows
         * (kv_cache_extent); the V cache the same, v_cache_off further */
        const struct nib_attention_params *a = &op->attention;
        const uint64_t ext = k && a->n_kv_heads ? kv_cache_extent(a->n_kv_heads, k, ctx,
                                                                  a->cache_stride, a->head_stride)
                                                : 0;
        if (k == 0 || a->n_kv_heads == 0 || n % a->n_kv_heads || ext == 0 || a->v_cache_off % 4 ||
            !(a->scale > 0.0f) || !isfinite(a->scale))
            return nib_blob_fail(err, errlen, "plan op %u (attention): bad head geometry", i);
        if (a->window > ctx)
            return nib_blob_fail(
                err, errlen, "plan op %u (attention): window %u is longer than the context %llu", i,
                a->window, (unsigned long long)ctx);
        if (!(isfinite(a->softcap) && a->softcap >= 0.0f))
            return nib_blob_fail(err, errlen,
                                 "plan op %u (attention): soft-cap %g is not finite and >= 0", i,
                                 (double)a->softcap);
        add_rows(&r, op->src0, op->src0_stride, M, n * k * 4, single);
        if (op->flags & NIB_OPF_QOUT) {
            /* units of unit_heads heads, each a whole number of blocks (or all heads) */
            if (a->qblock == 0 || a->qblock > NIB_QACT_MAX_BLOCK || a->unit_heads == 0 ||
                a->unit_heads > n ||
                (a->unit_heads < n && ((uint64_t)a->unit_heads * k) % a->qblock) ||
                add_qact(&r, op->dst, M, n * k, a->qblock))
                return nib_blob_fail(err, errlen, "plan op %u (attention): bad quantized output",
                                     i);
            add_rows(&r, op->aux, op->aux_stride, M, n * k * 4, single);
        } else {
            add_rows(&r, op->dst, op->dst_stride, M, n * k * 4, single);
        }
        if (op->src1 + a->v_cache_off < op->src1)
            return nib_blob_fail(err, errlen, "plan op %u (attention): offset overflow", i);
        add_range(&r, op->src1, ext);
        add_range(&r, op->src1 + a->v_cache_off, ext);
        add_range(&r, a->scratch, n * ctx * 4);
        break;
    }
    case NIB_OP_QUANT:
        if (add_qact(&r, op->dst, M, n, op->quant.block))
            return nib_blob_fail(err, errlen, "plan op %u (quant): bad block %u or alignment", i,
                                 op->quant.block);
        add_rows(&r, op->src0, op->src0_stride, M, n * 4, single);
        break;
    }
    if (r.bad_stride)
        return nib_blob_fail(err, errlen, "plan op %u (%s): row stride smaller than a row", i,
                             name);
    for (int j = 0; j < r.n; j++) {
        if (r.off[j] % 4 || !range_ok(r.off[j], r.len[j], v->mem_size))
            return nib_blob_fail(
                err, errlen,
                "plan op %u (%s): operand %d [%llu, +%llu) outside runtime memory (%llu bytes)", i,
                name, j, (unsigned long long)r.off[j], (unsigned long long)r.len[j],
                (unsigned long long)v->mem_size);
    }
    return 0;
}

/* Each attention op reads the K and V cache that the fused QKV op
 * (NIB_EPI_ROPE_KV) before it wrote: the same place, heads, head size,
 * strides and V offset. check_op keeps each op inside runtime memory on
 * its own; this keeps a blob whose two descriptions disagree (a cache
 * written in one layout and read in another) from answering wrong tokens
 * without a word. The planner emits QKV and its attention side by side,
 * so the nearest earlier QKV op is the writer. */
static int check_kv_pairs(const struct nib_blob_view *v, char *err, size_t errlen)
{
    const struct nib_op *w = NULL;
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        const struct nib_op *op = &v->ops[i];
        if (op->code == NIB_OP_MATMUL && (op->flags & NIB_EPI_ROPE_KV))
            w = op;
        if (op->code != NIB_OP_ATTENTION)
            continue;
        if (!w)
            return nib_blob_fail(
                err, errlen, "plan op %u (attention): no earlier QKV op writes its KV cache", i);
        const struct nib_rope_kv_params *rk = &w->matmul.rope_kv;
        const struct nib_attention_params *a = &op->attention;
        if (w->aux != op->src1 || w->aux_stride != a->cache_stride ||
            rk->head_stride != a->head_stride || rk->v_cache_off != a->v_cache_off ||
            rk->head_dim != op->k || rk->kv_rows / rk->head_dim != a->n_kv_heads)
            return nib_blob_fail(err, errlen,
                                 "plan op %u (attention): reads its KV cache in another place or "
                                 "layout than op %u (QKV) writes it",
                                 i, (uint32_t)(w - v->ops));
    }
    return 0;
}

int nib_blob_open(struct nib_blob_view *v, const void *blob, uint64_t size, int check_crc,
                  char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    const uint8_t *b = blob;
    if ((uintptr_t)b % NIB_SECTION_ALIGN)
        return nib_blob_fail(err, errlen, "blob is not %u-byte aligned in memory",
                             NIB_SECTION_ALIGN);
    if (size < sizeof(struct nib_blob_header))
        return nib_blob_fail(err, errlen, "blob is %llu bytes, smaller than its header",
                             (unsigned long long)size);
    const struct nib_blob_header *h = blob;
    if (memcmp(h->magic, NIB_BLOB_MAGIC, 8) != 0)
        return nib_blob_fail(err, errlen, "bad magic: not a nibble blob");
    if (h->version != NIB_BLOB_VERSION)
        return nib_blob_fail(
            err, errlen,
            "blob format version %u is not supported: this build reads version %u only "
            "(compile the model again with this nib)",
            h->version, NIB_BLOB_VERSION);
    if (h->header_size != sizeof(struct nib_blob_header))
        return nib_blob_fail(err, errlen, "header size %u, expected %zu", h->header_size,
                             sizeof(struct nib_blob_header));
    if (h->blob_size != size)
        return nib_blob_fail(err, errlen,
                             "header says %llu bytes, blob has %llu (truncated or padded)",
                             (unsigned long long)h->blob_size, (unsigned long long)size);
    if (check_crc) {
        uint32_t crc = nib_blob_crc(blob, size);
        if (crc != h->crc32c)
            return nib_blob_fail(err, errlen,
                                 "checksum mismatch: header says %08x, contents give %08x",
                                 h->crc32c, crc);
    }
    v->base = b;
    v->size = size;
    v->h = h;
    const int vision = h->model_kind == NIB_MODEL_VISION;
    if (h->model_kind != NIB_MODEL_DECODER && !vision)
        return nib_blob_fail(err, errlen, "model kind %u is unknown (0: decoder, 1: vision)",
                             h->model_kind);
    if (vision ? check_vision_header(h, err, errlen) : check_hparams(&h->hp, err, errlen))
        return -1;
    if (!vision && h->n_io)
        return nib_blob_fail(err, errlen, "a decoder blob has %u io records (it takes tokens)",
                             h->n_io);
    if (check_section(&h->tensors, "tensor", sizeof *h, size, err, errlen) ||
        check_section(&h->plan, "plan", h->tensors.offset + h->tensors.size, size, err, errlen) ||
        check_section(&h->tokenizer, "tokenizer", h->plan.offset + h->plan.size, size, err,
                      errlen) ||
        check_section(&h->weights, "weights", h->tokenizer.offset + h->tokenizer.size, size, err,
                      errlen))
        return -1;
    if (h->weights.offset % NIB_WEIGHT_ALIGN)
        return nib_blob_fail(err, errlen, "weights section is not aligned to %u bytes",
                             NIB_WEIGHT_ALIGN);
    if ((uint64_t)h->n_tensors * sizeof(struct nib_tensor_rec) != h->tensors.size)
        return nib_blob_fail(err, errlen, "tensor table size %llu does not hold %u tensors",
                             (unsigned long long)h->tensors.size, h->n_tensors);
    if ((uint64_t)h->n_ops * sizeof(struct nib_op) != h->plan.size || (h->n_ops == 0 && !vision))
        return nib_blob_fail(err, errlen, "plan size %llu does not hold %u ops",
                             (unsigned long long)h->plan.size, h->n_ops);
    if (h->act_size > (1ull << 40) || h->kv_size > (1ull << 40))
        return nib_blob_fail(err, errlen, "arena %llu + KV cache %llu bytes is absurd",
                             (unsigned long long)h->act_size, (unsigned long long)h->kv_size);
    v->mem_size = h->act_size + h->kv_size;
    v->tensors = (const struct nib_tensor_rec *)(const void *)(b + h->tensors.offset);
    v->ops = (const struct nib_op *)(const void *)(b + h->plan.offset);
    v->weights = b + h->weights.offset;
    if (h->max_batch == 0 || h->max_batch > NIB_MAX_BATCH)
        return nib_blob_fail(err, errlen, "max_batch %u outside 1..%u", h->max_batch,
                             NIB_MAX_BATCH);
    if (h->wscratch_size > (1u << 30) || h->wscratch_off % 64 ||
        !range_ok(h->wscratch_off, h->wscratch_size, h->act_size))
        return nib_blob_fail(err, errlen,
                             "worker scratch [%llu, +%u) outside the arena or misaligned",
                             (unsigned long long)h->wscratch_off, h->wscratch_size);
    if (h->argmax_blocks &&
        h->argmax_blocks != (h->hp.vocab_size + NIB_ARGMAX_BLOCK - 1) / NIB_ARGMAX_BLOCK)
        return nib_blob_fail(err, errlen, "argmax_blocks %u does not match the vocabulary",
                             h->argmax_blocks);
    if (!range_ok(h->logits_off, (uint64_t)h->hp.vocab_size * 4, h->act_size) ||
        !range_ok(h->token_slot_off, h->max_batch * 4ull, h->act_size) ||
        !range_ok(h->pos_slot_off, 4, h->act_size) ||
        !range_ok(h->argmax_off, h->argmax_blocks * (uint64_t)sizeof(struct nib_argmax_block),
                  h->act_size) ||
        h->logits_off % 4 || h->token_slot_off % 4 || h->pos_slot_off % 4 || h->argmax_off % 4)
        return nib_blob_fail(err, errlen, "logits/token/position/argmax slots outside the arena");
    if (check_tensors(v, err, errlen))
        return -1;
    if (vision) {
        if (check_io(v, b + h->tokenizer.offset, h->tokenizer.size, err, errlen))
            return -1;
        for (uint32_t i = 0; i < h->n_ops; i++)
            if (check_op(v, i, err, errlen))
                return -1;
        return 0;
    }
    if (check_tokenizer(v, b + h->tokenizer.offset, h->tokenizer.size, h->hp.vocab_size, err,
                        errlen))
        return -1;
    if ((v->tok->bos_id != NIB_TOK_NONE && v->tok->bos_id != h->hp.bos_id) ||
        (v->tok->eos_id != NIB_TOK_NONE && v->tok->eos_id != h->hp.eos_id))
        return nib_blob_fail(err, errlen, "tokenizer bos/eos differ from the model's");
    for (uint32_t i = 0; i < h->n_ops; i++)
        if (check_op(v, i, err, errlen))
            return -1;
    return check_kv_pairs(v, err, errlen);
}

int nib_tok_section_open(struct nib_blob_view *v, const void *sec, uint64_t size, char *err,
                         size_t errlen)
{
    memset(v, 0, sizeof *v);
    v->base = sec;
    v->size = size;
    return check_tokenizer(v, sec, size, 0, err, errlen);
}
