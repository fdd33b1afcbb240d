/* Counting this process's open descriptors, for the tests that check that
 * nothing a conversation received or made outlives it. Header-only: the
 * Check suites, the protocol host and the fuzz targets (built apart, by
 * build-fuzzers.sh) all include it. */
#ifndef NIB_TEST_FDS_H
#define NIB_TEST_FDS_H

#include <dirent.h>

/* The entries of /proc/self/fd (the directory's own descriptor, ".", ".."
 * included: a constant), or -1 when it cannot be read. */
static inline int tu_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

#endif
