#include "tools/compiler/pack.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/qformat.h"
#include "model_blob/blob_view.h"
#include "model_blob/crc32c.h"
#include "tools/compiler/calib_store.h"
#include "tools/compiler/chat_compile.h"
#include "tools/compiler/quant.h"
#include "tools/compiler/repack.h"
#include "tools/compiler/tok_pack.h"

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

static int weight_row(void *ctx, uint32_t r, float *out)
{
    return llama_weight_row_f32(ctx, r, out);
}

/* Quantize one source by the plan's method: gptq's bytes prepared by the
 * calibration, or rtn/search with the calibration's importance. A source
 * the calibration did not see (an untied embedding table: no matrix
 * input) is quantized by search with every column weighted alike. */
static int quantize_source(const struct nib_plan *p, const struct llama_weight *w, uint32_t cols,
                           struct nib_qspec want, uint8_t *buf, char *why, size_t whylen)
{
    const uint8_t *ready = w->cols == cols ? nib_calib_packed(p->calib, w, want) : NULL;
    if (ready) {
        memcpy(buf, ready, nib_qformat_size(want.dtype, want.group, w->rows, cols));
        return 0;
    }
    const float *imp = w->cols == cols ? nib_calib_importance(p->calib, w) : NULL;
    enum nib_qmethod m = p->method == NIB_QM_RTN ? NIB_QM_RTN : NIB_QM_SEARCH;
    const uint32_t nt = p->calib && p->calib->threads ? p->calib->threads : 1;
    return nib_quantize_mt(want, m, imp, w->rows, cols, weight_row, (void *)w, buf, nt, why,
                           whylen);
}

/* One source of a quantized tensor, packed on its own into buf (size
 * bytes). A quantized source whose values the tensor's format holds is
 * repacked exactly (tools/compiler/repack.h: every weight equal); anything
 * else is quantized from its f32 rows, and with --quant source (where
 * every tensor should keep its values) named on stderr. */
static int pack_source(const struct nib_plan *p, const struct plan_tensor *t,
                       const struct llama_weight *w, int source, uint8_t *buf, char *err,
                       size_t errlen)
{
    const struct nib_tensor_rec *rec = &t->rec;
    struct nib_qspec want = {rec->dtype, rec->group}, have;
    char why[256], fmt[32], name[72];
    int rc = -1;
    if (nib_repack_spec(w->t->type, &have) == 0) {
        /* Only a format that holds every value of the type can take an
         * exact repack; for any other the attempt would fail part-way. */
        if (nib_repack_holds(w->t->type, want))
            rc = nib_repack_into(w, want, buf, why, sizeof why);
        else
            snprintf(why, sizeof why, "%s does not hold every %s value",
                     nib_qspec_str(want, fmt, sizeof fmt), ggml_type_name(w->t->type));
        if (rc && source)
            fprintf(stderr,
                    "nib compile: --quant source: '%s' (%s, %s) has no exact form in %s: "
                    "requantized (%s)\n",
                    rec->name, gguf_str_show(w->t->name, name), ggml_type_name(w->t->type),
                    nib_qspec_str(want, fmt, sizeof fmt), why);
    }
    if (rc)
        rc = quantize_source(p, w, rec->cols, want, buf, why, sizeof why);
    if (rc)
        snprintf(err, errlen, "packing '%s': %s", rec->name, why);
    return rc;
}

/* A quantized tensor. Each source is quantized in its own stored layout
 * and turned into whole N-blocks, placed at its first row in the plan
 * (row_off: an N-block, or a whole head where the fused QKV normalizes
 * heads; rows between sources are zero, scale 0) or, as tile pairs
 * (gate|up), in N-blocks alternating with the other source's. The
 * composed tensor is written in the stored layout, the scale groups of
 * each N-block pair interleaved (kernels/qformat.h). Every step is in
 * place, so a large tensor (an LM head) is in memory once. */
