/* The architecture features of blob format 5, end to end: a small model is
 * built here by hand (a struct llama_model over f32 tensors made in the
 * test, the fixture's tokenizer), compiled with the real planner and
 * packer, validated and run. For each feature (Q/K/V bias, per-head Q/K
 * RMSNorm with a head size other than dim / heads, GELU, post-norms,
 * embedding scale, sliding window, attention and final soft-capping, the
 * attention scale, RoPE frequency factors, and all of gemma2's at once):
 *   - f32 logits equal a float64 forward pass written here within f32
 *     rounding, and differ from the same pass without the feature (so the
 *     test can fail);
 *   - logits and KV cache are bitwise equal with 1, 2 and 3 workers,
 *     scalar and the CPU's best kernels, prefill passes and token-by-token
 *     decode, in f32 and in q4;
 * and quantized embedding rows equal nib_dequantize_row times the scale;
 * a tied head shares the embedding table when their formats agree. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/qkernels.h"
#include "model_blob/blob_view.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/team.h"
#include "tools/compiler/plan.h"
#include "tests/common/gguf_fixture.h"
#include "tests/common/test_util.h"
#include "tests/rt/arch_model.h"
#include "tests/rt/rt_fixture.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/llama_import.h"
#include "tools/compiler/model_load.h"
#include "tools/compiler/plan.h"
#include "tools/compiler/quant.h"

/* ---- the model (tests/rt/arch_model.c) ---------------------------------------- */

#define DIM AM_DIM
#define N_HEADS AM_HEADS
#define N_KV AM_KV
#define FFN AM_FFN
#define N_LAYERS AM_LAYERS
#define CTX AM_CTX
#define N_TOK 28 /* positions run */

static const struct am_cfg cfgs[] = {
    {.what = "llama"},
    {.what = "qkv bias (qwen2)", .bias = 1},
    {.what = "per-head Q/K norm, head 24 (qwen3)", .head_dim = 24, .qk_norm = 1},
    {.what = "gelu-gated FFN", .gelu = 1},
    {.what = "post-attention and post-FFN norms", .post_norms = 1},
    {.what = "embedding scale", .embed_scale = 5.656854f},
    {.what = "sliding window 4", .window = 4},
    {.what = "attention soft-cap", .attn_softcap = 0.5f},
    {.what = "final soft-cap", .final_softcap = 1.5f},
    {.what = "attention scale", .attn_scale = 0.9f},
    {.what = "rope frequency factors", .freq_factors = 1},
    {.what = "gemma2 (all of it, tied, head 16)",
     .head_dim = 16,
     .post_norms = 1,
     .gelu = 1,
     .tied = 1,
     .window = 4,
     .embed_scale = 5.656854f,
     .attn_scale = 0.3f,
     .attn_softcap = 0.5f,
     .final_softcap = 1.5f},
};
#define N_CFGS (sizeof cfgs / sizeof cfgs[0])

static uint32_t token_at(uint32_t pos, uint32_t vocab)
{
    return (pos * 2654435761u + 11u) % vocab;
}

/* ---- float64 reference ------------------------------------------------------ */

struct ref_opts {
    int no_bias, no_qk_norm, no_post, silu, no_scale, no_window, no_attn_cap, no_final_cap,
        default_attn_scale, no_factors;
};

static double *rows64(const struct llama_weight *w)
{
    double *o = malloc((size_t)w->rows * w->cols * sizeof *o);
    float *r = malloc(w->cols * 4ull);
    for (uint32_t i = 0; i < w->rows; i++) {
        ck_assert_int_eq(llama_weight_row_f32(w, i, r), 0);
        for (uint32_t k = 0; k < w->cols; k++)
            o[(size_t)i * w->cols + k] = r[k];
    }
    free(r);
    return o;
}

static void rmsnorm64(const double *x, const double *w, double *out, uint32_t n, double eps)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; i++)
        out[i] = w[i] * (x[i] * r);
}

static void matvec64(const struct llama_weight *w, const double *x, double *y)
{
    double *W = rows64(w);
    for (uint32_t r = 0; r < w->rows; r++) {
        double s = 0;
        for (uint32_t k = 0; k < w->cols; k++)
            s += W[(size_t)r * w->cols + k] * x[k];
        y[r] = s;
    }
    free(W);
}

static void vec64(const struct llama_weight *w, double *out)
{
    double *v = rows64(w);
    memcpy(out, v, w->cols * sizeof *out);
    free(v);
}

