/* The command-line conventions every nib subcommand follows, in one place:
 *   - options and operands in any order; a value follows its option as the
 *     next argument or after '=' (--seed=7);
 *   - "--" ends the options: every argument after it is an operand, even one
 *     that starts with '-' (nib ask -- "-x"); a lone "-" is an operand too;
 *   - --help / -h: the usage on stdout, exit 0;
 *   - --version: one line, the nibble version and the blob format it writes,
 *     exit 0;
 *   - an unknown option, a missing or malformed value, a stray operand: one
 *     line on stderr naming it (and the usage), exit 2.
 * A front end loops over nib_args_next() while it returns option ids; every
 * nib command takes at most one operand, which the parser stores itself. */
#ifndef NIB_ARGS_H
#define NIB_ARGS_H

#include <stdint.h>
#include <stdio.h>

struct nib_opt {
    const char *name; /* "--seed", "-o"; a NULL name ends the table */
    int id;           /* NIB_ARGS_OPT or more: what nib_args_next returns */
    int has_value;    /* 1: takes a value */
};

/* What nib_args_next returns besides an option's id. */
enum {
    NIB_ARGS_EXIT = -1, /* return a.status (help or version shown, or an error reported) */
    NIB_ARGS_END = 0,   /* every argument seen */
    NIB_ARGS_OPT = 1,   /* the first option id */
};

struct nib_args {
    const char *cmd; /* "nib ask": the prefix of every message */
    int argc;
    char **argv;
    const struct nib_opt *opts;
    void (*usage)(FILE *f);
    const char **operand; /* where the one operand goes; NULL: none is taken */
    int i, operands_only;
    const char *opt;   /* the option just returned, as its table names it */
    const char *value; /* its value */
    int status;        /* the exit status after NIB_ARGS_EXIT */
};

/* argv[0] is the subcommand's name; parsing starts at argv[1]. A second
 * operand, or one where operand is NULL, is a usage error. */
void nib_args_init(struct nib_args *a, const char *cmd, int argc, char **argv,
                   const struct nib_opt *opts, void (*usage)(FILE *f), const char **operand);
int nib_args_next(struct nib_args *a);

/* The value of the option just returned, checked: 0, or 2 (the exit status
 * of a usage error) after a message naming the option, the range and what
 * was given. */
int nib_args_u32(struct nib_args *a, uint32_t lo, uint32_t hi, uint32_t *out);
int nib_args_u64(struct nib_args *a, uint64_t *out);
int nib_args_f32(struct nib_args *a, float lo, float hi, float *out);

/* The usage on stderr (an operand is missing); returns 2. */
int nib_args_missing(const struct nib_args *a);
/* "CMD: MESSAGE" on stderr; returns 2. */
int nib_args_fail(const struct nib_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "CMD: MESSAGE" on stderr for an option that is clamped or ignored: the
 * run goes on, but never silently differs from what was asked. */
void nib_args_note(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "nib VERSION (blob format N)" on f, N being the format nib writes. */
void nib_print_version(FILE *f);

#endif
