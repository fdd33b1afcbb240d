/* The blob validator against corrupt and hostile blobs: every flipped byte is
 * caught (by the checksum), and every structural lie is caught even when the
 * checksum has been recomputed to match. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "model_blob/crc32c.h"
#include "tests/common/blob_lie.h"
#include "tests/common/test_util.h"
#include "tests/common/vision_blob.h"
#include "tests/rt/arch_model.h"

static uint8_t *blob;
static size_t blob_size;
static uint8_t *work; /* mutable copy */
static char err[512];

static void setup(void)
{
    blob = tu_read_file(tu_env_path("NIB_TEST_BLOB"), &blob_size);
    work = aligned_alloc(64, (blob_size + 63) & ~(size_t)63);
    memcpy(work, blob, blob_size);
}

static void teardown(void)
{
    free(blob);
    free(work);
}

static struct nib_blob_header *H(void)
{
    return (struct nib_blob_header *)(void *)work;
}

static void reseal(void)
{
    H()->crc32c = nib_blob_crc(work, blob_size);
}

static int open_work(void)
{
    struct nib_blob_view v;
    return nib_blob_open(&v, work, blob_size, 1, err, sizeof err);
}

/* Mutate, recompute the checksum, expect a refusal naming `what`. */
#define EXPECT_REFUSED(what) BLOB_LIE_REFUSED(blob, work, blob_size, err, what)

START_TEST(valid_blob_opens)
{
    struct nib_blob_view v;
    ck_assert_int_eq(nib_blob_open(&v, blob, blob_size, 1, err, sizeof err), 0);
    ck_assert_uint_gt(v.h->n_ops, 0);
    ck_assert_uint_eq(v.h->weights.offset % NIB_WEIGHT_ALIGN, 0);
    ck_assert_uint_eq(nib_crc32c(0, "123456789", 9), 0xE3069283u); /* CRC32C check value */
    ck_assert_uint_eq(nib_crc32c_scalar(0, blob + 12, blob_size - 12), v.h->crc32c);
}
END_TEST

/* Every byte before the weights, and a spread of bytes through the weights
 * and padding: one flipped bit anywhere refuses. */
START_TEST(every_flipped_byte_refused)
{
    uint64_t tables_end = H()->tokenizer.offset + H()->tokenizer.size;
    uint64_t tested = 0;
    for (uint64_t i = 0; i < blob_size; i += (i < tables_end ? (i < 8192 ? 1 : 3) : 4099)) {
        work[i] ^= (uint8_t)(1u << (i % 8));
        ck_assert_msg(open_work() == -1, "flip at byte %llu accepted", (unsigned long long)i);
        work[i] = blob[i];
        tested++;
    }
    ck_assert_uint_gt(tested, 4000);
}
END_TEST

START_TEST(truncated_refused)
{
    const struct nib_blob_header *h = (const void *)blob;
    uint64_t cuts[] = {0,
                       8,
                       100,
                       sizeof *h,
                       h->tensors.offset + 1,
                       h->plan.offset,
                       h->tokenizer.offset + 5,
                       h->weights.offset,
                       blob_size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        struct nib_blob_view v;
        ck_assert_int_eq(nib_blob_open(&v, blob, cuts[i], 1, err, sizeof err), -1);
    }
}
END_TEST

