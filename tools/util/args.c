#include "tools/util/args.h"

#include <stdarg.h>
#include <string.h>

#include "model_blob/blob_format.h"
#include "tools/util/tool_util.h"

#ifndef NIB_VERSION
#error "NIB_VERSION (the meson project version) is passed by tools/meson.build"
#endif

void nib_print_version(FILE *f)
{
    fprintf(f, "nib %s (blob format %u)\n", NIB_VERSION, (unsigned)NIB_BLOB_VERSION);
}

void nib_args_init(struct nib_args *a, const char *cmd, int argc, char **argv,
                   const struct nib_opt *opts, void (*usage)(FILE *f), const char **operand)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->argc = argc;
    a->argv = argv;
    a->opts = opts;
    a->usage = usage;
    a->operand = operand;
}

static int usage_error(struct nib_args *a, const char *fmt, const char *what)
{
    fprintf(stderr, "%s: ", a->cmd);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    if (a->usage)
        a->usage(stderr);
    a->status = 2;
    return NIB_ARGS_EXIT;
}

int nib_args_next(struct nib_args *a)
{
    a->opt = a->value = NULL;
    while (++a->i < a->argc) {
        const char *s = a->argv[a->i];
        if (a->operands_only || s[0] != '-' || s[1] == 0) {
            if (!a->operand || *a->operand)
                return usage_error(a, "unexpected argument '%s'", s);
            *a->operand = s;
            continue;
        }
        if (!strcmp(s, "--")) {
            a->operands_only = 1;
            continue;
        }
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            if (a->usage)
                a->usage(stdout);
            a->status = 0;
            return NIB_ARGS_EXIT;
        }
        if (!strcmp(s, "--version")) {
            nib_print_version(stdout);
            a->status = 0;
            return NIB_ARGS_EXIT;
        }
        size_t n = strcspn(s, "=");
        const struct nib_opt *o = a->opts;
        while (o && o->name && (strlen(o->name) != n || strncmp(o->name, s, n)))
            o++;
        if (!o || !o->name)
            return usage_error(a, "unknown option '%s'", s);
        a->opt = o->name;
        if (!o->has_value) {
            if (s[n])
                return usage_error(a, "%s takes no value", o->name);
        } else if (s[n]) {
            a->value = s + n + 1;
        } else if (a->i + 1 < a->argc) {
            a->value = a->argv[++a->i];
        } else {
            return usage_error(a, "%s needs a value", o->name);
        }
        return o->id;
    }
    return NIB_ARGS_END;
}

int nib_args_u32(struct nib_args *a, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint32_t v;
    if (nib_parse_u32(a->value, hi, &v) || v < lo)
        return nib_args_fail(a, "%s wants %u..%u, not '%s'", a->opt, lo, hi, a->value);
    *out = v;
    return 0;
}

int nib_args_u64(struct nib_args *a, uint64_t *out)
{
    if (nib_parse_u64(a->value, out))
        return nib_args_fail(a, "%s wants an unsigned 64-bit integer, not '%s'", a->opt, a->value);
    return 0;
}

int nib_args_f32(struct nib_args *a, float lo, float hi, float *out)
{
    float v;
    if (nib_parse_f32(a->value, &v) || !(v >= lo && v <= hi))
        return nib_args_fail(a, "%s wants a number in %g..%g, not '%s'", a->opt, (double)lo,
                             (double)hi, a->value);
    *out = v;
    return 0;
}

int nib_args_missing(const struct nib_args *a)
{
    if (a->usage)
        a->usage(stderr);
    return 2;
}

int nib_args_fail(const struct nib_args *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", a->cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

void nib_args_note(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: note: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