/* Logits of every position 0..N_TOK-1, fed token by token. */
static double *reference(const struct llama_model *m, const struct ref_opts *o)
{
    const struct nib_hparams *hp = &m->hp;
    const uint32_t hd = hp->head_dim, qd = hp->n_heads * hd, kvd = hp->n_kv_heads * hd;
    const uint32_t vocab = hp->vocab_size, grp = hp->n_heads / hp->n_kv_heads;
    double *logits = malloc((size_t)N_TOK * vocab * sizeof *logits);
    const uint32_t dim = hp->dim, ffn = hp->ffn_dim, n_layers = hp->n_layers;
    double *kc = calloc((size_t)n_layers * CTX * kvd, sizeof *kc);
    double *vc = calloc((size_t)n_layers * CTX * kvd, sizeof *vc);
    double x[256], xn[256], w[256], q[256], k[256], v[256], att[256], t[256], g[256], u[256],
        hvec[256], sc[CTX], bias[256], nw[256];
    ck_assert(dim <= 256 && ffn <= 256 && qd <= 256 && kvd <= 256);
    double *E = rows64(&m->tok_embd);
    for (uint32_t pos = 0; pos < N_TOK; pos++) {
        uint32_t tok = token_at(pos, vocab);
        double es = o->no_scale || m->embed_scale == 0 ? 1.0 : (double)m->embed_scale;
        for (uint32_t i = 0; i < dim; i++)
            x[i] = E[(size_t)tok * dim + i] * es;
        for (uint32_t l = 0; l < n_layers; l++) {
            const struct llama_layer *L = &m->layers[l];
            vec64(&L->attn_norm, w);
            rmsnorm64(x, w, xn, dim, hp->norm_eps);
            matvec64(&L->wq, xn, q);
            matvec64(&L->wk, xn, k);
            matvec64(&L->wv, xn, v);
            if (L->bq.t && !o->no_bias) {
                vec64(&L->bq, bias);
                for (uint32_t i = 0; i < qd; i++)
                    q[i] += bias[i];
                vec64(&L->bk, bias);
                for (uint32_t i = 0; i < kvd; i++)
                    k[i] += bias[i];
                vec64(&L->bv, bias);
                for (uint32_t i = 0; i < kvd; i++)
                    v[i] += bias[i];
            }
            if (L->q_norm.t && !o->no_qk_norm) {
                vec64(&L->q_norm, nw);
                for (uint32_t h = 0; h < hp->n_heads; h++)
                    rmsnorm64(q + h * hd, nw, q + h * hd, hd, hp->norm_eps);
                vec64(&L->k_norm, nw);
                for (uint32_t h = 0; h < hp->n_kv_heads; h++)
                    rmsnorm64(k + h * hd, nw, k + h * hd, hd, hp->norm_eps);
            }
            /* RoPE: adjacent pairs of each head's first rope_dim dims */
            for (uint32_t j = 0; j < hp->rope_dim; j += 2) {
                double f = pow((double)hp->rope_theta, -(double)j / hp->rope_dim);
                if (m->rope_freq_factors && !o->no_factors)
                    f /= m->rope_freq_factors[j / 2];
                double c = cos(pos * f), s = sin(pos * f);
                for (uint32_t h = 0; h < hp->n_heads + hp->n_kv_heads; h++) {
                    double *p = h < hp->n_heads ? q + h * hd + j : k + (h - hp->n_heads) * hd + j;
                    double a = p[0], b2 = p[1];
                    p[0] = a * c - b2 * s;
                    p[1] = a * s + b2 * c;
                }
            }
            memcpy(kc + ((size_t)l * CTX + pos) * kvd, k, kvd * sizeof *k);
            memcpy(vc + ((size_t)l * CTX + pos) * kvd, v, kvd * sizeof *v);
            double scale = o->default_attn_scale || m->attn_scale == 0 ? 1.0 / sqrt((double)hd)
                                                                       : (double)m->attn_scale;
            uint32_t win = o->no_window ? 0 : L->window;
            uint32_t t0 = win && pos + 1 > win ? pos + 1 - win : 0;
            for (uint32_t h = 0; h < hp->n_heads; h++) {
                const uint32_t kh = h / grp;
                double mx = -INFINITY, sum = 0;
                for (uint32_t p = t0; p <= pos; p++) {
                    const double *kr = kc + ((size_t)l * CTX + p) * kvd + kh * hd;
                    double s = 0;
                    for (uint32_t i = 0; i < hd; i++)
                        s += q[h * hd + i] * kr[i];
                    s *= scale;
                    if (m->attn_softcap > 0 && !o->no_attn_cap)
                        s = m->attn_softcap * tanh(s / m->attn_softcap);
                    sc[p] = s;
                    if (s > mx)
                        mx = s;
                }
                for (uint32_t p = t0; p <= pos; p++)
                    sum += (sc[p] = exp(sc[p] - mx));
                for (uint32_t i = 0; i < hd; i++) {
                    double a = 0;
                    for (uint32_t p = t0; p <= pos; p++)
                        a += sc[p] / sum * vc[((size_t)l * CTX + p) * kvd + kh * hd + i];
                    att[h * hd + i] = a;
                }
            }
            matvec64(&L->wo, att, t);
            if (L->post_attn_norm.t && !o->no_post) {
                vec64(&L->post_attn_norm, w);
                rmsnorm64(t, w, t, dim, hp->norm_eps);
            }
            for (uint32_t i = 0; i < dim; i++)
                x[i] += t[i];
            vec64(&L->ffn_norm, w);
            rmsnorm64(x, w, xn, dim, hp->norm_eps);
            matvec64(&L->w_gate, xn, g);
            matvec64(&L->w_up, xn, u);
            for (uint32_t i = 0; i < ffn; i++) {
                double a = g[i];
                double act = m->ffn_act == LLAMA_ACT_GELU_TANH && !o->silu
                                 ? 0.5 * a * (1 + tanh(sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)))
                                 : a / (1 + exp(-a));
                hvec[i] = act * u[i];
            }
            matvec64(&L->w_down, hvec, t);
            if (L->post_ffn_norm.t && !o->no_post) {
                vec64(&L->post_ffn_norm, w);
                rmsnorm64(t, w, t, dim, hp->norm_eps);
            }
            for (uint32_t i = 0; i < dim; i++)
                x[i] += t[i];
        }
        vec64(&m->output_norm, w);
        rmsnorm64(x, w, xn, dim, hp->norm_eps);
        double *out = logits + (size_t)pos * vocab;
        matvec64(m->output_tied ? &m->tok_embd : &m->output, xn, out);
        for (uint32_t i = 0; i < vocab && m->final_softcap > 0 && !o->no_final_cap; i++)
            out[i] = m->final_softcap * tanh(out[i] / m->final_softcap);
    }
    free(E);
    free(kc);
    free(vc);
    return logits;
}