START_TEST(header_lies_refused)
{
    memcpy(H()->magic, "NIBBLOB2", 8);
    EXPECT_REFUSED("magic");
    H()->version = 99;
    EXPECT_REFUSED("version");
    /* A blob of the previous format (positional op parameters) names both versions. */
    H()->version = NIB_BLOB_VERSION - 1;
    reseal();
    ck_assert_int_eq(open_work(), -1);
    char want[96];
    snprintf(want, sizeof want,
             "blob format version %u is not supported: this build reads version %u",
             NIB_BLOB_VERSION - 1, NIB_BLOB_VERSION);
    ck_assert_msg(strstr(err, want) != NULL, "error '%s' does not say '%s'", err, want);
    memcpy(work, blob, blob_size);
    H()->header_size = 512;
    EXPECT_REFUSED("header size");
    H()->blob_size += 4096;
    EXPECT_REFUSED("truncated");
    H()->hp.n_kv_heads = 3;
    EXPECT_REFUSED("n_kv_heads");
    H()->hp.dim = 0;
    EXPECT_REFUSED("dim");
    H()->hp.vocab_size = 0xFFFFFFFFu;
    EXPECT_REFUSED("vocab_size");
    H()->hp.rope_dim = H()->hp.head_dim + 2;
    EXPECT_REFUSED("rope_dim");
    H()->weights.offset += 64;
    EXPECT_REFUSED("weights");
    H()->tensors.offset = blob_size;
    EXPECT_REFUSED("tensor section");
    H()->plan.size = 0xFFFFFFFFFFFFFFC0ull;
    EXPECT_REFUSED("plan section");
    H()->n_ops += 1;
    EXPECT_REFUSED("plan size");
    H()->act_size = 1ull << 50;
    EXPECT_REFUSED("absurd");
    H()->logits_off = H()->act_size;
    EXPECT_REFUSED("slots outside");
}
END_TEST

static struct nib_tensor_rec *T(uint32_t i)
{
    return (struct nib_tensor_rec *)(void *)(work + H()->tensors.offset) + i;
}

static struct nib_op *OP(uint32_t i)
{
    return (struct nib_op *)(void *)(work + H()->plan.offset) + i;
}

/* First op with this code. */
static uint32_t find_op(uint32_t code)
{
    for (uint32_t i = 0; i < H()->n_ops; i++)
        if (OP(i)->code == code)
            return i;
    ck_abort_msg("no op %u in the plan", code);
    return 0;
}

START_TEST(tensor_lies_refused)
{
    T(0)->offset = H()->weights.size;
    EXPECT_REFUSED("outside the weights section");
    T(1)->offset = (uint64_t)-64;
    EXPECT_REFUSED("outside the weights section");
    T(0)->dtype = 77;
    EXPECT_REFUSED("unknown dtype");
    T(0)->size -= 4;
    EXPECT_REFUSED("expected");
    T(2)->rows = 0;
    EXPECT_REFUSED("out of range");
    T(0)->offset += 4;
    EXPECT_REFUSED("not aligned");
    memset(T(0)->name, 'x', NIB_NAME_MAX);
    EXPECT_REFUSED("NUL");
}
END_TEST

static uint32_t find_matmul(uint32_t flag)
{
    for (uint32_t i = 0; i < H()->n_ops; i++)
        if (OP(i)->code == NIB_OP_MATMUL && (OP(i)->flags & flag))
            return i;
    ck_abort_msg("no matmul with epilogue 0x%x in the plan", flag);
    return 0;
}

