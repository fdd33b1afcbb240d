/* The flashable disk of `nib image --disk` (docs/appliance.md), made
 * without root or loop devices:
 *   1. the unified kernel image: objcopy adds .osrel, .cmdline, .linux and
 *      .initrd sections to systemd-boot's EFI stub (Debian 12 has no ukify);
 *   2. a FAT32 file system in a plain file (mkfs.fat -C) and the UKI copied
 *      in as EFI/BOOT/BOOTX64.EFI (mtools: mmd, mcopy), the path firmware
 *      boots from removable media;
 *   3. the disk: 1 MiB, the ESP, 1 MiB for the backup GPT; sfdisk writes the
 *      GPT into the file and the ESP is copied in at 1 MiB. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/cli/image.h"
#include "tools/util/tool_util.h"

#define MIB (1024ull * 1024ull)
/* The stub's own sections end well below these (systemd 252's stub is
 * ~100 KiB); .initrd goes last so it may be of any size. */
#define VMA_OSREL "0x20000"
#define VMA_CMDLINE "0x30000"
#define VMA_LINUX "0x2000000"

static int write_text(const char *path, const char *text, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f))
        return nib_fail(err, errlen, "%s: %s", path, strerror(errno));
    return 0;
}

static int64_t file_size(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st))
        return nib_fail(err, errlen, "%s: %s", path, strerror(errno));
    return (int64_t)st.st_size;
}

/* Copy src into dst at offset, dst left otherwise as it is. */
static int copy_at(const char *src, const char *dst, uint64_t offset, char *err, size_t errlen)
{
    int in = open(src, O_RDONLY | O_CLOEXEC), out = open(dst, O_WRONLY | O_CLOEXEC);
    int rc = 0;
    if (in < 0 || out < 0) {
        rc = nib_fail(err, errlen, "%s: %s", in < 0 ? src : dst, strerror(errno));
    } else {
        static char buf[1 << 20];
        ssize_t n;
        off_t at = (off_t)offset;
        while ((n = read(in, buf, sizeof buf)) > 0) {
            if (pwrite(out, buf, (size_t)n, at) != n) {
                rc = nib_fail(err, errlen, "writing %s: %s", dst, strerror(errno));
                break;
            }
            at += n;
        }
        if (n < 0)
            rc = nib_fail(err, errlen, "reading %s: %s", src, strerror(errno));
    }
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) && !rc)
        rc = nib_fail(err, errlen, "%s: %s", dst, strerror(errno));
    return rc;
}

