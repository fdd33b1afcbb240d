/* nib bench: memory bandwidth and kernel throughput, measured in one run
 * and interleaved (each round measures everything once, so drift on a
 * shared machine hits every figure alike; the median round is reported).
 *
 *   stream read   a buffer far larger than the L3, 1 and 2 threads, every
 *                 variant of tools/measure/bench_stream.c once per round
 *   read order    1 thread: the same bytes read in stream order and in the
 *                 order the 512-bit kernels load an N-block pair (halves in
 *                 turn), without and with a prefetch in stream order: shows
 *                 whether this host's prefetchers follow the kernels' order
 *   GEMV          weight GB/s (packed bytes read per second) of every
 *                 quantized format on the LLaMA shapes below: from memory
 *                 (rotating among copies that together exceed the L3 many
 *                 times, so every call streams from DRAM) with 1 and 2
 *                 threads, and from cache (one copy, repeated; shown when
 *                 it fits in half the L3). Each memory figure is also given
 *                 as a ratio to the strongest stream read of the run with
 *                 the same threads (bench_stream.h: the best pass of every
 *                 loop variant in every round, and of the reads taken
 *                 beside each figure).
 *   prefill       GEMM of PREFILL_M tokens per call from memory: weight
 *                 bytes x tokens per second (compare with the GEMV column
 *                 for the prefill-vs-decode speed-up per token).
 *   attention     the attention kernel from the caches beside the core's
 *                 multiply-add peak and a read of the same bytes
 *                 (tools/measure/bench_attention.c).
 *   models        bench_models() below: the hook for whole-model decode and
 *                 prefill figures.
 *
 * Benchmarks report; no test asserts a timing. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kernels/qkernels.h"
#include "model_blob/blob_view.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/prefetch_tune.h"
#include "rt/team.h"
#include "rt/tokenizer.h"
#include "tools/measure/bench_attention.h"
#include "tools/measure/bench_stats.h"
#include "tools/measure/bench_vision.h"
#include "tools/measure/bench_stream.h"
#include "tools/measure/bench_tok.h"
#include "tools/measure/measure.h"
#include "tools/util/args.h"
#include "tools/util/tool_util.h"

#define MIB (1024.0 * 1024.0)
#define MAX_ROUNDS 15
#define MAX_THREADS 2
#define PREFILL_M 8                    /* tokens per GEMM in the prefill column */
#define PAIR_BYTES ((size_t)256 << 20) /* stream read paired with each GEMV figure */

#define MAX_MODELS 8

struct bench_opts {
    const char *models[MAX_MODELS]; /* --model BLOB: whole-model decode */
    int n_models;
    uint32_t model_tokens; /* tokens timed per model and worker count */
    size_t stream_bytes;   /* stream-read buffer */
    size_t rotate_bytes;   /* GEMV copies rotate through this much memory */
    int rounds;
    double min_seconds; /* per measurement */
    const struct nib_qkernels *kt;
    const char *only_fmt; /* NULL = all */
};

/* 2 MiB-aligned and advised into transparent huge pages, as the appliance
 * maps its weights (docs/runtime.md): 4 KiB pages cost ~10% of read bandwidth here
 * in TLB misses, for the stream read and the kernels alike. */
static void *big_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 2u << 20, n))
        return NULL;
    madvise(p, n, MADV_HUGEPAGE); /* advice only: fine if refused */
    return p;
}

/* ---- a two-thread team: the caller is worker 0, one helper thread ----
 * The helper exists only while a 2-thread measurement runs (team_begin /
 * team_end), so it never spins during 1-thread figures. */

typedef void (*job_fn)(void *arg, int worker, int n_workers);

static struct {
    pthread_t th;
    _Atomic unsigned long go, done;
    job_fn fn;
    void *arg;
    int n;
    _Atomic int quit;
    unsigned long start; /* go as it was before the helper started */
} team;

static void *helper(void *unused)
{
    (void)unused;
    unsigned long seen = team.start; /* set before the thread existed: no race */
    for (;;) {
        unsigned long g;
        while ((g = atomic_load_explicit(&team.go, memory_order_acquire)) == seen) {
            if (atomic_load_explicit(&team.quit, memory_order_relaxed))
                return NULL;
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
        }
        seen = g;
        team.fn(team.arg, 1, team.n);
        atomic_store_explicit(&team.done, g, memory_order_release);
    }
}