START_TEST(plan_lies_refused)
{
    uint32_t mm = find_op(NIB_OP_MATMUL), at = find_op(NIB_OP_ATTENTION),
             emb = find_op(NIB_OP_EMBED), qkv = find_matmul(NIB_EPI_ROPE_KV),
             gu = find_matmul(NIB_EPI_SILU_MUL), head = find_matmul(NIB_EPI_ARGMAX);
    OP(0)->code = 200;
    EXPECT_REFUSED("unknown opcode");
    OP(0)->code = 5; /* a version 1 op */
    EXPECT_REFUSED("unknown opcode");
    OP(mm)->tensor = H()->n_tensors;
    EXPECT_REFUSED("tensor index");
    OP(mm)->n += 1;
    EXPECT_REFUSED("matmul");
    OP(mm)->dst = H()->act_size + H()->kv_size - 4;
    EXPECT_REFUSED("outside runtime memory");
    OP(mm)->src0 = (uint64_t)-64;
    EXPECT_REFUSED("outside runtime memory");
    OP(mm)->flags |= 0x8000;
    EXPECT_REFUSED("flags");
    OP(mm)->flags |= NIB_EPI_SILU_MUL;
    EXPECT_REFUSED("do not combine");
    OP(qkv)->matmul.rope_kv.head_dim = 3;
    EXPECT_REFUSED("fused QKV geometry");
    OP(qkv)->matmul.rope_kv.v_off = OP(qkv)->n;
    EXPECT_REFUSED("fused QKV geometry");
    OP(qkv)->matmul.rope_kv.table = H()->n_tensors;
    EXPECT_REFUSED("RoPE table");
    OP(qkv)->matmul.rope_kv.table = OP(qkv)->tensor;
    EXPECT_REFUSED("RoPE table");
    OP(qkv)->aux = H()->act_size + H()->kv_size - 64;
    EXPECT_REFUSED("outside runtime memory");
    OP(qkv)->matmul.rope_kv.v_cache_off = 0xFFFFFFF0u;
    EXPECT_REFUSED("outside runtime memory");
    OP(qkv)->aux_stride = 4;
    EXPECT_REFUSED("stride");
    OP(qkv)->matmul.rope_kv.head_stride -= 4; /* heads' rows would overlap */
    EXPECT_REFUSED("KV cache strides overlap");
    OP(qkv)->matmul.rope_kv.head_stride = OP(qkv)->matmul.rope_kv.head_dim * 4 + 4; /* neither */
    EXPECT_REFUSED("KV cache strides overlap");
    OP(gu)->matmul.silu_mul.n_out += 8;
    EXPECT_REFUSED("pair up");
    if (OP(gu)->flags & NIB_OPF_QOUT) {
        OP(gu)->matmul.silu_mul.qblock = 48;
        EXPECT_REFUSED("quantized gate|up output");
        OP(gu)->dst += 4;
        EXPECT_REFUSED("quantized gate|up output");
    } else {
        OP(gu)->dst_stride = 4;
        EXPECT_REFUSED("row stride smaller than a row");
    }
    if (OP(at)->flags & NIB_OPF_QOUT) {
        OP(at)->attention.qblock = OP(at)->k + 32;
        EXPECT_REFUSED("attention): bad quantized output");
        OP(at)->attention.unit_heads = 0;
        EXPECT_REFUSED("attention): bad quantized output");
        OP(at)->attention.unit_heads = OP(at)->n + 1;
        EXPECT_REFUSED("attention): bad quantized output");
        OP(at)->aux = H()->act_size + H()->kv_size - 64;
        EXPECT_REFUSED("outside runtime memory");
    }
    OP(mm)->flags |= NIB_OPF_QOUT;
    EXPECT_REFUSED("only gate|up");
    for (uint32_t i = 0; i < H()->n_ops; i++)
        if (OP(i)->code == NIB_OP_QUANT) {
            OP(i)->quant.block = 3;
            EXPECT_REFUSED("quant): bad block");
            break;
        }
    OP(at)->attention.scale = 0.0f;
    EXPECT_REFUSED("attention): bad head geometry");
    OP(at)->attention.cache_stride = 4;
    EXPECT_REFUSED("attention): bad head geometry");
    OP(at)->attention.head_stride -= 4;
    EXPECT_REFUSED("attention): bad head geometry");
    OP(at)->attention.head_stride = OP(at)->k * 4 + 4;
    EXPECT_REFUSED("attention): bad head geometry");
    /* each op valid alone, the two disagreeing on the cache they share */
    OP(at)->attention.v_cache_off -= 4;
    EXPECT_REFUSED("another place or layout");
    ck_assert_uint_eq(OP(at)->attention.cache_stride, OP(at)->k * 4); /* head by head */
    OP(at)->attention.cache_stride = OP(at)->attention.n_kv_heads * OP(at)->k * 4;
    OP(at)->attention.head_stride = OP(at)->k * 4; /* read as rows, the same span */
    EXPECT_REFUSED("another place or layout");
    OP(qkv)->flags &= ~NIB_EPI_ROPE_KV; /* a plain matmul: nothing writes the first cache */
    EXPECT_REFUSED("no earlier QKV op");
    ck_assert(OP(qkv)->flags & NIB_OPF_NORM_IN);
    OP(qkv)->matmul.norm.tensor = H()->n_tensors;
    EXPECT_REFUSED("bad input norm");
    OP(qkv)->matmul.norm.tensor = OP(qkv)->tensor;
    EXPECT_REFUSED("bad input norm");
    OP(qkv)->matmul.norm.eps = 0.0f;
    EXPECT_REFUSED("bad input norm");
    H()->wscratch_size -= 64;
    EXPECT_REFUSED("worker scratch");
    H()->wscratch_off += 4;
    EXPECT_REFUSED("worker scratch");
    H()->wscratch_off = H()->act_size;
    EXPECT_REFUSED("worker scratch");
    OP(head)->flags &= ~NIB_OPF_LAST_ROW;
    EXPECT_REFUSED("argmax");
    OP(at)->attention.n_kv_heads = 0;
    EXPECT_REFUSED("attention");
    OP(at)->attention.scratch = H()->act_size + H()->kv_size;
    EXPECT_REFUSED("outside runtime memory");
    OP(at)->attention.v_cache_off = 0xFFFFFFF0u;
    EXPECT_REFUSED("outside runtime memory");
    OP(at)->src0_stride = 6;
    EXPECT_REFUSED("stride");
    OP(emb)->n = 0;
    EXPECT_REFUSED("out of range");
    OP(emb)->dst = 2;
    EXPECT_REFUSED("outside runtime memory");
    H()->max_batch = 0;
    EXPECT_REFUSED("max_batch");
    H()->max_batch = NIB_MAX_BATCH + 1;
    EXPECT_REFUSED("max_batch");
    H()->argmax_blocks += 1;
    EXPECT_REFUSED("argmax_blocks");
}
END_TEST