/* ---- running blobs ---------------------------------------------------------- */

struct run {
    float *logits; /* N_TOK x vocab: after each position (prefill: the passes' last rows) */
    uint8_t *kv;
};

/* Token by token, or in passes of the sizes listed (cycled), on `workers`
 * workers (1: no team) with kernels qk. Logits of positions that end no
 * pass stay NaN. */
static struct run run_blob(const struct nib_blob_view *v, const struct nib_qkernels *qk,
                           uint32_t workers, const uint32_t *passes, int n_passes)
{
    const uint32_t vocab = v->h->hp.vocab_size;
    struct run r = {malloc((size_t)N_TOK * vocab * 4), malloc(v->h->kv_size)};
    for (size_t i = 0; i < (size_t)N_TOK * vocab; i++)
        r.logits[i] = NAN;
    uint8_t *arena = tu_new_arena(v);
    struct nib_exec e = {.v = v, .mem = arena, .qk = qk};
    struct rtf_team f;
    if (workers > 1)
        rtf_team_start(&f, &e, workers, 50000000, 200000);
    uint32_t ids[N_TOK];
    for (uint32_t p = 0; p < N_TOK; p++)
        ids[p] = token_at(p, vocab);
    for (uint32_t pos = 0, i = 0; pos < N_TOK; i++) {
        uint32_t m = n_passes ? passes[i % n_passes] : 1;
        if (m > v->h->max_batch)
            m = v->h->max_batch;
        if (m > N_TOK - pos)
            m = N_TOK - pos;
        const float *l = nib_exec_tokens(&e, ids + pos, m, pos);
        ck_assert_ptr_nonnull(l);
        pos += m;
        memcpy(r.logits + (size_t)(pos - 1) * vocab, l, vocab * 4ull);
    }
    memcpy(r.kv, arena + v->h->act_size, v->h->kv_size);
    if (workers > 1)
        rtf_team_stop(&f);
    free(arena);
    return r;
}

static void run_free(struct run *r)
{
    free(r->logits);
    free(r->kv);
}

