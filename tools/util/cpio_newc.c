/* newc cpio writer (cpio_newc.h). Format: a 110-byte ASCII header of
 * "070701" and 13 eight-digit hex fields, the NUL-terminated name, padding
 * to 4 bytes, the body, padding to 4 bytes. */
#include "tools/util/cpio_newc.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

static void fail(struct nib_cpio *c, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

static void put(struct nib_cpio *c, const void *p, size_t n)
{
    if (c->failed || n == 0)
        return;
    if (fwrite(p, 1, n, c->f) != n)
        fail(c, "writing the archive: %s", strerror(errno));
    c->off += n;
}

static void pad4(struct nib_cpio *c)
{
    static const char zero[4];
    put(c, zero, (size_t)((4 - (c->off & 3)) & 3));
}

static void header(struct nib_cpio *c, const char *name, uint32_t mode, uint64_t size,
                   uint32_t rmajor, uint32_t rminor)
{
    if (size > 0xffffffffull) {
        fail(c, "%s: %llu bytes is more than newc cpio holds (4 GiB - 1)", name,
             (unsigned long long)size);
        return;
    }
    size_t namesize = strlen(name) + 1;
    char h[111];
    snprintf(h, sizeof h, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ++c->ino,
             mode, 0u, 0u, (mode & S_IFMT) == S_IFDIR ? 2u : 1u, 0u, (uint32_t)size, 0u, 0u, rmajor,
             rminor, (uint32_t)namesize, 0u);
    put(c, h, 110);
    put(c, name, namesize);
    pad4(c);
}

void nib_cpio_begin(struct nib_cpio *c, FILE *f)
{
    memset(c, 0, sizeof *c);
    c->f = f;
}

void nib_cpio_dir(struct nib_cpio *c, const char *name, uint32_t mode)
{
    header(c, name, S_IFDIR | (mode & 07777), 0, 0, 0);
}

void nib_cpio_bytes(struct nib_cpio *c, const char *name, uint32_t mode, const void *data,
                    size_t len)
{
    header(c, name, S_IFREG | (mode & 07777), len, 0, 0);
    put(c, data, len);
    pad4(c);
}

void nib_cpio_file(struct nib_cpio *c, const char *name, uint32_t mode, const char *src_path)
{
    if (c->failed)
        return;
    FILE *in = fopen(src_path, "rb");
    struct stat st;
    if (!in || fstat(fileno(in), &st) || !S_ISREG(st.st_mode)) {
        fail(c, "%s: %s", src_path, in ? "not a regular file" : strerror(errno));
        if (in)
            fclose(in);
        return;
    }
    header(c, name, S_IFREG | (mode & 07777), (uint64_t)st.st_size, 0, 0);
    char buf[1 << 16];
    uint64_t left = (uint64_t)st.st_size;
    while (left && !c->failed) {
        size_t n = fread(buf, 1, left < sizeof buf ? (size_t)left : sizeof buf, in);
        if (n == 0) {
            fail(c, "%s: shorter than its size while copying", src_path);
            break;
        }
        put(c, buf, n);
        left -= n;
    }
    fclose(in);
    pad4(c);
}

void nib_cpio_chardev(struct nib_cpio *c, const char *name, uint32_t mode, uint32_t major,
                      uint32_t minor)
{
    header(c, name, S_IFCHR | (mode & 07777), 0, major, minor);
}

int nib_cpio_end(struct nib_cpio *c)
{
    header(c, "TRAILER!!!", 0, 0, 0, 0);
    if (!c->failed && fflush(c->f))
        fail(c, "writing the archive: %s", strerror(errno));
    return c->failed ? -1 : 0;
}