START_TEST(tokenizer_lies_refused)
{
    uint8_t *tok = work + H()->tokenizer.offset;
    struct nib_tok_header *th = (void *)tok;
    struct nib_tok_entry *e = (void *)(tok + th->entries.offset);
    uint32_t n = th->n_vocab;
    uint32_t *sorted = (void *)(tok + th->sorted.offset);
    uint32_t *byte_ids = (void *)(tok + th->byte_ids.offset);

    th->n_vocab += 1;
    EXPECT_REFUSED("tokenizer has");
    e[5].offset = 0xFFFFFF00u;
    EXPECT_REFUSED("outside the tokenizer bytes");
    e[5].type = 0;
    EXPECT_REFUSED("unknown type");
    uint32_t tmp = sorted[10];
    sorted[10] = sorted[11];
    sorted[11] = tmp;
    EXPECT_REFUSED("not sorted");
    sorted[3] = n;
    EXPECT_REFUSED("sorted index");
    th->flags |= NIB_TOKF_BYTE_FALLBACK;
    byte_ids[7] = n;
    EXPECT_REFUSED("byte 7");
    th->max_piece_len = 100000;
    EXPECT_REFUSED("max piece");
    th->entries.offset += 4;
    EXPECT_REFUSED("entries");
    th->bytes.count = 0xFFFFFFF0u;
    EXPECT_REFUSED("bytes");
    th->model = 7;
    EXPECT_REFUSED("model 7");
    th->bos_id = n;
    EXPECT_REFUSED("bos/eos");
}
END_TEST

/* ---- format 5's operands, on a model that has all of them ------------------- */

/* Bias, per-head Q/K norms (head 16), GELU, post-norms (NORM_ADD ops),
 * embedding scale, window, attention and final soft-caps. */
static const struct am_cfg every_feature = {.what = "every feature",
                                            .head_dim = 16,
                                            .bias = 1,
                                            .qk_norm = 1,
                                            .post_norms = 1,
                                            .gelu = 1,
                                            .window = 4,
                                            .embed_scale = 5.5f,
                                            .attn_softcap = 0.5f,
                                            .final_softcap = 1.5f};

static void setup_arch(const char *quant)
{
    struct am_model m;
    am_build(&m, &every_feature);
    uint8_t *b = NULL;
    ck_assert_msg(am_compile_raw(&m.m, quant, &b, &blob_size, err, sizeof err) == 0, "%s", err);
    am_free(&m);
    blob = b;
    work = aligned_alloc(64, (blob_size + 63) & ~(size_t)63);
    memcpy(work, blob, blob_size);
    ck_assert_msg(open_work() == 0, "%s: %s", quant, err);
}

static void setup_arch_f32(void)
{
    setup_arch("f32");
}

static void setup_arch_q4(void)
{
    setup_arch("q4");
}