/* b equals a bitwise at every position b computed, and the KV caches. */
static void same_bits(const struct nib_blob_view *v, const struct run *a, const struct run *b,
                      const char *what, const char *how)
{
    const uint32_t vocab = v->h->hp.vocab_size;
    for (uint32_t p = 0; p < N_TOK; p++) {
        const float *lb = b->logits + (size_t)p * vocab;
        if (isnan(lb[0]) && isnan(lb[1]))
            continue;
        ck_assert_msg(memcmp(a->logits + (size_t)p * vocab, lb, vocab * 4ull) == 0,
                      "%s, %s: logits at position %u differ", what, how, p);
    }
    ck_assert_msg(memcmp(a->kv, b->kv, v->h->kv_size) == 0, "%s, %s: KV cache differs", what, how);
}

/* Bitwise: scalar one worker token by token is the reference; the CPU's
 * kernels, 2 and 3 workers, prefill in full and ragged passes. */
static void bitwise_everywhere(const struct nib_blob_view *v, const char *what)
{
    const struct nib_qkernels *sc = nib_qkernels_get(NIB_ISA_SCALAR),
                              *best = nib_exec_kernels(nib_cpu_isa());
    static const uint32_t full[] = {8}, ragged[] = {5, 8, 1, 3, 2, 7};
    struct run ref = run_blob(v, sc, 1, NULL, 0);
    struct {
        const char *how;
        const struct nib_qkernels *qk;
        uint32_t workers;
        const uint32_t *passes;
        int n;
    } runs[] = {
        {"best kernels, 1 worker", best, 1, NULL, 0},
        {"best kernels, 2 workers", best, 2, NULL, 0},
        {"scalar, 3 workers", sc, 3, NULL, 0},
        {"prefill 8, 1 worker", best, 1, full, 1},
        {"prefill ragged, 2 workers", best, 2, ragged, 6},
        {"prefill 8, 3 workers, scalar", sc, 3, full, 1},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        struct run r = run_blob(v, runs[i].qk, runs[i].workers, runs[i].passes, runs[i].n);
        same_bits(v, &ref, &r, what, runs[i].how);
        run_free(&r);
    }
    run_free(&ref);
}

/* Barriers: between two barriers no two workers' shares of two ops touch
 * the same bytes with a write (brute force over every pair of ops; within
 * one op the listed spans of several rows overlap by construction). */
static void barriers_cover(const struct nib_blob_view *v, const char *what)
{
    for (uint32_t n = 2; n <= 3; n++) {
        uint8_t *bar = malloc(v->h->n_ops);
        nib_exec_plan_barriers(v, n, bar);
        uint32_t start = 0;
        for (uint32_t j = 0; j < v->h->n_ops; j++) {
            if (bar[j])
                start = j;
            for (uint32_t i = start; i < j; i++)
                for (uint32_t wi = 0; wi < n; wi++)
                    for (uint32_t wj = 0; wj < n; wj++) {
                        if (wi == wj)
                            continue;
                        struct nib_access a[NIB_ACCESS_MAX], b[NIB_ACCESS_MAX];
                        int na = nib_exec_access(v, &v->ops[i], wi, n, a);
                        int nb = nib_exec_access(v, &v->ops[j], wj, n, b);
                        for (int x = 0; x < na; x++)
                            for (int y = 0; y < nb; y++)
                                ck_assert_msg(!((a[x].write || b[y].write) &&
                                                a[x].begin < b[y].end && b[y].begin < a[x].end),
                                              "%s, %u workers: ops %u and %u share bytes without a "
                                              "barrier",
                                              what, n, i, j);
                    }
        }
        free(bar);
    }
}

/* max |a - b| over every position's logits. */
static double max_diff(const float *a, const double *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= d)) /* NaN wins */
            d = e;
    }
    return d;
}

static double max_diff64(const double *a, const double *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs(a[i] - b[i]));
    return d;
}

/* ---- tests ------------------------------------------------------------------- */

