/* nib bench --model BLOB on a vision blob: per-image latency (p50, p99)
 * and images/s, with 1 worker and with all workers, the plan run on a
 * team in this process exactly as the appliance runs it (nib_exec_run on
 * inputs already in place; no ring, no copy). With --ops: where one
 * worker's image time goes, op by op. Reports, never asserts. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/qkernels.h"
#include "model_blob/blob_validate_vision.h"
#include "model_blob/blob_view.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/team.h"
#include "tools/measure/bench_stats.h"
#include "tools/measure/bench_vision.h"
#include "tools/util/args.h"
#include "tools/util/exec_team.h"
#include "tools/util/tool_util.h"

struct vision_fig {
    uint32_t workers;
    double p50_ms, p99_ms, images_s;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Deterministic inputs: f32 in [0, 1), u8 any byte. */
static void fill_inputs(const struct nib_blob_view *v, uint8_t *mem)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (uint32_t k = 0; k < v->n_inputs; k++) {
        const struct nib_io_rec *r = &v->io[k];
        for (uint64_t i = 0; i < r->bytes / nib_io_elem_size(r->dtype); i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            if (r->dtype == NIB_IO_F32) {
                float f = (float)(s >> 40) / (float)(1u << 24);
                memcpy(mem + r->off + 4 * i, &f, 4);
            } else
                mem[r->off + i] = (uint8_t)(s >> 56);
        }
    }
}

/* The bytes of io records [k0, k1), one after the other, from mem into
 * buf (io_save) or back (io_load). */
static uint64_t io_bytes(const struct nib_blob_view *v, uint32_t k0, uint32_t k1)
{
    uint64_t n = 0;
    for (uint32_t k = k0; k < k1; k++)
        n += v->io[k].bytes;
    return n;
}
static void io_save(const struct nib_blob_view *v, const uint8_t *mem, uint32_t k0, uint32_t k1,
                    uint8_t *buf)
{
    for (uint32_t k = k0; k < k1; buf += v->io[k].bytes, k++)
        memcpy(buf, mem + v->io[k].off, v->io[k].bytes);
}
static void io_load(const struct nib_blob_view *v, uint8_t *mem, uint32_t k0, uint32_t k1,
                    const uint8_t *buf)
{
    for (uint32_t k = k0; k < k1; buf += v->io[k].bytes, k++)
        memcpy(mem + v->io[k].off, buf, v->io[k].bytes);
}

/* runs timed runs (after 2 warm-up runs) on a team of `workers`, each on
 * the inputs at `in` (put in place untimed: the plan reuses their memory
 * once they are read, as the appliance's request copy does). */
static int measure(const struct nib_blob_view *v, uint8_t *mem, const uint8_t *in,
                   const struct nib_qkernels *qk, uint32_t workers, uint32_t runs,
                   struct vision_fig *fig, char *err, size_t errlen)
{
    struct nib_exec e = {.v = v, .mem = mem, .qk = qk};
    struct nib_tool_team tt = {0};
    double *t = malloc(runs * sizeof *t);
    int rc = t ? 0 : nib_fail(err, errlen, "out of memory");
    if (!rc)
        rc = nib_tool_team_start(&tt, &e, workers, err, errlen);
    for (uint32_t i = 0; i < 2 && !rc; i++) {
        io_load(v, mem, 0, v->n_inputs, in);
        if (nib_exec_run(&e))
            rc = nib_fail(err, errlen, "the plan did not run");
    }
    double total = 0;
    for (uint32_t i = 0; i < runs && !rc; i++) {
        io_load(v, mem, 0, v->n_inputs, in);
        double a = bench_now();
        if (nib_exec_run(&e))
            rc = nib_fail(err, errlen, "the plan did not run");
        t[i] = bench_now() - a;
        total += t[i];
    }
    nib_tool_team_stop(&tt);
    if (!rc) {
        qsort(t, runs, sizeof *t, cmp_double);
        fig->workers = workers;
        fig->p50_ms = 1e3 * t[(runs - 1) / 2];
        fig->p99_ms = 1e3 * t[(uint32_t)ceil(0.99 * runs) - 1];
        fig->images_s = runs / total;
    }
    free(t);
    return rc;
}

enum { OPS_TOP = 12 };

/* --ops: runs passes on this thread, one worker, every op timed on its own
 * (a clock read between ops, tens of ns against ops of microseconds), after
 * one whole run whose outputs the op-by-op passes must leave bit for bit.
 * Each op's figure is its median over the passes; the rows group the ops
 * by opcode (a row's figure sums its ops' medians) and the heaviest ops
 * follow by name. */