static uint32_t find_tensor(const char *name)
{
    for (uint32_t i = 0; i < H()->n_tensors; i++)
        if (!strcmp(T(i)->name, name))
            return i;
    ck_abort_msg("no tensor '%s'", name);
    return 0;
}

START_TEST(arch_operands_refused)
{
    const uint32_t emb = find_op(NIB_OP_EMBED), na = find_op(NIB_OP_NORM_ADD),
                   at = find_op(NIB_OP_ATTENTION), qkv = find_matmul(NIB_EPI_ROPE_KV),
                   gu = find_matmul(NIB_EPI_SILU_MUL), head = find_matmul(NIB_EPI_ARGMAX);
    const uint32_t attn_norm = find_tensor("blk.0.attn_norm"), rope = find_tensor("rope_cos_sin");
    const float inf = __builtin_inff(), nan = __builtin_nanf("");
    ck_assert(OP(qkv)->flags & NIB_EPI_BIAS);
    ck_assert(OP(head)->flags & NIB_EPI_SOFTCAP);
    ck_assert_uint_eq(OP(gu)->matmul.silu_mul.act, 1);
    ck_assert_uint_eq(OP(at)->attention.window, 4);
    ck_assert_uint_ne(OP(qkv)->matmul.rope_kv.q_norm, UINT32_MAX);
    /* embedding scale */
    OP(emb)->embed.scale = inf;
    EXPECT_REFUSED("embed): scale");
    OP(emb)->embed.scale = nan;
    EXPECT_REFUSED("embed): scale");
    /* norm-add */
    OP(na)->tensor = H()->n_tensors;
    EXPECT_REFUSED("tensor index");
    OP(na)->tensor = OP(qkv)->tensor;
    EXPECT_REFUSED("norm_add");
    OP(na)->tensor = rope;
    EXPECT_REFUSED("norm_add): weight");
    OP(na)->n += 1;
    EXPECT_REFUSED("norm_add): weight");
    OP(na)->norm_add.eps = 0.0f;
    EXPECT_REFUSED("norm_add): eps");
    OP(na)->norm_add.eps = nan;
    EXPECT_REFUSED("norm_add): eps");
    OP(na)->src0 = OP(na)->dst;
    EXPECT_REFUSED("overlap the destination");
    OP(na)->src0 = OP(na)->dst + 64;
    EXPECT_REFUSED("overlap the destination");
    OP(na)->dst = H()->act_size + H()->kv_size - 64;
    EXPECT_REFUSED("outside runtime memory");
    OP(na)->src0_stride = 4;
    EXPECT_REFUSED("stride");
    OP(na)->flags = NIB_OPF_LAST_ROW;
    EXPECT_REFUSED("flags");
    H()->wscratch_size = 64;
    EXPECT_REFUSED("scratch");
    /* bias */
    OP(qkv)->matmul.bias = H()->n_tensors;
    EXPECT_REFUSED("bias is not");
    OP(qkv)->matmul.bias = attn_norm;
    EXPECT_REFUSED("bias is not");
    OP(qkv)->matmul.bias = OP(qkv)->tensor;
    EXPECT_REFUSED("bias is not");
    OP(at)->flags |= NIB_EPI_BIAS;
    EXPECT_REFUSED("flags");
    /* soft-caps */
    OP(head)->matmul.softcap = 0.0f;
    EXPECT_REFUSED("soft-cap");
    OP(head)->matmul.softcap = -1.0f;
    EXPECT_REFUSED("soft-cap");
    OP(head)->matmul.softcap = nan;
    EXPECT_REFUSED("soft-cap");
    OP(head)->matmul.softcap = inf;
    EXPECT_REFUSED("soft-cap");
    OP(at)->attention.softcap = -1.0f;
    EXPECT_REFUSED("attention): soft-cap");
    OP(at)->attention.softcap = nan;
    EXPECT_REFUSED("attention): soft-cap");
    OP(at)->attention.softcap = inf;
    EXPECT_REFUSED("attention): soft-cap");
    /* window, scale */
    OP(at)->attention.window = H()->hp.ctx_len + 1;
    EXPECT_REFUSED("window");
    OP(at)->attention.scale = inf;
    EXPECT_REFUSED("head geometry");
    /* per-head Q/K norms */
    OP(qkv)->matmul.rope_kv.q_norm = UINT32_MAX;
    EXPECT_REFUSED("Q norm");
    OP(qkv)->matmul.rope_kv.k_norm = UINT32_MAX;
    EXPECT_REFUSED("K norm");
    OP(qkv)->matmul.rope_kv.k_norm = H()->n_tensors;
    EXPECT_REFUSED("K norm");
    OP(qkv)->matmul.rope_kv.q_norm = attn_norm;
    EXPECT_REFUSED("Q norm");
    OP(qkv)->matmul.rope_kv.q_norm = OP(qkv)->tensor;
    EXPECT_REFUSED("Q norm");
    OP(qkv)->matmul.rope_kv.qk_eps = 0.0f;
    EXPECT_REFUSED("Q/K norm eps");
    OP(qkv)->matmul.rope_kv.qk_eps = nan;
    EXPECT_REFUSED("Q/K norm eps");
    /* gated activation */
    OP(gu)->matmul.silu_mul.act = 2;
    EXPECT_REFUSED("gated activation");
}
END_TEST

