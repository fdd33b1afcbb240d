/* Fuzz target: nib-init's splitting of /etc/nibble/appliance.args
 * (boot/init/args_file.c) on arbitrary bytes.
 *
 *   - argv[0] is the program, argv[n] is NULL, n < max;
 *   - every argument is non-empty, holds no newline and lies inside the
 *     buffer;
 *   - with room for all of them, the arguments are exactly the non-empty
 *     lines of the text before its first NUL, in order.
 *
 * Any violated invariant aborts. */
#include <stdlib.h>
#include <string.h>

#include "boot/init/args_file.h"
#include "tests/fuzz/fuzz.h"

#define MAX 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1), *copy = malloc(size + 1);
    FUZZ_ASSERT(buf && copy);
    memcpy(buf, data, size);
    memcpy(copy, data, size);
    copy[size] = 0;
    char *argv[MAX];
    int n = nib_init_split_args(buf, size, "/appliance", argv, MAX);
    FUZZ_ASSERT(n >= 1 && n < MAX);
    FUZZ_ASSERT(!strcmp(argv[0], "/appliance") && argv[n] == NULL);
    for (int i = 1; i < n; i++) {
        FUZZ_ASSERT(argv[i] >= buf && argv[i] < buf + size);
        FUZZ_ASSERT(argv[i][0] != 0 && !strchr(argv[i], '\n'));
    }
    /* the reference: non-empty lines of the text up to its first NUL */
    int want = 1, i = 1;
    for (char *p = copy, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len) {
            if (want < MAX - 1 && i < n) {
                FUZZ_ASSERT(strlen(argv[i]) == len && !memcmp(argv[i], p, len));
                i++;
            }
            want++;
        }
        if (!nl)
            break;
    }
    FUZZ_ASSERT(n == (want < MAX - 1 ? want : MAX - 1));
    free(buf);
    free(copy);
    return 0;
}
