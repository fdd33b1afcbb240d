/* nib image (docs/appliance.md): the pieces shared by the boot image
 * (image.c) and the flashable disk (image_disk.c). */
#ifndef NIB_CLI_IMAGE_H
#define NIB_CLI_IMAGE_H

#include <stddef.h>

/* Run argv[0] (searched on PATH) with argv, wait; stdout into out (out_cap
 * bytes, NUL-terminated; NULL: inherited). 0 when it exits 0, else -1 with
 * a message naming the program and how it ended. */
int nib_image_run(char *const argv[], char *out, size_t out_cap, char *err, size_t errlen);

/* A GPT disk at disk_path with one EFI system partition holding
 * EFI/BOOT/BOOTX64.EFI, a unified kernel image made by objcopy from stub,
 * kernel, initramfs and cmdline. work: a folder for the intermediate files. */
int nib_image_disk(const char *disk_path, const char *work, const char *stub, const char *kernel,
                   const char *initramfs, const char *cmdline, char *err, size_t errlen);

#endif
