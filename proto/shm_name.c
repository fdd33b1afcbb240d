#include "proto/shm_name.h"

#include <stdio.h>
#include <string.h>

#include "proto/shm_layout.h"

int nib_shm_path(const char *name, char *path, size_t cap, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (n == 0 || n > NIB_SHM_NAME_MAX - 8) {
        snprintf(err, errlen, "segment name must be 1..%d characters", NIB_SHM_NAME_MAX - 8);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-' || c == '.';
        if (!ok || (i == 0 && c == '.')) {
            snprintf(err, errlen, "segment name '%s' may only hold letters, digits, '_', '-', '.'", name);
            return -1;
        }
    }
    if ((size_t)snprintf(path, cap, "/nibble-%s", name) >= cap) {
        snprintf(err, errlen, "segment name too long");
        return -1;
    }
    return 0;
}
