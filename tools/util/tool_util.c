#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/util/tool_util.h"

int nib_vfail(char *err, size_t errlen, const char *fmt, va_list ap)
{
    vsnprintf(err, errlen, fmt, ap);
    return -1;
}

int nib_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nib_vfail(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

const char *nib_show(const char *s, size_t n, char out[72])
{
    size_t i;
    for (i = 0; i < n && i < 64; i++)
        out[i] = (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f ? s[i] : '?';
    if (n > 64)
        out[i++] = '.', out[i++] = '.', out[i++] = '.';
    out[i] = 0;
    return out;
}

int nib_map_file(const char *path, const uint8_t **data, size_t *size, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "'%s' is not a regular file", path);
        close(fd);
        return -1;
    }
    *size = (size_t)st.st_size;
    if (*size == 0) {
        /* mmap refuses empty files; an empty buffer still goes through the
         * same validation (and fails there with a clear message). */
        static const uint8_t empty[64] __attribute__((aligned(64)));
        *data = empty;
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "cannot map '%s': %s", path, strerror(errno));
        return -1;
    }
    *data = p;
    return 0;
}

void nib_unmap_file(const uint8_t *data, size_t size)
{
    if (size)
        munmap((void *)data, size);
}

int nib_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9') /* strtoull would take " 5", "+5" and "-5" */
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int nib_parse_u32(const char *s, uint32_t max, uint32_t *out)
{
    uint64_t v;
    if (nib_parse_u64(s, &v) || v > max)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int nib_parse_f32(const char *s, float *out)
{
    char *end;
    if (!s || !*s)
        return -1;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}
