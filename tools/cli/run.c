/* nib run: one run of a vision appliance's model (docs/ring.md section
 * 6.4): each --input file (.npy, raw bytes, PPM/PGM or PNG: tools/util/
 * tensor_file.h) decoded into the bytes the model's tensor table names,
 * sent as one TENSOR request through this host's
 * ring, and each output printed (name, dims, a summary), as JSON, or
 * written as .npy files. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "tools/host/nibhost.h"
#include "tools/util/args.h"
#include "tools/util/tensor_file.h"

#define RUN_INPUTS_MAX 16

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: nib run [--name NAME] --input FILE [--input FILE ...] [--bgr] [--json] [-o DIR]\n"
        "               [--timeout SECONDS]\n"
        "  Runs a vision appliance's model once on the given input tensors.\n"
        "  --input FILE  one per model input, in the model's order: a .npy file (float32\n"
        "                or uint8, C order, the input's dims), a PPM/PGM or PNG image\n"
        "                (exactly HxW pixels for a 1x3xHxW or 1x1xHxW input; planar, u8 as\n"
        "                is, f32 as value/255) or raw bytes (exactly the input's bytes)\n"
        "  --bgr         images as B, G, R planes (PaddleOCR's models take BGR)\n"
        "  --json        print the outputs as JSON, every value included\n"
        "  -o DIR        write each output as DIR/NAME.npy\n"
        "  Prints one line per output: name, dims, min, max, mean.\n");
}

enum { O_NAME = NIB_ARGS_OPT, O_INPUT, O_JSON, O_OUT, O_TIMEOUT, O_BGR };

static const char *dtype_name(uint32_t t)
{
    return t == 1 ? "f32" : t == 2 ? "u8" : "?";
}

static void print_dims(FILE *f, const struct nib_tensor_info *t, const char *sep)
{
    for (uint32_t d = 0; d < t->rank; d++)
        fprintf(f, "%s%u", d ? sep : "", t->dims[d]);
}

static double value_at(const uint8_t *p, uint32_t dtype, size_t i)
{
    if (dtype == 2)
        return p[i];
    float v;
    memcpy(&v, p + 4 * i, 4);
    return v;
}

/* The io record tensor_file.h decodes into, from the appliance's table. */
static void io_rec_of(const struct nib_tensor_info *t, struct nib_io_rec *rec)
{
    memset(rec, 0, sizeof *rec);
    snprintf(rec->name, sizeof rec->name, "%s", t->name);
    rec->dtype = t->dtype;
    rec->rank = t->rank;
    for (uint32_t d = 0; d < t->rank && d < NIB_IO_MAX_RANK; d++)
        rec->dims[d] = t->dims[d];
    rec->bytes = t->bytes;
}

/* Input i's bytes from its file (.npy, raw, PPM/PGM or PNG: tensor_file.h)
 * into a new buffer *data, checked against the model's table: 0, or 1
 * after saying why. */
static int load_input(const char *path, const struct nib_tensor_info *t, uint32_t i, unsigned flags,
                      uint8_t **data)
{
    struct nib_io_rec rec;
    char err[512];
    io_rec_of(t, &rec);
    *data = malloc(t->bytes ? t->bytes : 1);
    if (!*data) {
        fprintf(stderr, "nib run: --input %s: out of memory\n", path);
        return 1;
    }
    if (nib_tensor_load(path, flags, &rec, *data, err, sizeof err)) {
        fprintf(stderr, "nib run: --input %s: input %u (%s) takes %s ", path, i, t->name,
                dtype_name(t->dtype));
        print_dims(stderr, t, "x");
        fprintf(stderr, " (%zu bytes): %s\n", t->bytes, err);
        return 1;
    }
    return 0;
}

static void print_summary(const struct nib_tensor_info *t, const uint8_t *p)
{
    size_t n = t->bytes / (t->dtype == 1 ? 4 : 1), nan = 0;
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (size_t k = 0; k < n; k++) {
        double v = value_at(p, t->dtype, k);
        if (isnan(v)) {
            nan++;
            continue;
        }
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
    }
    printf("%s %s ", t->name, dtype_name(t->dtype));
    print_dims(stdout, t, "x");
    if (n > nan)
        printf(": min %.6g max %.6g mean %.6g", lo, hi, sum / (double)(n - nan));
    if (nan)
        printf(" (%zu NaN)", nan);
    printf("\n");
}

static void print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(const struct nib_tensor_info *t, const uint8_t *p, int first)
{
    printf("%s{\"name\": ", first ? "" : ", ");
    print_json_string(t->name);
    printf(", \"dtype\": \"%s\", \"dims\": [", dtype_name(t->dtype));
    print_dims(stdout, t, ", ");
    printf("], \"data\": [");
    size_t n = t->bytes / (t->dtype == 1 ? 4 : 1);
    for (size_t k = 0; k < n; k++) {
        double v = value_at(p, t->dtype, k);
        if (t->dtype == 2)
            printf("%s%u", k ? ", " : "", (unsigned)v);
        else if (isfinite(v))
            printf("%s%.9g", k ? ", " : "", v);
        else
            printf("%snull", k ? ", " : ""); /* JSON has no NaN or infinity */
    }
    printf("]}");
}

