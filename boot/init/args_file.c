/* appliance.args splitting (args_file.h). */
#include "boot/init/args_file.h"

#include <string.h>

int nib_init_split_args(char *buf, size_t len, const char *program, char **argv, int max)
{
    int n = 0;
    if (max < 2)
        return 0;
    argv[n++] = (char *)program;
    buf[len] = 0;
    for (char *p = buf; *p && n < max - 1;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = 0;
        if (*p)
            argv[n++] = p;
        if (!nl)
            break;
        p = nl + 1;
    }
    argv[n] = NULL;
    return n;
}