START_TEST(f32_equals_float64)
{
    const struct am_cfg *c = &cfgs[_i];
    struct am_model b;
    am_build(&b, c);
    struct nib_blob_view v;
    uint8_t *blob = am_compile(&b.m, "f32", &v);
    const uint32_t vocab = v.h->hp.vocab_size;
    struct run r = run_blob(&v, nib_qkernels_get(NIB_ISA_SCALAR), 1, NULL, 0);
    struct ref_opts all = {0};
    double *ref = reference(&b.m, &all);
    const size_t n = (size_t)N_TOK * vocab;
    double amax = 0;
    for (size_t i = 0; i < n; i++)
        amax = fmax(amax, fabs(ref[i]));
    const double tol = 2e-5 * (1 + amax);
    double d = max_diff(r.logits, ref, n);
    ck_assert_msg(d <= tol, "%s: f32 logits differ from float64 by %g (tolerance %g)", c->what, d,
                  tol);
    /* Without the feature the reference moves far more than the tolerance:
     * a runtime that ignored it would fail above. */
    struct ref_opts off[] = {
        {.no_bias = 1},     {.no_qk_norm = 1},   {.silu = 1},
        {.no_post = 1},     {.no_scale = 1},     {.no_window = 1},
        {.no_attn_cap = 1}, {.no_final_cap = 1}, {.default_attn_scale = 1},
        {.no_factors = 1},
    };
    const int on[] = {c->bias,
                      c->qk_norm,
                      c->gelu,
                      c->post_norms,
                      c->embed_scale != 0,
                      c->window != 0,
                      c->attn_softcap != 0,
                      c->final_softcap != 0,
                      c->attn_scale != 0,
                      c->freq_factors};
    for (size_t k = 0; k < sizeof off / sizeof off[0]; k++) {
        if (!on[k])
            continue;
        double *alt = reference(&b.m, &off[k]);
        double moved = max_diff64(ref, alt, n);
        ck_assert_msg(moved > 100 * tol, "%s: feature %zu changes the logits by only %g", c->what,
                      k, moved);
        free(alt);
    }
    free(ref);
    run_free(&r);
    free(blob);
    am_free(&b);
}
END_TEST

START_TEST(bitwise_f32)
{
    struct am_model b;
    am_build(&b, &cfgs[_i]);
    struct nib_blob_view v;
    uint8_t *blob = am_compile(&b.m, "f32", &v);
    bitwise_everywhere(&v, cfgs[_i].what);
    barriers_cover(&v, cfgs[_i].what);
    free(blob);
    am_free(&b);
}
END_TEST

START_TEST(bitwise_q4)
{
    struct am_model b;
    am_build(&b, &cfgs[_i]);
    struct nib_blob_view v;
    uint8_t *blob = am_compile(&b.m, "q4", &v);
    bitwise_everywhere(&v, cfgs[_i].what);
    barriers_cover(&v, cfgs[_i].what);
    free(blob);
    am_free(&b);
}
END_TEST

/* The EMBED op alone: each row of a quantized table equals the packer's
 * dequantization times the scale, for every format nibble packs. */
START_TEST(quantized_embedding_rows)
{
    static const char *const quants[] = {"q4",     "q4a/64", "q4c",    "q8c",   "q8c/32",
                                         "q4f/16", "q4f/32", "q8f/16", "q8f/32"};
    struct am_model b;
    am_build(&b, &cfgs[5]); /* with an embedding scale */
    ck_assert(b.m.embed_scale != 1.0f);
    for (size_t qi = 0; qi < sizeof quants / sizeof quants[0]; qi++) {
        struct nib_blob_view v;
        uint8_t *blob = am_compile(&b.m, quants[qi], &v);
        const struct nib_op *emb = &v.ops[0];
        ck_assert_uint_eq(emb->code, NIB_OP_EMBED);
        ck_assert_float_eq(emb->embed.scale, b.m.embed_scale);
        const struct nib_tensor_rec *t = &v.tensors[emb->tensor];
        ck_assert_msg(t->dtype != NIB_DT_F32, "%s: the embedding table stayed f32", quants[qi]);
        struct nib_qlayout l;
        ck_assert_int_eq(nib_qlayout_get(&l, t->dtype, t->group, t->rows, t->cols), 0);
        uint8_t *arena = tu_new_arena(&v);
        const uint32_t M = v.h->max_batch;
        float want[DIM];
        for (uint32_t tok0 = 0; tok0 < v.h->hp.vocab_size; tok0 += M) {
            uint32_t *slot = (uint32_t *)(void *)(arena + v.h->token_slot_off);
            for (uint32_t i = 0; i < M; i++)
                slot[i] = (tok0 + i) % v.h->hp.vocab_size;
            for (uint32_t w = 0; w < 3; w++) /* a share each, as a team of 3 runs it */
                nib_exec_op(nib_qkernels_get(NIB_ISA_SCALAR), &v, arena, arena + v.h->wscratch_off,
                            emb, M, 0, w, 3);
            for (uint32_t i = 0; i < M; i++) {
                nib_dequantize_row(&l, v.weights + t->offset, slot[i], want);
                const float *got =
                    (const float *)(const void *)(arena + emb->dst + (uint64_t)i * emb->dst_stride);
                for (uint32_t k = 0; k < DIM; k++)
                    ck_assert_msg(got[k] == want[k] * b.m.embed_scale,
                                  "%s: token %u element %u: %g, want %g", quants[qi], slot[i], k,
                                  (double)got[k], (double)(want[k] * b.m.embed_scale));
            }
        }
        free(arena);
        free(blob);
    }
    am_free(&b);
}
END_TEST