/* Quantized tables (the default q4's q4h embedding, q4f/q8f tensors): a
 * dtype or group that does not match the bytes is refused. */
START_TEST(arch_quantized_tensors)
{
    const uint32_t emb = find_op(NIB_OP_EMBED);
    struct nib_tensor_rec *t = T(OP(emb)->tensor);
    ck_assert_uint_eq(t->dtype, NIB_DT_Q4H);
    t->dtype = NIB_DT_Q4F;
    EXPECT_REFUSED("expected");
    t->dtype = NIB_DT_Q8F;
    EXPECT_REFUSED("expected");
    t->group = 64;
    EXPECT_REFUSED("expected");
    t->dtype = NIB_DT_COUNT;
    EXPECT_REFUSED("unknown dtype");
    /* every format the planner writes opens (embedding, matrices, head) */
    static const char *const quants[] = {"q4f/16", "q4f/32", "q8f/16", "q8f/32", "q4c", "q4a"};
    struct am_model m;
    am_build(&m, &every_feature);
    for (size_t i = 0; i < sizeof quants / sizeof quants[0]; i++) {
        struct nib_blob_view v;
        free(am_compile(&m.m, quants[i], &v));
    }
    am_free(&m);
}
END_TEST

/* Vision blobs (format 6): the identity blobs of tests/common/vision_blob.h
 * open; every lie in the io table is refused naming it. */
static struct nib_io_rec vio[NIB_IO_MAX];
static uint32_t vn;
static uint64_t vact;

/* The blob with the io table vio[0..n), its section holding `records`. */
static int open_vision(uint32_t n, uint32_t records)
{
    uint8_t *b = aligned_alloc(64, NIB_TEST_VISION_BLOB_SIZE);
    nib_test_vision_blob_io(b, vio, n, vact);
    struct nib_blob_header *h = (struct nib_blob_header *)(void *)b;
    h->tokenizer.size = (uint64_t)records * sizeof(struct nib_io_rec);
    h->crc32c = nib_blob_crc(b, NIB_TEST_VISION_BLOB_SIZE);
    struct nib_blob_view v;
    int rc = nib_blob_open(&v, b, NIB_TEST_VISION_BLOB_SIZE, 1, err, sizeof err);
    free(b);
    return rc;
}

#define VISION_REFUSED(n, records, what)                                                           \
    do {                                                                                           \
        ck_assert_int_eq(open_vision(n, records), -1);                                             \
        ck_assert_msg(strstr(err, what) != NULL, "error '%s' does not say '%s'", err, what);       \
        vn = nib_test_vision_io(NIB_TEST_VISION_TWO, vio, &vact);                                  \
    } while (0)