static int vision_ops(const char *path, const struct nib_blob_view *v, uint8_t *mem,
                      const uint8_t *in, const struct nib_qkernels *qk, uint32_t runs, int json,
                      char *err, size_t errlen)
{
    const uint32_t n = v->h->n_ops;
    const uint64_t out_bytes = io_bytes(v, v->n_inputs, v->n_io);
    double *t = malloc((size_t)n * runs * sizeof *t), *med = malloc(n * sizeof *med);
    double *col = malloc(runs * sizeof *col);
    uint8_t *want = malloc(out_bytes + 1), *got = malloc(out_bytes + 1);
    uint32_t *top = malloc(n * sizeof *top);
    int rc = t && med && col && want && got && top ? 0 : nib_fail(err, errlen, "out of memory");
    struct nib_exec e = {.v = v, .mem = mem, .qk = qk};
    io_load(v, mem, 0, v->n_inputs, in);
    if (!rc && nib_exec_run(&e))
        rc = nib_fail(err, errlen, "the plan did not run");
    if (!rc)
        io_save(v, mem, v->n_inputs, v->n_io, want);
    uint8_t *ws = mem + v->h->wscratch_off;
    for (uint32_t r = 0; r < runs && !rc; r++) {
        io_load(v, mem, 0, v->n_inputs, in);
        double a = bench_now();
        for (uint32_t i = 0; i < n; i++) {
            nib_exec_op(qk, v, mem, ws, &v->ops[i], 1, 0, 0, 1);
            double b = bench_now();
            t[(size_t)i * runs + r] = (b - a) * 1e3;
            a = b;
        }
    }
    int equal = 0;
    if (!rc) {
        io_save(v, mem, v->n_inputs, v->n_io, got);
        equal = memcmp(want, got, out_bytes) == 0;
        for (uint32_t i = 0; i < n; i++) {
            memcpy(col, t + (size_t)i * runs, runs * sizeof *col);
            med[i] = bench_median(col, (int)runs);
            top[i] = i;
        }
        /* the heaviest first (a selection: OPS_TOP of them at most) */
        for (uint32_t a = 0; a < n && a < OPS_TOP; a++)
            for (uint32_t b = a + 1; b < n; b++)
                if (med[top[b]] > med[top[a]]) {
                    uint32_t x = top[a];
                    top[a] = top[b];
                    top[b] = x;
                }
        double total = 0;
        for (uint32_t i = 0; i < n; i++)
            total += med[i];
        if (json)
            printf("{\"model\": \"%s\", \"kind\": \"vision-ops\", \"runs\": %u, \"ops\": %u, "
                   "\"total_ms\": %.4f, \"outputs_equal\": %s, \"rows\": [",
                   path, runs, n, total, equal ? "true" : "false");
        else
            printf("%s: vision plan of %u ops, one worker, %u op-by-op runs (each op's median;\n"
                   "a row sums its ops'): %.3f ms\n  %-14s %5s %10s %7s\n",
                   path, n, runs, total, "kind", "ops", "ms", "share");
        int first = 1;
        for (uint32_t code = 0; code < 256; code++) {
            uint32_t count = 0;
            double ms = 0;
            for (uint32_t i = 0; i < n; i++)
                if (v->ops[i].code == code)
                    count++, ms += med[i];
            if (!count)
                continue;
            if (json)
                printf("%s{\"kind\": \"%s\", \"ops\": %u, \"ms\": %.4f}", first ? "" : ", ",
                       nib_vop_name(code), count, ms);
            else
                printf("  %-14s %5u %10.3f %6.1f%%\n", nib_vop_name(code), count, ms,
                       total > 0 ? 100 * ms / total : 0);
            first = 0;
        }
        if (json)
            printf("], \"top\": [");
        else
            printf("heaviest ops:\n  %5s %-14s %-28s %10s\n", "op", "kind", "tensor", "ms");
        for (uint32_t a = 0; a < n && a < OPS_TOP; a++) {
            const struct nib_op *op = &v->ops[top[a]];
            const char *tn = op->tensor < v->h->n_tensors ? v->tensors[op->tensor].name : "-";
            if (json)
                printf("%s{\"op\": %u, \"kind\": \"%s\", \"tensor\": \"%s\", \"ms\": %.4f}",
                       a ? ", " : "", top[a], nib_vop_name(op->code), tn, med[top[a]]);
            else
                printf("  %5u %-14s %-28.28s %10.3f\n", top[a], nib_vop_name(op->code), tn,
                       med[top[a]]);
        }
        if (json)
            printf("]}\n");
        else
            printf("  the op-by-op runs' outputs %s a whole run's\n",
                   equal ? "equal" : "DIFFER from");
        if (!equal)
            rc = nib_fail(err, errlen, "the op-by-op runs' outputs differ from a whole run's");
    }
    free(t);
    free(med);
    free(col);
    free(want);
    free(got);
    free(top);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: nib bench --model VISION.blob [--runs N] [--workers N] [--isa I] [--ops] "
               "[--json]\n"
               "  Per-image latency (p50, p99) and images/s of a vision blob's plan, run\n"
               "  on a team in this process as the appliance runs it: with 1 worker and\n"
               "  with N (default: every online CPU, at most the team's limit).\n"
               "  --ops: instead, one worker's time op by op (each op's median over the\n"
               "  runs), by kind of op and the heaviest ops by name.\n");
}

enum { O_MODEL = NIB_ARGS_OPT, O_RUNS, O_WORKERS, O_ISA, O_OPS, O_JSON };