/* A tied embedding table is the LM head too: one copy, in the head's
 * format (q8c in the default q4); an untied head is a tensor of its own. */
START_TEST(tied_head_shares_the_table)
{
    static const struct {
        const char *quant;
        uint32_t dtype;
    } cases[] = {
        {"f32", NIB_DT_F32}, {"q8c", NIB_DT_Q8C}, {"q4/32", NIB_DT_Q4}, {"q4", NIB_DT_Q8C}};
    for (int tied = 0; tied < 2; tied++) {
        struct am_model b;
        am_build(&b, &cfgs[tied ? 11 : 0]);
        ck_assert_int_eq(b.m.output_tied, tied);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            struct nib_blob_view v;
            uint8_t *blob = am_compile(&b.m, cases[i].quant, &v);
            const struct nib_op *head = &v.ops[v.h->n_ops - 1];
            ck_assert(head->flags & NIB_EPI_ARGMAX);
            ck_assert_msg((head->tensor == v.ops[0].tensor) == tied,
                          "%s: head tensor %u, embedding %u", cases[i].quant, head->tensor,
                          v.ops[0].tensor);
            ck_assert_uint_eq(v.tensors[head->tensor].dtype, cases[i].dtype);
            free(blob);
        }
        am_free(&b);
    }
}
END_TEST

/* The default q4's head rule (tools/compiler/plan.h): the head's q8c
 * cost in bits per matrix weight, from real models' shapes (sizes only,
 * no weights): tinyllama-1.1b and stories260K keep an int8 head,
 * TinyStories-656K's tied table (40 % of its weights) does not. */
static double head_bits(uint32_t n_layers, uint32_t dim, uint32_t kv, uint32_t ffn, uint32_t vocab,
                        int tied)
{
    static struct llama_layer ly[32];
    struct llama_model m;
    memset(&m, 0, sizeof m);
    memset(ly, 0, sizeof ly);
    m.hp.n_layers = n_layers;
    m.layers = ly;
    m.output_tied = tied;
    for (uint32_t l = 0; l < n_layers; l++) {
        ly[l].wq = ly[l].wo = (struct llama_weight){.rows = dim, .cols = dim};
        ly[l].wk = ly[l].wv = (struct llama_weight){.rows = kv, .cols = dim};
        ly[l].w_gate = ly[l].w_up = (struct llama_weight){.rows = ffn, .cols = dim};
        ly[l].w_down = (struct llama_weight){.rows = dim, .cols = ffn};
    }
    *(tied ? &m.tok_embd : &m.output) = (struct llama_weight){.rows = vocab, .cols = dim};
    return nib_plan_head_q8c_bits(&m);
}

START_TEST(default_head_rule)
{
    const double tl = head_bits(22, 2048, 256, 5632, 32000, 0);
    const double s260 = head_bits(5, 64, 32, 172, 512, 0);
    const double s656 = head_bits(2, 128, 64, 384, 2048, 1);
    ck_assert_msg(tl > 0.2 && tl < 0.25, "tinyllama %g", tl); /* 6.3 % x 3.7 */
    ck_assert_msg(s260 > 0.45 && s260 < NIB_HEAD_Q8C_MAX_BITS, "stories260K %g", s260);
    ck_assert_msg(s656 > 1.45 && s656 < 1.5, "656K %g", s656); /* 40 % */
    /* a tied table counts once, as the head */
    ck_assert(head_bits(2, 128, 64, 384, 2048, 0) == s656);
}
END_TEST

/* q4h's super-block: the fewest bytes a row of K inputs packs into,
 * padding included. Worked by hand (bytes per 8 rows: a super-block of G
 * is 4G + 16 + 6 (G / 16)): llama-3b's ffn_down (8640) is 68 x 576 at 128
 * against 135 x 296 at 64; 172 pads to 192 at 64 (3 x 296) and at 32
 * (6 x 156); 288 and 96 fill 32 exactly. */