static int team_begin(int n_workers)
{
    if (n_workers < 2)
        return 0;
    atomic_store(&team.quit, 0);
    team.start = atomic_load(&team.go);
    if (pthread_create(&team.th, NULL, helper, NULL)) {
        fprintf(stderr, "nib bench: cannot start a thread: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

static void team_end(int n_workers)
{
    if (n_workers < 2)
        return;
    atomic_store(&team.quit, 1);
    pthread_join(team.th, NULL);
}

/* Run fn on n_workers (1 or 2) threads and wait for all. */
static void team_run(job_fn fn, void *arg, int n_workers)
{
    if (n_workers < 2) {
        fn(arg, 0, 1);
        return;
    }
    team.fn = fn;
    team.arg = arg;
    team.n = n_workers;
    unsigned long g = atomic_load(&team.go) + 1;
    atomic_store_explicit(&team.go, g, memory_order_release);
    fn(arg, 0, n_workers);
    while (atomic_load_explicit(&team.done, memory_order_acquire) != g) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
}

/* ---- stream read ---- */

struct stream_job {
    const uint8_t *buf;
    size_t bytes;
    const struct stream_variant *sv;
    uint64_t sink[MAX_THREADS * 8];
};

static void stream_worker(void *arg, int w, int nw)
{
    struct stream_job *j = arg;
    size_t part = j->bytes / (size_t)nw / 4096 * 4096;
    j->sink[w * 8] += stream_fold(j->buf + part * (size_t)w, part, j->sv);
}

/* The strongest read seen so far with 1 and 2 threads (every stream read
 * of the run counts), and the variant that did it: every ratio divides by it. */
static struct {
    double gbs[MAX_THREADS];
    int variant[MAX_THREADS];
} yardstick;

/* Seconds one run of fn on n_workers threads takes, the team started
 * and stopped around it; 0 when the team cannot start. */
static double team_seconds(job_fn fn, void *arg, int n_workers)
{
    if (team_begin(n_workers))
        return 0;
    double t0 = bench_now();
    team_run(fn, arg, n_workers);
    double dt = bench_now() - t0;
    team_end(n_workers);
    return dt;
}

static double stream_gbs(const uint8_t *buf, size_t bytes, int threads, int variant)
{
    struct stream_job j = {buf, bytes, &stream_variants[variant], {0}};
    double dt = team_seconds(stream_worker, &j, threads);
    if (dt <= 0)
        return 0;
    size_t part = bytes / (size_t)threads / 4096 * 4096;
    double gbs = (double)part * threads / dt / 1e9;
    if (gbs > yardstick.gbs[threads - 1]) {
        yardstick.gbs[threads - 1] = gbs;
        yardstick.variant[threads - 1] = variant;
    }
    return gbs;
}

/* The pair read order (bench_stream.h), one thread: the first 256 MiB of
 * the stream buffer in 1152-byte chunks (a q4h/128 N-block pair; q4/128's
 * is 1056) and the prefetch distance the 512-bit kernels use for a pair. */
#define ORDER_HALF 576

struct order_job {
    const uint8_t *buf;
    size_t bytes;
    enum pair_order order;
    uint64_t sink;
};

static void order_worker(void *arg, int w, int nw)
{
    (void)w, (void)nw;
    struct order_job *j = arg;
    j->sink += pair_order_fold(j->buf, j->bytes, ORDER_HALF, j->order,
                               2 * (size_t)__atomic_load_n(&nib_prefetch_bytes, __ATOMIC_RELAXED));
}

static double order_gbs(const uint8_t *buf, size_t bytes, enum pair_order order)
{
    struct order_job j = {buf, bytes, order, 0};
    double dt = team_seconds(order_worker, &j, 1);
    return dt > 0 ? (double)bytes / dt / 1e9 : 0;
}

/* ---- GEMV ---- */

struct gemv_job {
    const struct nib_qkernels *kt;
    const struct nib_qlayout *l;
    const uint8_t *w;
    const struct nib_qact *a;
    uint32_t m; /* tokens: 1 = GEMV, more = prefill GEMM */
    float *y;
};

static void gemv_worker(void *arg, int wk, int nw)
{
    struct gemv_job *j = arg;
    /* split by N-blocks: worker wk takes a contiguous share */
    uint32_t nblocks = j->l->n_pad / NIB_Q_TILE_N;
    uint32_t b0 = nblocks * (uint32_t)wk / (uint32_t)nw,
             b1 = nblocks * (uint32_t)(wk + 1) / (uint32_t)nw;
    uint32_t n0 = b0 * NIB_Q_TILE_N,
             n1 = b1 * NIB_Q_TILE_N < j->l->rows ? b1 * NIB_Q_TILE_N : j->l->rows;
    if (n0 < n1)
        j->kt->gemm[j->l->dtype](j->l, j->w, j->a, j->m, j->y, j->l->rows, NULL, 0, n0, n1);
}

/* Weight GB/s of repeated calls over copies [0, n_copies) (stride apart),
 * counting the weights once per token (m tokens per call). */
static double gemv_gbs(struct gemv_job *j, const uint8_t *base, size_t stride, size_t n_copies,
                       int threads, double min_s)
{
    size_t calls = 0;
    if (team_begin(threads))
        return 0;
    double t0 = bench_now(), dt;
    do {
        for (size_t c = 0; c < n_copies; c++, calls++) {
            j->w = base + c * stride;
            team_run(gemv_worker, j, threads);
        }
        dt = bench_now() - t0;
    } while (dt < min_s);
    team_end(threads);
    return (double)calls * j->m * (double)j->l->size / dt / 1e9;
}

/* Random codes with finite scales: any bytes are a valid packed tensor
 * once the scale slots hold numbers. */
static void fill_weights(uint8_t *w, const struct nib_qlayout *l, uint64_t seed)
{
    for (uint64_t i = 0; i < l->size; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (uint8_t)(seed >> 56);
    }
    for (uint32_t r = 0; r < l->n_pad; r++)
        for (uint32_t jg = 0; jg < l->n_sgroups; jg++) {
            uint64_t off = nib_ql_scale_off(l, r, jg);
            if (l->scale_bytes == 2) {
                uint16_t h = nib_f32_to_f16(0.01f);
                memcpy(w + off, &h, 2);
            } else {
                float f = 0.01f;
                memcpy(w + off, &f, 4);
            }
        }
}

static const struct {
    uint32_t k, n;
    const char *what;
} shapes[] = {
    {2048, 2048, "attention q/o"},
    {2048, 5632, "ffn gate/up"},
    {5632, 2048, "ffn down"},
    {2048, 32000, "lm head"},
};
static const struct {
    const char *name;
    uint32_t dtype, group;
} formats[] = {
    {"q4/32", NIB_DT_Q4, 32},     {"q4/128", NIB_DT_Q4, 128}, {"q4a/32", NIB_DT_Q4A, 32},
    {"q4c", NIB_DT_Q4C, 0},       {"q8c", NIB_DT_Q8C, 0},     {"q8c/32", NIB_DT_Q8C, 32},
    {"q4h/128", NIB_DT_Q4H, 128}, {"q4h/64", NIB_DT_Q4H, 64},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])
#define N_FORMATS (sizeof formats / sizeof formats[0])

struct result {
    double mem[MAX_THREADS][MAX_ROUNDS], cache[MAX_ROUNDS], prefill[MAX_ROUNDS];
    size_t bytes, copies;
    int cache_ok;
};

/* ---- hook for whole-model figures ---- */

struct bench_ctx {
    const struct bench_opts *o;
    const uint8_t *sbuf; /* the stream-read buffer, for paired reads */
    size_t sbytes;
};

/* Weight bytes one token streams: every matmul's tensor, once (the
 * embedding table is read one row per token and not counted). */
static uint64_t streamed_bytes(const struct nib_blob_view *v)
{
    uint64_t n = 0;
    for (uint32_t t = 0; t < v->h->n_tensors; t++)
        for (uint32_t i = 0; i < v->h->n_ops; i++)
            if (v->ops[i].code == NIB_OP_MATMUL && v->ops[i].tensor == t) {
                n += v->tensors[t].size;
                break;
            }
    return n;
}

/* Tokens/s of one blob with n_workers, run the way the appliance runs it
 * (blob copied to huge-page memory, a pinned team, fixed shares), in
 * passes of `batch` tokens: 1 is decode, max_batch is prefill. */
static double model_rate(const struct nib_blob_view *v, uint8_t *mem, uint32_t n_workers,
                         uint32_t n_tokens, uint32_t batch, struct nib_prefetch_tune *tune)
{
    uint64_t team_size = (nib_team_footprint(n_workers) + 63) & ~63ull;
    void *tm =
        aligned_alloc(nib_team_align(),
                      (team_size + nib_exec_team_footprint(n_workers, v) + 4095) & ~(uint64_t)4095);
    if (!tm)
        return 0;
    struct nib_team *team = nib_team_new(tm, n_workers, 1000000000ull, 1000000000ull);
    struct nib_exec e = {.v = v, .mem = mem, .qk = nib_exec_kernels(nib_cpu_isa())};
    if (team)
        nib_exec_set_team(&e, team, (uint8_t *)tm + team_size);
    pthread_t tids[MAX_THREADS];
    uint32_t cpus[MAX_THREADS] = {0, 1};
    /* nib_team_spawn pins this thread to cpus[0]; the stream reads that
     * follow must not inherit that (their threads would share one CPU). */
    cpu_set_t saved;
    sched_getaffinity(0, sizeof saved, &saved);
    if (!team || nib_team_spawn(team, cpus, tids)) {
        sched_setaffinity(0, sizeof saved, &saved);
        free(tm);
        return 0;
    }
    uint32_t ctx = v->h->hp.ctx_len, warm = 4, ids[NIB_MAX_BATCH];
    if (n_tokens + warm > ctx)
        n_tokens = ctx > warm + 1 ? ctx - warm - 1 : 1;
    for (uint32_t i = 0; i < NIB_MAX_BATCH; i++)
        ids[i] = (v->h->hp.bos_id + 3 * i) % v->h->hp.vocab_size;
    for (uint32_t p = 0; p < warm; p++)
        nib_exec_token(&e, ids[0], p);
    if (tune) { /* the distance as the appliance picks it, left set */
        nib_prefetch_tune_init(tune);
        nib_prefetch_tune_run(&e, tune, NIB_TUNE_ROUNDS, NIB_TUNE_BUDGET_NS);
    }
    double t0 = bench_now();
    for (uint32_t p = warm; p < warm + n_tokens;) {
        uint32_t m = warm + n_tokens - p < batch ? warm + n_tokens - p : batch;
        const float *lg = nib_exec_tokens(&e, ids, m, p);
        ids[0] = lg ? (uint32_t)(lg[0] > lg[1]) + 3 : ids[0]; /* data-dependent, cheap */
        p += m;
    }
    double dt = bench_now() - t0;
    nib_team_join(team, tids);
    sched_setaffinity(0, sizeof saved, &saved);
    free(tm);
    return dt > 0 ? n_tokens / dt : 0;
}

/* Whole-model rows, measured before the tables are printed so that every
 * ratio uses the run's final yardstick. */
static struct {
    char line[640];
    double gbs; /* decode weight GB/s; -1: line is a message */
    uint32_t nw;
    double pps, speedup;
} rows[MAX_MODELS * MAX_THREADS];
static int n_rows;

static void bench_models(const struct bench_ctx *ctx)
{
    const struct bench_opts *o = ctx->o;
    const int rounds = o->rounds < 3 ? o->rounds : 3;
    for (int i = 0; i < o->n_models; i++) {
        char err[256];
        const uint8_t *data;
        size_t size;
        if (nib_map_file(o->models[i], &data, &size, err, sizeof err)) {
            snprintf(rows[n_rows].line, sizeof rows[n_rows].line, "%-28s %s", o->models[i], err);
            rows[n_rows++].gbs = -1;
            continue;
        }
        uint8_t *blob = big_alloc(size);
        struct nib_blob_view v;
        if (!blob) {
            nib_unmap_file(data, size);
            snprintf(rows[n_rows].line, sizeof rows[n_rows].line, "%-28s out of memory",
                     o->models[i]);
            rows[n_rows++].gbs = -1;
            continue;
        }
        memcpy(blob, data, size);
        nib_unmap_file(data, size);
        if (nib_blob_open(&v, blob, size, 1, err, sizeof err) ||
            nib_tok_check(&v, err, sizeof err)) {
            snprintf(rows[n_rows].line, sizeof rows[n_rows].line, "%-28s invalid blob: %s",
                     o->models[i], err);
            rows[n_rows++].gbs = -1;
            free(blob);
            continue;
        }
        uint8_t *mem = big_alloc(v.mem_size);
        if (!mem) {
            snprintf(rows[n_rows].line, sizeof rows[n_rows].line, "%-28s out of memory",
                     o->models[i]);
            rows[n_rows++].gbs = -1;
            free(blob);
            continue;
        }
        memset(mem, 0, v.mem_size);
        uint64_t bytes = streamed_bytes(&v);
        const char *base = strrchr(o->models[i], '/');
        base = base ? base + 1 : o->models[i];
        for (uint32_t nw = 1; nw <= MAX_THREADS; nw++) {
            double tps[MAX_ROUNDS], pps[MAX_ROUNDS], speedup[MAX_ROUNDS];
            /* without NIB_PREFETCH, the prefetch distance as the appliance
             * measures it at boot, taken once for these rounds */
            static struct nib_prefetch_tune tune;
            const uint32_t given = nib_prefetch_bytes;
            const int measure = !getenv("NIB_PREFETCH");
            for (int r = 0; r < rounds; r++) {
                /* a read beside each figure: the yardstick sees the same machine */
                size_t sb = ctx->sbytes < PAIR_BYTES ? ctx->sbytes : PAIR_BYTES;
                stream_gbs(ctx->sbuf, sb, (int)nw, yardstick.variant[nw - 1]);
                tps[r] =
                    model_rate(&v, mem, nw, o->model_tokens, 1, measure && r == 0 ? &tune : NULL);
                pps[r] = model_rate(&v, mem, nw, o->model_tokens, v.h->max_batch, NULL);
                speedup[r] = tps[r] > 0 ? pps[r] / tps[r] : 0;
            }
            const uint32_t used = nib_prefetch_bytes;
            nib_prefetch_set(given);
            double t = bench_median(tps, rounds);
            snprintf(rows[n_rows].line, sizeof rows[n_rows].line, "%-28s %8.1f %8u %8u%s %12.1f",
                     base, bytes / 1e6, nw, used, measure ? "m" : " ", t);
            rows[n_rows].gbs = t * (double)bytes / 1e9;
            rows[n_rows].nw = nw;
            rows[n_rows].pps = bench_median(pps, rounds);
            rows[n_rows++].speedup = bench_median(speedup, rounds);
        }
        free(mem);
        free(blob);
    }
}

static void print_models(const struct bench_opts *o)
{
    if (!o->n_models) {
        printf("\nmodels: none given (nib bench --model BLOB ...; tools/measure/bench-models.sh "
               "makes them)\n");
        return;
    }
    printf(
        "\nwhole models (%u tokens each, median of %d rounds; decode: one token per pass,\n"
        "GB/s = weight bytes streamed per token x tokens/s, (x) = ratio to the strongest stream\n"
        "read with the same threads; prefill: passes of the blob's max_batch\n"
        "tokens, (x) = median ratio of prefill to decode tokens/s in the same round;\n"
        "prefetch: the weight prefetch distance in bytes, m: measured as the appliance\n"
        "measures it at boot, else NIB_PREFETCH's)\n",
        o->model_tokens, o->rounds < 3 ? o->rounds : 3);
    printf("%-28s %8s %8s %9s %12s %18s %18s\n", "model", "MB/token", "workers", "prefetch",
           "decode tok/s", "GB/s (x stream)", "prefill tok/s (x)");
    for (int i = 0; i < n_rows; i++) {
        if (rows[i].gbs < 0) {
            printf("%s\n", rows[i].line);
            continue;
        }
        double y = yardstick.gbs[rows[i].nw - 1];
        printf("%s %11.1f (%.2f) %11.1f (%.2f)\n", rows[i].line, rows[i].gbs,
               y > 0 ? rows[i].gbs / y : 0, rows[i].pps, rows[i].speedup);
    }
}

/* ---- driver ---- */

/* "q4/32, q4/128, ...": the names --format takes, from the table. */
static void print_format_names(FILE *f)
{
    for (size_t i = 0; i < N_FORMATS; i++)
        fprintf(f, "%s%s", i ? ", " : "", formats[i].name);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nib bench [--quick] [--rounds N] [--stream-mib N] [--format NAME] [--isa "
            "avx2|neon|scalar]\n"
            "  --quick          small buffers, 1 round: a smoke test, not a measurement\n"
            "  --rounds N       interleaved rounds, median reported (default 5, at most %d)\n"
            "  --stream-mib N   stream-read buffer in MiB (default 1024)\n"
            "  --format NAME    only this GEMV format (",
            MAX_ROUNDS);
    print_format_names(f);
    fprintf(f,
            ")\n"
            "  --isa NAME       kernel variant (default: the best this build and CPU have)\n"
            "  --model BLOB     also time whole-model decode of BLOB with 1 and 2 workers "
            "(repeatable)\n"
            "  --model-tokens N decode tokens timed per model and worker count (default 128)\n"
            "       nib bench --latency ...: per-token latency of a blob (nib bench --latency "
            "--help)\n"
            "       nib bench --tokenizer SRC ...: tokenizer MB/s beside @huggingface/tokenizers "
            "(nib bench --tokenizer x --help)\n"
            "       nib bench --model VISION.blob ...: per-image latency of a vision blob "
            "(nib bench --model VISION.blob --help)\n");
}

static size_t l3_bytes(void)
{
    /* sysfs first: inside a VM, sysconf may report the host's whole L3 */
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
    unsigned kb = 0;
    if (f) {
        if (fscanf(f, "%uK", &kb) != 1)
            kb = 0;
        fclose(f);
    }
    if (kb)
        return (size_t)kb * 1024;
    long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? (size_t)v : (size_t)32 << 20;
}

static void cpu_name(char *buf, size_t len)
{
    snprintf(buf, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (c && !strncmp(line, "model name", 10)) {
            snprintf(buf, len, "%s", c + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    }
    fclose(f);
}

enum { O_QUICK = NIB_ARGS_OPT, O_ROUNDS, O_STREAM_MIB, O_MODEL, O_MODEL_TOKENS, O_FORMAT, O_ISA };

int nib_bench_main(int argc, char **argv)
{
    /* per-token latency: tools/measure/bench_latency.c */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--latency"))
            return nib_bench_latency_main(argc, argv);
    /* a vision blob's per-image latency: tools/measure/bench_vision.c */
    for (int i = 1; i + 1 < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--model") && nib_bench_is_vision(argv[i + 1]))
            return nib_bench_vision_main(argc, argv);
    /* tokenizer MB/s beside @huggingface/tokenizers: tools/measure/bench_tok.c */
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--tokenizer") || !strncmp(argv[i], "--tokenizer=", 12))
            return nib_bench_tokenizer_main(argc, argv);
    static const struct nib_opt opts[] = {
        {"--quick", O_QUICK, 0},
        {"--rounds", O_ROUNDS, 1},
        {"--stream-mib", O_STREAM_MIB, 1},
        {"--model", O_MODEL, 1},
        {"--model-tokens", O_MODEL_TOKENS, 1},
        {"--format", O_FORMAT, 1},
        {"--isa", O_ISA, 1},
        {NULL, 0, 0},
    };
    struct bench_opts o = {.model_tokens = 128,
                           .stream_bytes = (size_t)1 << 30,
                           .rotate_bytes = (size_t)256 << 20,
                           .rounds = 5,
                           .min_seconds = 0.1};
    const char *isa = NULL;
    int quick = 0, rounds_given = 0, stream_given = 0, model_tokens_given = 0;
    struct nib_args a;
    nib_args_init(&a, "nib bench", argc, argv, opts, usage, NULL);
    int opt;
    while ((opt = nib_args_next(&a)) > NIB_ARGS_END) {
        uint32_t v;
        if (opt == O_QUICK)
            quick = 1;
        else if (opt == O_ROUNDS) {
            if (nib_args_u32(&a, 1, MAX_ROUNDS, &v))
                return 2;
            o.rounds = (int)v;
            rounds_given = 1;
        } else if (opt == O_STREAM_MIB) {
            if (nib_args_u32(&a, 8, 1u << 16, &v))
                return 2;
            o.stream_bytes = (size_t)v << 20;
            stream_given = 1;
        } else if (opt == O_MODEL) {
            if (o.n_models == MAX_MODELS)
                return nib_args_fail(&a, "at most %d --model", MAX_MODELS);
            o.models[o.n_models++] = a.value;
        } else if (opt == O_MODEL_TOKENS) {
            if (nib_args_u32(&a, 1, 1u << 16, &o.model_tokens))
                return 2;
            model_tokens_given = 1;
        } else if (opt == O_FORMAT)
            o.only_fmt = a.value;
        else if (opt == O_ISA)
            isa = a.value;
    }
    if (opt == NIB_ARGS_EXIT)
        return a.status;
    /* --quick sets what --rounds and --stream-mib did not, in any order */
    if (quick) {
        o.stream_bytes = stream_given ? o.stream_bytes : (size_t)64 << 20;
        o.rotate_bytes = (size_t)64 << 20;
        o.rounds = rounds_given ? o.rounds : 1;
        o.min_seconds = 0.005;
    }
    if (model_tokens_given && !o.n_models)
        nib_args_note(a.cmd, "--model-tokens is ignored without --model");
    if (o.only_fmt) {
        size_t f = 0;
        while (f < N_FORMATS && strcmp(formats[f].name, o.only_fmt))
            f++;
        if (f == N_FORMATS) {
            fprintf(stderr, "nib bench: unknown format '%s' (", o.only_fmt);
            print_format_names(stderr);
            fprintf(stderr, ")\n");
            return 2;
        }
    }
    if (!isa) {
        o.kt = nib_qkernels_get(NIB_ISA_AVX2);
        if (!o.kt)
            o.kt = nib_qkernels_get(NIB_ISA_NEON_DOT);
        if (!o.kt)
            o.kt = nib_qkernels_get(NIB_ISA_SCALAR);
    } else {
        uint32_t bit = !strcmp(isa, "avx2")     ? NIB_ISA_AVX2
                       : !strcmp(isa, "neon")   ? NIB_ISA_NEON_DOT
                       : !strcmp(isa, "scalar") ? NIB_ISA_SCALAR
                                                : 0xffffffffu;
        o.kt = bit == 0xffffffffu ? NULL : nib_qkernels_get(bit);
        if (!o.kt) {
            fprintf(stderr, "nib bench: no '%s' kernels in this build (avx2, neon or scalar)\n",
                    isa);
            return 2;
        }
    }
    if (o.kt->isa == NIB_ISA_AVX2 && !__builtin_cpu_supports("avx2")) {
        fprintf(stderr, "nib bench: this CPU lacks AVX2; use --isa scalar\n");
        return 1;
    }

    size_t l3 = l3_bytes();
    for (size_t s = 0; s < N_SHAPES; s++) /* room for at least 2 copies of each */
        for (size_t f = 0; f < N_FORMATS; f++) {
            size_t b =
                nib_qformat_size(formats[f].dtype, formats[f].group, shapes[s].n, shapes[s].k);
            b = (b + 4095) & ~(size_t)4095;
            if (o.rotate_bytes < 2 * b)
                o.rotate_bytes = 2 * b;
        }
    char cpu[128];
    cpu_name(cpu, sizeof cpu);
    printf("nib bench: %s, %ld CPUs online, L3 %.0f MiB; kernels: %s; %d round(s), median shown\n",
           cpu, sysconf(_SC_NPROCESSORS_ONLN), l3 / MIB, nib_qkernels_label(o.kt), o.rounds);

    uint8_t *sbuf = big_alloc(o.stream_bytes), *rot = big_alloc(o.rotate_bytes);
    struct result *res = calloc(N_SHAPES * N_FORMATS, sizeof *res);
    float *y = calloc((size_t)PREFILL_M * 32768, sizeof *y), *x = malloc(8192 * sizeof *x);
    if (!sbuf || !rot || !res || !y || !x) {
        fprintf(stderr, "nib bench: out of memory (%zu MiB stream buffer + %zu MiB rotation)\n",
                o.stream_bytes >> 20, o.rotate_bytes >> 20);
        return 1;
    }
    memset(sbuf, 1, o.stream_bytes); /* fault every page in */
    memset(rot, 0, o.rotate_bytes);
    for (int i = 0; i < 8192; i++)
        x[i] = (float)((i * 7919) % 2001 - 1000) / 1000.0f;

    double st[MAX_THREADS][MAX_ROUNDS]; /* the plain 4-accumulator pass, for comparison */
    static struct bench_att att;        /* static: 1 KiB of figures */
    _Static_assert(BENCH_ATT_MAX_ROUNDS >= MAX_ROUNDS, "attention figures per round");
    double order[PAIR_N_ORDERS][MAX_ROUNDS];
    const size_t order_bytes = o.stream_bytes < PAIR_BYTES ? o.stream_bytes : PAIR_BYTES;
    int rc = 0;
    for (int round = 0; round < o.rounds && rc == 0; round++) {
        for (int th = 1; th <= MAX_THREADS; th++)
            for (int sv = 0; sv < n_stream_variants; sv++) {
                double g = stream_gbs(sbuf, o.stream_bytes, th, sv);
                if (sv == 0)
                    st[th - 1][round] = g;
            }
        for (int k = 0; k < PAIR_N_ORDERS; k++)
            order[k][round] = order_gbs(sbuf, order_bytes, (enum pair_order)k);
        for (size_t s = 0; s < N_SHAPES && rc == 0; s++)
            for (size_t f = 0; f < N_FORMATS; f++) {
                if (o.only_fmt && strcmp(o.only_fmt, formats[f].name))
                    continue;
                struct result *r = &res[s * N_FORMATS + f];
                struct nib_qlayout l;
                nib_qlayout_get(&l, formats[f].dtype, formats[f].group, shapes[s].n, shapes[s].k);
                size_t stride = (l.size + 4095) & ~(size_t)4095;
                size_t copies = o.rotate_bytes / stride;
                if (copies < 2) {
                    fprintf(stderr, "nib bench: rotation buffer too small for %s %ux%u\n",
                            formats[f].name, shapes[s].k, shapes[s].n);
                    rc = 1;
                    break;
                }
                fill_weights(rot, &l, 1 + s * 31 + f);
                for (size_t c = 1; c < copies; c++)
                    memcpy(rot + c * stride, rot, l.size);
                uint32_t block = nib_qformat_act_block(l.dtype, l.group);
                size_t fp = nib_qact_footprint(PREFILL_M, l.cols, block);
                void *am = NULL;
                struct nib_qact a;
                if (posix_memalign(&am, 64, fp) ||
                    nib_qact_init(&a, am, PREFILL_M, l.cols, block)) {
                    fprintf(stderr, "nib bench: out of memory\n");
                    rc = 1;
                    break;
                }
                for (uint32_t t = 0; t < PREFILL_M; t++)
                    o.kt->qact(&a, t, x + t);
                struct gemv_job j = {o.kt, &l, rot, &a, 1, y};
                r->bytes = l.size;
                r->copies = copies;
                for (int th = 1; th <= MAX_THREADS; th++) {
                    /* a read beside each figure: the yardstick sees the same machine */
                    stream_gbs(sbuf, o.stream_bytes < PAIR_BYTES ? o.stream_bytes : PAIR_BYTES, th,
                               yardstick.variant[th - 1]);
                    r->mem[th - 1][round] = gemv_gbs(&j, rot, stride, copies, th, o.min_seconds);
                }
                j.m = PREFILL_M;
                r->prefill[round] = gemv_gbs(&j, rot, stride, copies, 1, o.min_seconds);
                j.m = 1;
                r->cache_ok = l.size * 2 <= l3;
                if (r->cache_ok) {
                    gemv_gbs(&j, rot, stride, 1, 1, o.min_seconds / 10); /* warm */
                    r->cache[round] = gemv_gbs(&j, rot, stride, 1, 1, o.min_seconds);
                }
                free(am);
            }
        if (rc == 0 && bench_attention_round(o.kt, round, o.min_seconds, &att)) {
            fprintf(stderr, "nib bench: out of memory (attention caches)\n");
            rc = 1;
        }
    }
    if (rc == 0) {
        struct bench_ctx ctx = {&o, sbuf, o.stream_bytes};
        bench_models(&ctx); /* its reads count toward the yardstick too */
        printf("\nstream read (the yardstick of every ratio), %.0f MiB buffer: the best pass of %d "
               "variants x %d round(s), and of the %zu MiB reads beside each figure:\n",
               o.stream_bytes / MIB, n_stream_variants, o.rounds, PAIR_BYTES >> 20);
        for (int th = 0; th < MAX_THREADS; th++) {
            char how[96];
            stream_variant_name(&stream_variants[yardstick.variant[th]], how, sizeof how);
            printf("  %d thread(s): %.1f GB/s (%s); a plain 4-accumulator pass: median %.1f GB/s "
                   "(%.2f)\n",
                   th + 1, yardstick.gbs[th], how, bench_median(st[th], o.rounds),
                   yardstick.gbs[th] > 0 ? bench_median(st[th], o.rounds) / yardstick.gbs[th] : 0);
        }
        const double seq = bench_median(order[PAIR_IN_STREAM], o.rounds),
                     turns = bench_median(order[PAIR_TURNS], o.rounds),
                     turns_pf = bench_median(order[PAIR_TURNS_PF], o.rounds);
        printf("read order, 1 thread, %zu-byte pairs whose halves the 512-bit kernels load in "
               "turn:\n  in stream order %.1f GB/s; halves in turn %.1f (%.2f); in turn, "
               "prefetched in stream order %zu B ahead %.1f (%.2f)\n",
               (size_t)2 * ORDER_HALF, seq, turns, seq > 0 ? turns / seq : 0,
               2 * (size_t)__atomic_load_n(&nib_prefetch_bytes, __ATOMIC_RELAXED), turns_pf,
               seq > 0 ? turns_pf / seq : 0);
        printf("\nGEMV weight GB/s (packed bytes / time); (x) = ratio of the median to the "
               "strongest stream read\nwith the same threads;\n");
        printf("prefill = GEMM of %d tokens from memory, 1 thread, weight bytes x tokens / time\n",
               PREFILL_M);
        printf("%-26s %-7s %8s %6s  %-14s %-14s %-9s %s\n", "K x N (what)", "format", "MiB",
               "copies", "memory 1T", "memory 2T", "cache 1T", "prefill 1T");
        for (size_t s = 0; s < N_SHAPES; s++)
            for (size_t f = 0; f < N_FORMATS; f++) {
                if (o.only_fmt && strcmp(o.only_fmt, formats[f].name))
                    continue;
                struct result *r = &res[s * N_FORMATS + f];
                char shape[64], m1[32], m2[32], c1[32] = "-";
                snprintf(shape, sizeof shape, "%ux%u (%s)", shapes[s].k, shapes[s].n,
                         shapes[s].what);
                double g1 = bench_median(r->mem[0], o.rounds),
                       g2 = bench_median(r->mem[1], o.rounds);
                snprintf(m1, sizeof m1, "%5.1f (%.2f)", g1, g1 / yardstick.gbs[0]);
                snprintf(m2, sizeof m2, "%5.1f (%.2f)", g2, g2 / yardstick.gbs[1]);
                if (r->cache_ok)
                    snprintf(c1, sizeof c1, "%5.1f", bench_median(r->cache, o.rounds));
                printf("%-26s %-7s %8.2f %6zu  %-14s %-14s %-9s %5.1f\n", shape, formats[f].name,
                       r->bytes / MIB, r->copies, m1, m2, c1, bench_median(r->prefill, o.rounds));
            }
        bench_attention_print(o.kt, &att, o.rounds);
        print_models(&o);
    }
    free(sbuf), free(rot), free(res), free(y), free(x);
    return rc;
}