/* DIR/NAME.npy (NAME with anything but [A-Za-z0-9_.-] as '_'). */
static int write_npy(const char *dir, const struct nib_tensor_info *t, const uint8_t *p)
{
    char name[80], path[4200], hdr[256];
    size_t k = 0;
    for (const char *s = t->name; *s && k < sizeof name - 1; s++, k++)
        name[k] = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                          (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || (*s == '.' && k > 0)
                      ? *s
                      : '_';
    name[k] = 0;
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     t->dtype == 1 ? "<f4" : "|u1");
    for (uint32_t d = 0; d < t->rank; d++)
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%u,%s", t->dims[d],
                      d + 1 < t->rank ? " " : "");
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
    size_t total = 10 + (size_t)n + 1, pad = (64 - total % 64) % 64;
    memset(hdr + n, ' ', pad);
    hdr[n + (int)pad] = '\n';
    uint16_t hlen = (uint16_t)(n + (int)pad + 1);
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)hlen, (uint8_t)(hlen >> 8)};
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(pre, 1, 10, f) != 10 || fwrite(hdr, 1, hlen, f) != hlen ||
        fwrite(p, 1, t->bytes, f) != t->bytes || fclose(f)) {
        fprintf(stderr, "nib run: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

int nib_run_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {
        {"--name", O_NAME, 1}, {"--input", O_INPUT, 1},     {"--json", O_JSON, 0},
        {"-o", O_OUT, 1},      {"--timeout", O_TIMEOUT, 1}, {"--bgr", O_BGR, 0},
        {NULL, 0, 0},
    };
    const char *name = NULL, *outdir = NULL, *inputs[RUN_INPUTS_MAX];
    uint32_t n_in = 0, timeout_s = 60;
    int json = 0, o;
    unsigned flags = 0;
    struct nib_args a;
    nib_args_init(&a, "nib run", argc, argv, opts, usage, NULL);
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        if (o == O_NAME)
            name = a.value;
        else if (o == O_INPUT) {
            if (n_in == RUN_INPUTS_MAX)
                return nib_args_fail(&a, "more than %d --input files", RUN_INPUTS_MAX);
            inputs[n_in++] = a.value;
        } else if (o == O_JSON)
            json = 1;
        else if (o == O_BGR)
            flags |= NIB_TF_BGR;
        else if (o == O_OUT)
            outdir = a.value;
        else if (o == O_TIMEOUT && nib_args_u32(&a, 1, 86400, &timeout_s))
            return 2;
    }
    if (o == NIB_ARGS_EXIT)
        return a.status;
    if (n_in == 0)
        return nib_args_fail(&a, "give the model's inputs with --input FILE");

    struct nib_host *h;
    int ms = (int)timeout_s * 1000;
    if (nib_host_attach(&h, name, ms) != NIB_HOST_OK) {
        fprintf(stderr, "nib run: %s\n", nib_host_error(h));
        nib_host_detach(h);
        return 1;
    }
    int rc = 1;
    uint8_t *files[RUN_INPUTS_MAX] = {0};
    const void *data[RUN_INPUTS_MAX];
    size_t lens[RUN_INPUTS_MAX];
    uint32_t want = nib_host_n_inputs(h);
    struct nib_req_handle r;
    struct nib_progress pr;
    if (!nib_host_is_vision(h)) {
        fprintf(stderr,
                "nib run: appliance %s serves a decoder (tokens in, tokens out): use nib ask\n",
                name ? name : "nib");
        goto out;
    }
    if (n_in != want) {
        fprintf(stderr, "nib run: %u --input files, the model takes %u inputs:", n_in, want);
        for (uint32_t i = 0; i < want; i++) {
            struct nib_tensor_info t;
            nib_host_tensor_info(h, 0, i, &t);
            fprintf(stderr, " %s (%s ", t.name, dtype_name(t.dtype));
            print_dims(stderr, &t, "x");
            fprintf(stderr, ")");
        }
        fprintf(stderr, "\n");
        goto out;
    }
    for (uint32_t i = 0; i < n_in; i++) {
        struct nib_tensor_info t;
        nib_host_tensor_info(h, 0, i, &t);
        if (load_input(inputs[i], &t, i, flags, &files[i]))
            goto out;
        data[i] = files[i];
        lens[i] = t.bytes;
    }
    if (nib_host_submit_tensors(h, data, lens, n_in, ms, &r) != NIB_HOST_OK ||
        nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, ms, &pr) != NIB_HOST_OK) {
        fprintf(stderr, "nib run: %s\n", nib_host_error(h));
        goto out;
    }
    if (pr.status != 1 /* NIB_ST_OK */) {
        fprintf(stderr, "nib run: the appliance answered %s%s%s\n", nib_status_name(pr.status),
                pr.error[0] ? ": " : "", pr.error);
        nib_host_release(h, &r);
        goto out;
    }
    rc = 0;
    if (json)
        printf("{\"status\": \"ok\", \"outputs\": [");
    for (uint32_t i = 0; i < nib_host_n_outputs(h); i++) {
        struct nib_tensor_info t;
        nib_host_tensor_info(h, 1, i, &t);
        const uint8_t *p = nib_host_output(h, &pr, i, NULL);
        if (!p) {
            fprintf(stderr, "nib run: output %u missing from the answer\n", i);
            rc = 1;
            break;
        }
        if (outdir && write_npy(outdir, &t, p))
            rc = 1;
        if (json)
            print_json(&t, p, i == 0);
        else
            print_summary(&t, p);
    }
    if (json)
        printf("]}\n");
    nib_host_release(h, &r);
out:
    for (uint32_t i = 0; i < n_in; i++)
        free(files[i]);
    nib_host_detach(h);
    return rc;
}