START_TEST(q4h_group_fewest_bytes)
{
    static const uint32_t cases[][2] = {{8640, 128}, {5632, 128}, {2048, 128}, {3200, 128},
                                        {64, 64},    {172, 64},   {320, 64},   {288, 32},
                                        {96, 32},    {32, 32}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(nib_plan_q4h_group(128, cases[i][0]) == cases[i][1], "K %u: group %u, not %u",
                      cases[i][0], nib_plan_q4h_group(128, cases[i][0]), cases[i][1]);
    ck_assert_uint_eq(nib_plan_q4h_group(64, 8640), 64); /* never above the group asked for */
    ck_assert_uint_eq(nib_plan_q4h_group(32, 8640), 32);
    for (uint32_t k = 16; k <= 20000; k += 16) {
        const uint32_t g = nib_plan_q4h_group(128, k);
        const uint64_t size = nib_qformat_size(NIB_DT_Q4H, g, 8, k);
        for (uint32_t o = 32; o <= 128; o *= 2) {
            const uint64_t other = nib_qformat_size(NIB_DT_Q4H, o, 8, k);
            ck_assert_msg(size < other || (size == other && g >= o),
                          "K %u: %u (%llu B) against %u (%llu B)", k, g, (unsigned long long)size,
                          o, (unsigned long long)other);
        }
    }
}
END_TEST

/* The test fixture's GGUF of each architecture through the real importer
 * (views of fused sources, rotate-half reorders, per-arch keys), planner
 * and packer: f32 logits equal the float64 pass over the same model
 * description, and every run is bitwise equal (f32 and q4). */
static const char *const fx_archs[] = {"llama", "qwen2", "qwen3", "phi3", "gemma2"};

/* Layer 0's fused QKV of a quantized blob q holds, at the rows its op
 * names (Q, K and V each where rope_kv says: a part can start past the
 * previous part's end, on a whole head), the f32 blob f's rows: every
 * row's dequantized weights within a fifth of the row's norm. A part
 * packed at the wrong rows (another part's weights, or zeros) is off by
 * about its whole norm. */
static const struct nib_op *first_qkv(const struct nib_blob_view *v, const char *what)
{
    for (uint32_t i = 0; i < v->h->n_ops; i++)
        if (v->ops[i].code == NIB_OP_MATMUL && (v->ops[i].flags & NIB_EPI_ROPE_KV))
            return &v->ops[i];
    ck_abort_msg("%s: no fused QKV", what);
    return NULL;
}

static void qkv_rows_in_place(const struct nib_blob_view *f, const struct nib_blob_view *q,
                              const char *what)
{
    const struct nib_op *of = first_qkv(f, what), *oq = first_qkv(q, what);
    const struct nib_rope_kv_params *pf = &of->matmul.rope_kv, *pq = &oq->matmul.rope_kv;
    const struct nib_tensor_rec *tf = &f->tensors[of->tensor], *tq = &q->tensors[oq->tensor];
    ck_assert_uint_eq(tf->dtype, NIB_DT_F32);
    ck_assert_uint_eq(pf->q_rows, pq->q_rows);
    ck_assert_uint_eq(pf->kv_rows, pq->kv_rows);
    struct nib_qlayout l;
    ck_assert_int_eq(nib_qlayout_get(&l, tq->dtype, tq->group, tq->rows, tq->cols), 0);
    const float *w32 = (const float *)(const void *)(f->weights + tf->offset);
    float *row = malloc(l.k_pad * sizeof *row);
    const uint32_t first[3][2] = {{0, 0}, {pf->k_off, pq->k_off}, {pf->v_off, pq->v_off}};
    for (int part = 0; part < 3; part++)
        for (uint32_t i = 0; i < (part ? pf->kv_rows : pf->q_rows); i++) {
            const float *want = w32 + (uint64_t)(first[part][0] + i) * tf->cols;
            nib_dequantize_row(&l, q->weights + tq->offset, first[part][1] + i, row);
            double e = 0, n = 0;
            for (uint32_t k = 0; k < tf->cols; k++) {
                e += ((double)row[k] - want[k]) * ((double)row[k] - want[k]);
                n += (double)want[k] * want[k];
            }
            ck_assert_msg(e <= 0.04 * n, "%s: QKV part %d row %u: error %g of norm %g", what, part,
                          i, sqrt(e), sqrt(n));
        }
    free(row);
}

START_TEST(fixture_archs)
{
    const char *arch = fx_archs[_i];
    struct fx_params fp;
    struct fx_file file;
    struct gguf_file g;
    struct llama_model m;
    char err[512];
    fx_arch_params(&fp, arch);
    fx_build_default(&file, &fp);
    ck_assert_msg(gguf_open(&g, file.buf, file.size, err, sizeof err) == 0, "%s: %s", arch, err);
    ck_assert_msg(llama_import(&m, &g, err, sizeof err) == 0, "%s: %s", arch, err);
    ck_assert_str_eq(llama_arch_name(m.arch), arch);
    struct nib_blob_view v;
    uint8_t *blob = am_compile(&m, "f32", &v);
    ck_assert_uint_eq(v.h->hp.arch, m.arch);
    const uint32_t vocab = v.h->hp.vocab_size;
    struct run r = run_blob(&v, nib_qkernels_get(NIB_ISA_SCALAR), 1, NULL, 0);
    struct ref_opts all = {0};
    double *ref = reference(&m, &all);
    double amax = 0;
    for (size_t i = 0; i < (size_t)N_TOK * vocab; i++)
        amax = fmax(amax, fabs(ref[i]));
    double d = max_diff(r.logits, ref, (size_t)N_TOK * vocab), tol = 2e-5 * (1 + amax);
    ck_assert_msg(d <= tol, "%s: f32 logits differ from float64 by %g (tolerance %g)", arch, d,
                  tol);
    bitwise_everywhere(&v, arch);
    barriers_cover(&v, arch);
    free(ref);
    run_free(&r);
    struct nib_blob_view vq;
    uint8_t *blob_q = am_compile(&m, "q4", &vq);
    qkv_rows_in_place(&v, &vq, arch);
    free(blob);
    bitwise_everywhere(&vq, arch);
    barriers_cover(&vq, arch);
    free(blob_q);
    llama_model_free(&m);
    gguf_close(&g);
    fx_file_free(&file);
}
END_TEST

/* --quant source (point 7): a GGUF's quantized embedding table keeps its
 * exact nibble form (Q4_0 -> q4/32, Q4_1 -> q4f/32, Q8_0 -> q8c/32), each
 * row the EMBED op produces equals ggml's dequantization of the source row
 * bit for bit, a tied head reads that one table, and every run is bitwise
 * equal. */
START_TEST(source_embedding_exact)
{
    static const struct {
        uint32_t wtype, dtype, group;
        int tied;
    } cases[] = {{GGML_TYPE_Q4_0, NIB_DT_Q4, 32, 0},
                 {GGML_TYPE_Q4_1, NIB_DT_Q4F, 32, 1},
                 {GGML_TYPE_Q8_0, NIB_DT_Q8C, 32, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct fx_params fp;
        struct fx_file file;
        struct gguf_file g;
        struct llama_model m;
        char err[512];
        fx_quant_params(&fp, cases[c].wtype);
        fp.tied = cases[c].tied;
        fx_build_default(&file, &fp);
        ck_assert_msg(gguf_open(&g, file.buf, file.size, err, sizeof err) == 0, "%s", err);
        ck_assert_msg(llama_import(&m, &g, err, sizeof err) == 0, "%s", err);
        struct nib_blob_view v;
        uint8_t *blob = am_compile(&m, "source", &v);
        const struct nib_op *emb = &v.ops[0], *head = &v.ops[v.h->n_ops - 1];
        const struct nib_tensor_rec *t = &v.tensors[emb->tensor];
        ck_assert_uint_eq(t->dtype, cases[c].dtype);
        ck_assert_uint_eq(t->group, cases[c].group);
        ck_assert_int_eq(head->tensor == emb->tensor, cases[c].tied);
        uint8_t *arena = tu_new_arena(&v);
        uint32_t *slot = (uint32_t *)(void *)(arena + v.h->token_slot_off);
        float want[256];
        ck_assert_uint_le(emb->n, 256);
        for (uint32_t tok = 0; tok < v.h->hp.vocab_size; tok++) {
            slot[0] = tok;
            nib_exec_op(nib_qkernels_get(NIB_ISA_SCALAR), &v, arena, arena + v.h->wscratch_off, emb,
                        1, 0, 0, 1);
            ck_assert_int_eq(llama_weight_row_f32(&m.tok_embd, tok, want), 0);
            ck_assert_msg(memcmp(arena + emb->dst, want, emb->n * 4ull) == 0,
                          "type %u: embedding row %u differs from the source's", cases[c].wtype,
                          tok);
        }
        free(arena);
        bitwise_everywhere(&v, "source");
        free(blob);
        llama_model_free(&m);
        gguf_close(&g);
        fx_file_free(&file);
    }
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("arch");
    TCase *tc = tcase_create("features");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, f32_equals_float64, 0, N_CFGS);
    tcase_add_loop_test(tc, bitwise_f32, 0, N_CFGS);
    tcase_add_loop_test(tc, bitwise_q4, 0, N_CFGS);
    suite_add_tcase(s, tc);
    tc = tcase_create("fixture-archs");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, fixture_archs, 0, sizeof fx_archs / sizeof fx_archs[0]);
    suite_add_tcase(s, tc);
    TU_CASE(s, "formats", NULL, NULL, 300, quantized_embedding_rows, tied_head_shares_the_table,
            default_head_rule, q4h_group_fewest_bytes, source_embedding_exact);
    return s;
}