START_TEST(vision_io_table_lies_refused)
{
    struct nib_blob_view v;
    uint8_t *b = aligned_alloc(64, NIB_TEST_VISION_BLOB_SIZE);
    for (int which = NIB_TEST_VISION_ONE; which <= NIB_TEST_VISION_TWO; which++) {
        size_t n = nib_test_vision_blob(b, which);
        ck_assert_msg(nib_blob_open(&v, b, n, 1, err, sizeof err) == 0, "%s", err);
        ck_assert_uint_eq(v.n_io, which == NIB_TEST_VISION_ONE ? 2 : 4);
        ck_assert_uint_eq(v.n_inputs, which == NIB_TEST_VISION_ONE ? 1 : 2);
        ck_assert_uint_eq(v.h->n_ops, 0);
    }
    free(b);
    vn = nib_test_vision_io(NIB_TEST_VISION_TWO, vio, &vact);
    ck_assert_int_eq(open_vision(vn, vn), 0);
    /* truncated table: the section holds fewer (or more) records than n_io */
    VISION_REFUSED(vn, vn - 1, "io table of 4 records");
    VISION_REFUSED(vn, vn + 1, "io table of 4 records");
    VISION_REFUSED(1, 1, "io table of 1 records");
    /* overlapping inputs */
    vio[1].off = 704;
    VISION_REFUSED(vn, vn, "io records 0 and 1 overlap");
    /* overlapping outputs */
    vio[2].off = 0;
    VISION_REFUSED(vn, vn, "io records 2 and 3 overlap");
    /* bad dims: a zero dim, an unused dim set, rank 0 and past the limit */
    vio[0].dims[2] = 0;
    VISION_REFUSED(vn, vn, "io record 0: dimension 2 is 0");
    vio[1].dims[5] = 3;
    VISION_REFUSED(vn, vn, "io record 1: dimension 5 is 3");
    vio[3].rank = 0;
    VISION_REFUSED(vn, vn, "io record 3: rank 0");
    vio[3].rank = NIB_IO_MAX_RANK + 1;
    VISION_REFUSED(vn, vn, "io record 3: rank 9");
    vio[0].dims[0] = 1u << 30;
    VISION_REFUSED(vn, vn, "larger than");
    /* bytes that do not match the dims, an offset misaligned or past the arena */
    vio[0].bytes = 767;
    VISION_REFUSED(vn, vn, "io record 0: 767 bytes");
    vio[1].off = 770;
    VISION_REFUSED(vn, vn, "io record 1:");
    vio[3].off = vact;
    VISION_REFUSED(vn, vn, "inside the arena");
    /* outputs before inputs, a direction that is neither, no outputs */
    struct nib_io_rec t = vio[1];
    vio[1] = vio[2];
    vio[2] = t;
    VISION_REFUSED(vn, vn, "io record 2: direction 0 (inputs come first)");
    vio[3].dir = 2;
    VISION_REFUSED(vn, vn, "io record 3: direction 2");
    /* inputs only, outputs only */
    VISION_REFUSED(2, 2, "io table has 2 inputs and 0 outputs");
    vio[0].dir = vio[1].dir = NIB_IO_OUTPUT;
    VISION_REFUSED(2, 2, "io table has 0 inputs and 2 outputs");
    /* unknown element types, empty or unterminated names */
    vio[2].dtype = 3;
    VISION_REFUSED(vn, vn, "io record 2: element type 3 is unknown");
    vio[0].dtype = 0;
    VISION_REFUSED(vn, vn, "io record 0: element type 0 is unknown");
    vio[1].name[0] = 0;
    VISION_REFUSED(vn, vn, "io record 1: name is empty");
    memset(vio[3].name, 'x', sizeof vio[3].name);
    VISION_REFUSED(vn, vn, "io record 3: name");
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("blob");
    TU_CASE(s, "validate", setup, teardown, 120, valid_blob_opens, every_flipped_byte_refused,
            truncated_refused, header_lies_refused, tensor_lies_refused, plan_lies_refused,
            tokenizer_lies_refused);
    TU_CASE(s, "format5-f32", setup_arch_f32, teardown, 120, arch_operands_refused);
    TU_CASE(s, "vision", NULL, NULL, 60, vision_io_table_lies_refused);
    TU_CASE(s, "format5-q4", setup_arch_q4, teardown, 120, arch_operands_refused,
            arch_quantized_tensors);
    return s;
}
