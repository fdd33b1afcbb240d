/* A writer of the "newc" cpio format (070701), the one the Linux kernel
 * unpacks as an initramfs: directories, regular files (copied from a path
 * or given as bytes) and device nodes, ended by the TRAILER!!! entry. Only
 * what a boot image needs: no hard links, uid/gid 0, mtime 0 (so the same
 * inputs give the same bytes). */
#ifndef NIB_CPIO_NEWC_H
#define NIB_CPIO_NEWC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct nib_cpio {
    FILE *f;
    uint64_t off; /* bytes written: every header and body is 4-aligned */
    uint32_t ino;
    int failed;
    char err[256];
};

void nib_cpio_begin(struct nib_cpio *c, FILE *f);
/* name: the path inside the archive, without a leading '/'. */
void nib_cpio_dir(struct nib_cpio *c, const char *name, uint32_t mode);
void nib_cpio_bytes(struct nib_cpio *c, const char *name, uint32_t mode, const void *data,
                    size_t len);
void nib_cpio_file(struct nib_cpio *c, const char *name, uint32_t mode, const char *src_path);
void nib_cpio_chardev(struct nib_cpio *c, const char *name, uint32_t mode, uint32_t major,
                      uint32_t minor);
/* The trailer; 0, or -1 with the first failure in c->err. */
int nib_cpio_end(struct nib_cpio *c);

#endif