int nib_image_disk(const char *disk_path, const char *work, const char *stub, const char *kernel,
                   const char *initramfs, const char *cmdline, char *err, size_t errlen)
{
    char osrel[4096], cmdf[4096], uki[4096], esp[4096];
    snprintf(osrel, sizeof osrel, "%s/os-release", work);
    snprintf(cmdf, sizeof cmdf, "%s/cmdline", work);
    snprintf(uki, sizeof uki, "%s/BOOTX64.EFI", work);
    snprintf(esp, sizeof esp, "%s/esp.fat", work);
    if (access(stub, R_OK))
        return nib_fail(err, errlen,
                        "EFI stub %s: %s (Debian: apt-get install systemd-boot-efi, or give "
                        "--efi-stub FILE)",
                        stub, strerror(errno));
    if (write_text(osrel, "NAME=nibble\nID=nibble\nPRETTY_NAME=\"nibble appliance\"\n", err,
                   errlen) ||
        write_text(cmdf, cmdline, err, errlen))
        return -1;

    /* 1. the UKI; .initrd after .linux, rounded up to 2 MiB */
    int64_t ksize = file_size(kernel, err, errlen);
    if (ksize < 0)
        return -1;
    char vma_initrd[32], a_osrel[4200], a_cmd[4200], a_linux[4200], a_initrd[4200];
    snprintf(vma_initrd, sizeof vma_initrd, "0x%llx",
             (unsigned long long)((0x2000000ull + (uint64_t)ksize + 4 * MIB) & ~(2 * MIB - 1)));
    snprintf(a_osrel, sizeof a_osrel, ".osrel=%s", osrel);
    snprintf(a_cmd, sizeof a_cmd, ".cmdline=%s", cmdf);
    snprintf(a_linux, sizeof a_linux, ".linux=%s", kernel);
    snprintf(a_initrd, sizeof a_initrd, ".initrd=%s", initramfs);
    char c_osrel[64], c_cmd[64], c_linux[64], c_initrd[64];
    snprintf(c_osrel, sizeof c_osrel, ".osrel=%s", VMA_OSREL);
    snprintf(c_cmd, sizeof c_cmd, ".cmdline=%s", VMA_CMDLINE);
    snprintf(c_linux, sizeof c_linux, ".linux=%s", VMA_LINUX);
    snprintf(c_initrd, sizeof c_initrd, ".initrd=%s", vma_initrd);
    char *objcopy[] = {"objcopy", "--add-section", a_osrel,  "--change-section-vma",
                       c_osrel,   "--add-section", a_cmd,    "--change-section-vma",
                       c_cmd,     "--add-section", a_linux,  "--change-section-vma",
                       c_linux,   "--add-section", a_initrd, "--change-section-vma",
                       c_initrd,  (char *)stub,    uki,      NULL};
    if (nib_image_run(objcopy, NULL, 0, err, errlen))
        return -1;

    /* 2. the ESP: room for the UKI and 8 MiB, at least 64 MiB (FAT32's
     * smallest comfortable size with 512-byte clusters) */
    int64_t usize = file_size(uki, err, errlen);
    if (usize < 0)
        return -1;
    uint64_t esp_bytes = ((uint64_t)usize * 11 / 10 + 8 * MIB + MIB - 1) & ~(MIB - 1);
    if (esp_bytes < 64 * MIB)
        esp_bytes = 64 * MIB;
    char kib[32];
    snprintf(kib, sizeof kib, "%llu", (unsigned long long)(esp_bytes / 1024));
    unlink(esp);
    char *mkfs[] = {"mkfs.fat", "-F", "32", "-n", "NIBBLE", "-C", esp, kib, NULL};
    char *mmd[] = {"mmd", "-i", esp, "::/EFI", "::/EFI/BOOT", NULL};
    char esp_dst[] = "::/EFI/BOOT/BOOTX64.EFI";
    char *mcopy[] = {"mcopy", "-i", esp, uki, esp_dst, NULL};
    char quiet[256];
    if (nib_image_run(mkfs, quiet, sizeof quiet, err, errlen) ||
        nib_image_run(mmd, NULL, 0, err, errlen) || nib_image_run(mcopy, NULL, 0, err, errlen))
        return -1;

    /* 3. the GPT disk */
    uint64_t disk_bytes = MIB + esp_bytes + MIB;
    int fd = open(disk_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)disk_bytes) || close(fd))
        return nib_fail(err, errlen, "%s: %s", disk_path, strerror(errno));
    char layout[256];
    snprintf(layout, sizeof layout, "%s/layout.sfdisk", work);
    char text[512];
    snprintf(text, sizeof text,
             "label: gpt\nstart=2048, size=%llu, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, "
             "name=\"nibble\"\n",
             (unsigned long long)(esp_bytes / 512));
    if (write_text(layout, text, err, errlen))
        return -1;
    /* sfdisk reads the layout from stdin: through a shell, the one place
     * a redirection is needed; both paths are ours (quoted). */
    char script[8400];
    snprintf(script, sizeof script, "exec sfdisk -q --no-reread --no-tell-kernel \"$1\" < \"$2\"");
    char *sfdisk[] = {"sh", "-c", script, "sh", (char *)disk_path, layout, NULL};
    char out[1024];
    if (nib_image_run(sfdisk, out, sizeof out, err, errlen))
        return -1;
    if (copy_at(esp, disk_path, MIB, err, errlen))
        return -1;
    unlink(esp);
    unlink(uki);
    unlink(osrel);
    unlink(cmdf);
    unlink(layout);
    return 0;
}