static int write_quantized(struct sink *s, const struct nib_plan *p, const struct plan_tensor *t,
                           int source, char *err, size_t errlen)
{
    const struct nib_tensor_rec *rec = &t->rec;
    struct nib_qlayout tl, sl;
    uint8_t *src = NULL, *tensor = NULL, *scratch = NULL;
    int rc = nib_qlayout_get(&tl, rec->dtype, rec->group, rec->rows, rec->cols);
    if (rc == 0) {
        src = t->tile_pairs ? malloc(tl.size / 2) : NULL; /* one source's blocks, to deal out */
        tensor = calloc(1, tl.size);
        scratch = malloc(2 * tl.nblock_bytes);
        if ((t->tile_pairs && !src) || !tensor || !scratch) {
            snprintf(err, errlen, "out of memory packing '%s'", rec->name);
            rc = -1;
        }
    } else {
        snprintf(err, errlen, "packing '%s': no layout for its format and shape", rec->name);
    }
    for (uint32_t k = 0; k < t->n_src && rc == 0; k++) {
        const uint64_t at = (uint64_t)t->row_off[k] / NIB_Q_TILE_N * tl.nblock_bytes;
        if (nib_qlayout_get(&sl, rec->dtype, rec->group, t->src[k]->rows, rec->cols) ||
            (t->tile_pairs ? t->n_src != 2 || 2 * sl.size != tl.size
                           : t->row_off[k] % NIB_Q_TILE_N || at + sl.size > tl.size)) {
            snprintf(err, errlen, "packing '%s': source %u does not fit its place", rec->name, k);
            rc = -1;
            break;
        }
        uint8_t *dst = t->tile_pairs ? src : tensor + at;
        rc = pack_source(p, t, t->src[k], source, dst, err, errlen);
        if (rc)
            break;
        nib_ql_unpair_blocks(&sl, dst, scratch); /* the source's whole blocks */
        if (!t->tile_pairs)
            continue;
        for (uint64_t off = 0; off < sl.size; off += sl.nblock_bytes)
            memcpy(tensor + 2 * off + k * sl.nblock_bytes, src + off, sl.nblock_bytes);
    }
    if (rc == 0) {
        nib_ql_pair_blocks(&tl, tensor, scratch);
        put(s, tensor, tl.size);
    }
    free(src);
    free(tensor);
    free(scratch);
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
static int write_tensor(struct sink *s, const struct plan_tensor *t, const struct nib_plan *p,
                        const float *freq_factors, float *row, char *err, size_t errlen)
{
    if (t->kind == PT_ROPE_TABLE) {
        /* Same arithmetic as the reference implementations: float powf/cosf;
         * Llama 3's frequency factors divide each pair's frequency. */
        for (uint32_t pos = 0; pos < t->rec.rows; pos++) {
            for (uint32_t i = 0; i < t->rec.cols; i += 2) {
                float freq = 1.0f / powf(p->h.hp.rope_theta, (float)i / (float)p->h.hp.rope_dim);
                if (freq_factors)
                    freq = freq / freq_factors[i / 2];
                float val = (float)pos * freq;
                row[i] = cosf(val);
                row[i + 1] = sinf(val);
            }
            put(s, row, t->rec.cols * 4ull);
        }
        return 0;
    }
    if (t->kind == PT_ROW_CAT) {
        /* each source's elements at its row offset, zeros between */
        memset(row, 0, t->rec.cols * 4ull);
        for (uint32_t k = 0; k < t->n_src; k++)
            if (t->src[k] && (t->row_off[k] + (uint64_t)t->src[k]->cols > t->rec.cols ||
                              llama_weight_row_f32(t->src[k], 0, row + t->row_off[k]))) {
                snprintf(err, errlen, "cannot convert the parts of tensor '%s' to f32",
                         t->rec.name);
                return -1;
            }
        put(s, row, t->rec.cols * 4ull);
        return 0;
    }
    if (t->rec.dtype != NIB_DT_F32)
        return write_quantized(s, p, t, p->source, err, errlen);
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
    /* the tokenizer section, with the model's chat template compiled into it */
    uint8_t *chat = NULL, *tok = NULL;
    size_t chat_len = 0, tok_len = 0;
    char why[512];
    const char *tmpl = m->tok.chat_template;
    if (tmpl && nib_chat_compile(tmpl, strlen(tmpl), &chat, &chat_len, why, sizeof why)) {
        snprintf(err, errlen,
                 "the model's chat template cannot be compiled: %s (nib compile "
                 "--chat-template FAMILY uses a built-in one, --no-chat-template none)",
                 why);
        return -1;
    }
    int trc = tok_pack(&m->tok, chat, chat_len, &tok, &tok_len, why, sizeof why);
    free(chat);
    if (trc) {
        snprintf(err, errlen, "tokenizer: %s", why);
        return -1;
    }
    /* Layout: everything is known before the first byte goes out, so the
     * header (which the checksum covers) can be written first. */
    struct nib_blob_header h = p->h;
    memcpy(h.magic, NIB_BLOB_MAGIC, 8);
    h.version = NIB_BLOB_VERSION;
    /* the tokenizer's specials are the model's */
    if (m->tok.bos_id >= 0)
        h.hp.bos_id = (uint32_t)m->tok.bos_id;
    if (m->tok.eos_id >= 0)
        h.hp.eos_id = (uint32_t)m->tok.eos_id;
    h.hp.add_bos = m->tok.add_bos ? 1 : 0;
    h.header_size = sizeof h;
    h.isa_required = NIB_ISA_SCALAR;
    h.n_tensors = p->n_tensors;
    h.n_ops = p->n_ops;
    h.tensors.offset = align_up(sizeof h, NIB_SECTION_ALIGN);
    h.tensors.size = (uint64_t)p->n_tensors * sizeof(struct nib_tensor_rec);
    h.plan.offset = align_up(h.tensors.offset + h.tensors.size, NIB_SECTION_ALIGN);
    h.plan.size = (uint64_t)p->n_ops * sizeof(struct nib_op);
    h.tokenizer.offset = align_up(h.plan.offset + h.plan.size, NIB_SECTION_ALIGN);
    h.tokenizer.size = tok_len;
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
        free(tok);
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
    put(&s, tok, tok_len);
    pad_to(&s, h.weights.offset);
    for (uint32_t i = 0; i < p->n_tensors && rc == 0 && !s.failed; i++) {
        pad_to(&s, h.weights.offset + p->tensors[i].rec.offset);
        rc = write_tensor(&s, &p->tensors[i], p, m->rope_freq_factors, row, err, errlen);
    }
    pad_to(&s, h.blob_size);
    free(row);
    free(tok);
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
