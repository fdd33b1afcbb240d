/* The appliance's arguments in a boot image: /etc/nibble/appliance.args,
 * written by `nib image`, one argument per line (docs/appliance.md). */
#ifndef NIB_INIT_ARGS_FILE_H
#define NIB_INIT_ARGS_FILE_H

#include <stddef.h>

/* Split buf[0..len) in place into argv[1..]: every non-empty line is one
 * argument (a NUL byte ends the text). argv[0] = program; argv is
 * NULL-terminated; at most max - 1 entries in all (more lines are dropped).
 * buf must have room for len + 1 bytes. Returns the argument count, program
 * included. */
int nib_init_split_args(char *buf, size_t len, const char *program, char **argv, int max);

#endif