int nib_bench_vision_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {
        {"--model", O_MODEL, 1},
        {"--runs", O_RUNS, 1},
        {"--workers", O_WORKERS, 1},
        {"--isa", O_ISA, 1},
        {"--ops", O_OPS, 0},
        {"--json", O_JSON, 0},
        {NULL, 0, 0},
    };
    const char *path = NULL, *isa = NULL;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t runs = 50, all = ncpu < 1                      ? 1
                              : ncpu > NIB_TEAM_MAX_WORKERS ? NIB_TEAM_MAX_WORKERS
                                                            : (uint32_t)ncpu;
    int json = 0, ops = 0, o;
    struct nib_args a;
    nib_args_init(&a, "nib bench", argc, argv, opts, usage, NULL);
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        if (o == O_MODEL)
            path = a.value;
        else if (o == O_RUNS && nib_args_u32(&a, 1, 1000000, &runs))
            return 2;
        else if (o == O_WORKERS && nib_args_u32(&a, 1, NIB_TEAM_MAX_WORKERS, &all))
            return 2;
        else if (o == O_ISA)
            isa = a.value;
        else if (o == O_OPS)
            ops = 1;
        else if (o == O_JSON)
            json = 1;
    }
    if (o == NIB_ARGS_EXIT)
        return a.status;
    if (!path)
        return nib_args_fail(&a, "give the vision blob with --model BLOB");
    uint32_t have = nib_cpu_isa();
    const struct nib_qkernels *qk = nib_exec_kernels(have);
    if (isa) {
        uint32_t want = !strcmp(isa, "scalar") ? NIB_ISA_SCALAR
                        : !strcmp(isa, "avx2") ? NIB_ISA_AVX2
                        : !strcmp(isa, "neon") ? NIB_ISA_NEON_DOT
                                               : 0xffffffffu;
        qk = want == 0xffffffffu || (want && !(have & want)) ? NULL : nib_qkernels_get(want);
        if (!qk)
            return nib_args_fail(&a, "--isa %s: not in this build or on this CPU", isa);
    }

    char err[256];
    const uint8_t *buf;
    size_t size;
    if (nib_map_file(path, &buf, &size, err, sizeof err)) {
        fprintf(stderr, "nib bench: %s\n", err);
        return 1;
    }
    struct nib_blob_view v;
    uint8_t *mem = NULL;
    struct vision_fig fig[2];
    uint32_t n_fig = all > 1 ? 2 : 1;
    int rc = nib_blob_open(&v, buf, size, 1, err, sizeof err);
    if (!rc && v.h->model_kind != NIB_MODEL_VISION)
        rc = nib_fail(err, sizeof err, "not a vision blob");
    if (!rc && !(mem = aligned_alloc(4096, (v.mem_size + 4095) & ~4095ull)))
        rc = nib_fail(err, sizeof err, "out of memory for %llu bytes of runtime memory",
                      (unsigned long long)v.mem_size);
    uint8_t *in = NULL;
    if (!rc && !(in = malloc(io_bytes(&v, 0, v.n_inputs) + 1)))
        rc = nib_fail(err, sizeof err, "out of memory for the inputs");
    if (!rc) {
        memset(mem, 0, v.mem_size);
        fill_inputs(&v, mem);
        io_save(&v, mem, 0, v.n_inputs, in);
    }
    if (ops) /* instead of the latency figures */
        n_fig = 0;
    if (!rc && ops)
        rc = vision_ops(path, &v, mem, in, qk, runs, json, err, sizeof err);
    for (uint32_t k = 0; k < n_fig && !rc; k++)
        rc = measure(&v, mem, in, qk, k ? all : 1, runs, &fig[k], err, sizeof err);
    if (rc)
        fprintf(stderr, "nib bench: %s: %s\n", path, err);
    else if (json && !ops) {
        printf("{\"model\": \"%s\", \"kind\": \"vision\", \"runs\": %u, \"results\": [", path,
               runs);
        for (uint32_t k = 0; k < n_fig; k++)
            printf("%s{\"workers\": %u, \"p50_ms\": %.4f, \"p99_ms\": %.4f, \"images_s\": %.3f}",
                   k ? ", " : "", fig[k].workers, fig[k].p50_ms, fig[k].p99_ms, fig[k].images_s);
        printf("]}\n");
    } else if (!ops) {
        printf("%s: vision plan of %u ops, %u runs each\n", path, v.h->n_ops, runs);
        printf("%8s %10s %10s %10s\n", "workers", "p50 ms", "p99 ms", "images/s");
        for (uint32_t k = 0; k < n_fig; k++)
            printf("%8u %10.3f %10.3f %10.2f\n", fig[k].workers, fig[k].p50_ms, fig[k].p99_ms,
                   fig[k].images_s);
    }
    free(in);
    free(mem);
    nib_unmap_file(buf, size);
    return rc ? 1 : 0;
}

/* Whether path names a vision blob (only its header read). */
int nib_bench_is_vision(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct nib_blob_header h;
    int yes = f && fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, NIB_BLOB_MAGIC, 8) &&
              h.model_kind == NIB_MODEL_VISION;
    if (f)
        fclose(f);
    return yes;
}
