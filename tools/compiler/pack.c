#include "tools/compiler/pack.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/qformat.h"
#include "model_blob/blob_view.h"
#include "model_blob/crc32c.h"
#include "tools/compiler/quant.h"

struct sink {
    FILE *f;
    uint32_t crc;
    uint64_t pos;
    int failed;
};

static void put(struct sink *s, const void *p, uint64_t n)
{
    if (s->failed || n == 0)
        return;
    if (s->pos >= NIB_CRC_START)
        s->crc = nib_crc32c(s->crc, p, n);
    else if (s->pos + n > NIB_CRC_START)
        s->crc = nib_crc32c(s->crc, (const uint8_t *)p + (NIB_CRC_START - s->pos),
                            n - (NIB_CRC_START - s->pos));
    if (fwrite(p, 1, n, s->f) != n)
        s->failed = errno ? errno : EIO;
    s->pos += n;
}

static void pad_to(struct sink *s, uint64_t off)
{
    static const uint8_t zeros[4096];
    while (s->pos < off) {
        uint64_t n = off - s->pos < sizeof zeros ? off - s->pos : sizeof zeros;
        put(s, zeros, n);
    }
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

/* The vocabulary as the runtime reads it: pieces with SentencePiece's
 * U+2581 turned back into ' ', and an index sorted by piece bytes. */
struct tok_image {
    struct nib_tok_header h;
    struct nib_tok_entry *e;
    uint32_t *sorted;
    uint8_t *bytes;
    uint64_t n_bytes;
};

static const struct tok_image *sort_ctx;

static int cmp_ids(const void *a, const void *b)
{
    const struct nib_tok_entry *x = &sort_ctx->e[*(const uint32_t *)a];
    const struct nib_tok_entry *y = &sort_ctx->e[*(const uint32_t *)b];
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(sort_ctx->bytes + x->offset, sort_ctx->bytes + y->offset, m);
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    uint32_t ia = *(const uint32_t *)a, ib = *(const uint32_t *)b;
    return ia < ib ? -1 : ia > ib;
}

static int is_byte_piece(struct gguf_str s, unsigned *value)
{
    static const char hex[] = "0123456789ABCDEF";
    if (s.len != 6 || memcmp(s.ptr, "<0x", 3) != 0 || s.ptr[5] != '>')
        return 0;
    const char *hi = memchr(hex, s.ptr[3], 16), *lo = memchr(hex, s.ptr[4], 16);
    if (!hi || !lo || !s.ptr[3] || !s.ptr[4])
        return 0;
    *value = (unsigned)((hi - hex) * 16 + (lo - hex));
    return 1;
}

static int tok_build(struct tok_image *t, const struct llama_vocab *v, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    uint32_t n = v->n;
    t->e = calloc(n ? n : 1, sizeof *t->e);
    t->sorted = calloc(n ? n : 1, sizeof *t->sorted);
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += v->pieces[i].len;
    t->bytes = malloc(total ? total : 1);
    if (!t->e || !t->sorted || !t->bytes) {
        snprintf(err, errlen, "out of memory building the vocabulary");
        return -1;
    }
    t->h.n_vocab = n;
    t->h.unk_id = 0;
    int byte_base = -1, bytes_ok = 1;
    for (uint32_t i = 0; i < n; i++) {
        struct gguf_str s = v->pieces[i];
        struct nib_tok_entry *e = &t->e[i];
        e->offset = (uint32_t)t->n_bytes;
        e->score = v->scores ? v->scores[i] : 0.0f;
        e->type = (uint16_t)(v->types ? v->types[i] : NIB_TOK_NORMAL);
        if (e->type < NIB_TOK_NORMAL || e->type > NIB_TOK_BYTE)
            e->type = NIB_TOK_NORMAL;
        if (e->type == NIB_TOK_UNKNOWN)
            t->h.unk_id = i;
        unsigned bv;
        if (e->type == NIB_TOK_BYTE && is_byte_piece(s, &bv)) {
            if (byte_base < 0)
                byte_base = (int)i - (int)bv;
            if ((int)i - (int)bv != byte_base)
                bytes_ok = 0;
        }
        for (uint64_t j = 0; j < s.len; j++) {
            /* U+2581 (e2 96 81) is SentencePiece's visible space. */
            if (j + 2 < s.len && (uint8_t)s.ptr[j] == 0xE2 && (uint8_t)s.ptr[j + 1] == 0x96 &&
                (uint8_t)s.ptr[j + 2] == 0x81) {
                t->bytes[t->n_bytes++] = ' ';
                j += 2;
            } else {
                t->bytes[t->n_bytes++] = (uint8_t)s.ptr[j];
            }
        }
        e->len = (uint16_t)(t->n_bytes - e->offset);
        if (e->len > t->h.max_piece_len)
            t->h.max_piece_len = e->len;
        t->sorted[i] = i;
    }
    if (byte_base >= 0 && bytes_ok && (uint64_t)byte_base + 256 <= n) {
        t->h.byte_fallback = 1;
        t->h.byte_base = (uint32_t)byte_base;
    }
    sort_ctx = t;
    qsort(t->sorted, n, sizeof *t->sorted, cmp_ids);
    sort_ctx = NULL;
    return 0;
}

static void tok_free(struct tok_image *t)
{
    free(t->e);
    free(t->sorted);
    free(t->bytes);
}

static uint64_t tok_section_size(const struct tok_image *t)
{
    uint64_t s = sizeof t->h + (uint64_t)t->h.n_vocab * sizeof *t->e;
    s = (s + 3) & ~3ull;
    return s + (uint64_t)t->h.n_vocab * 4 + t->n_bytes;
}

static void tok_write(struct sink *s, const struct tok_image *t)
{
    uint64_t start = s->pos;
    put(s, &t->h, sizeof t->h);
    put(s, t->e, (uint64_t)t->h.n_vocab * sizeof *t->e);
    pad_to(s, start + ((s->pos - start + 3) & ~3ull));
    put(s, t->sorted, (uint64_t)t->h.n_vocab * 4);
    put(s, t->bytes, t->n_bytes);
}

static int weight_row(void *ctx, uint32_t r, float *out)
{
    return llama_weight_row_f32(ctx, r, out);
}

/* One source of a quantized tensor, packed on its own into buf (size
 * bytes). A source already in the tensor's format (GGUF Q4_0 -> q4/32,
 * Q8_0 -> q8c/32) is repacked exactly; anything else is quantized from its
 * f32 rows. */
static int pack_source(const struct plan_tensor *t, const struct llama_weight *w, uint8_t *buf,
                       char *err, size_t errlen)
{
    const struct nib_tensor_rec *rec = &t->rec;
    struct nib_qspec want = {rec->dtype, rec->group}, have;
    char why[256];
    int rc;
    if (nib_repack_spec(w->t->type, &have) == 0 && have.dtype == want.dtype &&
        have.group == want.group)
        rc = nib_repack_gguf(w, buf, why, sizeof why);
    else
        rc = nib_quantize(want, w->rows, rec->cols, weight_row, (void *)w, buf, why, sizeof why);
    if (rc)
        snprintf(err, errlen, "packing '%s': %s", rec->name, why);
    return rc;
}

/* A quantized tensor. Sources start on an N-block, so packed sources
 * simply follow each other; tile pairs (gate|up) alternate N-blocks. */
static int write_quantized(struct sink *s, const struct plan_tensor *t, char *err, size_t errlen)
{
    const struct nib_tensor_rec *rec = &t->rec;
    uint8_t *buf[3] = {NULL, NULL, NULL};
    uint64_t size[3] = {0, 0, 0};
    int rc = 0;
    for (uint32_t k = 0; k < t->n_src && rc == 0; k++) {
        size[k] = nib_qformat_size(rec->dtype, rec->group, t->src[k]->rows, rec->cols);
        buf[k] = malloc(size[k] ? size[k] : 1);
        if (!buf[k]) {
            snprintf(err, errlen, "out of memory packing '%s'", rec->name);
            rc = -1;
            break;
        }
        rc = pack_source(t, t->src[k], buf[k], err, errlen);
        if (rc == 0 && !t->tile_pairs)
            put(s, buf[k], size[k]);
    }
    if (rc == 0 && t->tile_pairs) {
        struct nib_qlayout l;
        nib_qlayout_get(&l, rec->dtype, rec->group, t->src[0]->rows, rec->cols);
        for (uint64_t off = 0; off < size[0]; off += l.nblock_bytes) {
            put(s, buf[0] + off, l.nblock_bytes);
            put(s, buf[1] + off, l.nblock_bytes);
        }
    }
    for (int k = 0; k < 3; k++)
        free(buf[k]);
    return rc;
}

/* Row r of source w as f32, or zeros past its last row. */
static int put_f32_row(struct sink *s, const struct llama_weight *w, uint32_t r, float *row,
                       uint32_t cols)
{
    if (r >= w->rows)
        memset(row, 0, cols * 4ull);
    else if (llama_weight_row_f32(w, r, row))
        return -1;
    put(s, row, cols * 4ull);
    return 0;
}

/* One tensor's payload, row by row. */
static int write_tensor(struct sink *s, const struct plan_tensor *t, const struct nib_hparams *hp,
                        float *row, char *err, size_t errlen)
{
    if (t->kind == PT_ROPE_TABLE) {
        /* Same arithmetic as the reference implementations: float powf/cosf. */
        for (uint32_t pos = 0; pos < t->rec.rows; pos++) {
            for (uint32_t i = 0; i < t->rec.cols; i += 2) {
                float freq = 1.0f / powf(hp->rope_theta, (float)i / (float)hp->rope_dim);
                float val = (float)pos * freq;
                row[i] = cosf(val);
                row[i + 1] = sinf(val);
            }
            put(s, row, t->rec.cols * 4ull);
        }
        return 0;
    }
    if (t->rec.dtype != NIB_DT_F32)
        return write_quantized(s, t, err, errlen);
    if (t->tile_pairs) {
        /* 8 gate rows, then the same 8 up rows; rows past the end are 0. */
        for (uint32_t r0 = 0; r0 < t->src[0]->rows; r0 += NIB_Q_TILE_N)
            for (uint32_t k = 0; k < 2; k++)
                for (uint32_t r = r0; r < r0 + NIB_Q_TILE_N; r++)
                    if (put_f32_row(s, t->src[k], r, row, t->rec.cols))
                        goto bad;
        return 0;
    }
    for (uint32_t k = 0; k < t->n_src; k++) {
        uint32_t rows = t->rec.rows == 1 ? 1 : t->src[k]->rows;
        for (uint32_t r = 0; r < rows; r++)
            if (put_f32_row(s, t->src[k], r, row, t->rec.cols))
                goto bad;
    }
    return 0;
bad:
    snprintf(err, errlen, "cannot convert tensor '%s' (type %s) to f32", t->rec.name,
             ggml_type_name(t->src[0]->t->type));
    return -1;
}

int nib_pack_blob(struct nib_plan *p, const struct llama_model *m, FILE *out, char *err,
                  size_t errlen)
{
    struct tok_image tok;
    if (tok_build(&tok, &m->vocab, err, errlen)) {
        tok_free(&tok);
        return -1;
    }
    /* Layout: everything is known before the first byte goes out, so the
     * header (which the checksum covers) can be written first. */
    struct nib_blob_header h = p->h;
    memcpy(h.magic, NIB_BLOB_MAGIC, 8);
    h.version = NIB_BLOB_VERSION;
    h.header_size = sizeof h;
    h.isa_required = NIB_ISA_SCALAR;
    h.n_tensors = p->n_tensors;
    h.n_ops = p->n_ops;
    h.tensors.offset = align_up(sizeof h, NIB_SECTION_ALIGN);
    h.tensors.size = (uint64_t)p->n_tensors * sizeof(struct nib_tensor_rec);
    h.plan.offset = align_up(h.tensors.offset + h.tensors.size, NIB_SECTION_ALIGN);
    h.plan.size = (uint64_t)p->n_ops * sizeof(struct nib_op);
    h.tokenizer.offset = align_up(h.plan.offset + h.plan.size, NIB_SECTION_ALIGN);
    h.tokenizer.size = tok_section_size(&tok);
    h.weights.offset = align_up(h.tokenizer.offset + h.tokenizer.size, NIB_WEIGHT_ALIGN);
    uint64_t w = 0;
    uint32_t max_cols = 1;
    for (uint32_t i = 0; i < p->n_tensors; i++) {
        struct nib_tensor_rec *r = &p->tensors[i].rec;
        r->offset = w;
        r->size = nib_qformat_size(r->dtype, r->group, r->rows, r->cols);
        w = align_up(w + r->size, NIB_SECTION_ALIGN);
        if (r->cols > max_cols)
            max_cols = r->cols;
    }
    h.weights.size = w;
    h.blob_size = h.weights.offset + w;

    float *row = malloc(max_cols * 4ull);
    if (!row) {
        tok_free(&tok);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct sink s = {.f = out};
    int rc = 0;
    put(&s, &h, sizeof h);
    pad_to(&s, h.tensors.offset);
    for (uint32_t i = 0; i < p->n_tensors; i++)
        put(&s, &p->tensors[i].rec, sizeof p->tensors[i].rec);
    pad_to(&s, h.plan.offset);
    put(&s, p->ops, h.plan.size);
    pad_to(&s, h.tokenizer.offset);
    tok_write(&s, &tok);
    pad_to(&s, h.weights.offset);
    for (uint32_t i = 0; i < p->n_tensors && rc == 0 && !s.failed; i++) {
        pad_to(&s, h.weights.offset + p->tensors[i].rec.offset);
        rc = write_tensor(&s, &p->tensors[i], &p->h.hp, row, err, errlen);
    }
    pad_to(&s, h.blob_size);
    free(row);
    tok_free(&tok);
    if (rc)
        return -1;
    if (!s.failed && (fseek(out, (long)offsetof(struct nib_blob_header, crc32c), SEEK_SET) != 0 ||
                      fwrite(&s.crc, 4, 1, out) != 1 || fflush(out)))
        s.failed = errno ? errno : EIO;
    if (s.failed) {
        snprintf(err, errlen, "write failed: %s", strerror(s.failed));
        return -1;
    }
    return 0;
}
