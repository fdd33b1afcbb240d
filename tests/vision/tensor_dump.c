/* A test helper: one input file through tools/util/tensor_file into an io
 * record [1, C, H, W] of the given dtype, written back as .npy.
 *
 *   tensor_dump FILE OUT.npy f32|u8 C H W [bgr]
 *
 * Exit 0, or 1 with the reader's message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/util/tensor_file.h"

int main(int argc, char **argv)
{
    if (argc < 7 || argc > 8) {
        fprintf(stderr, "usage: tensor_dump FILE OUT.npy f32|u8 C H W [bgr]\n");
        return 2;
    }
    struct nib_io_rec r;
    memset(&r, 0, sizeof r);
    strcpy(r.name, "x");
    r.dtype = strcmp(argv[3], "u8") ? NIB_IO_F32 : NIB_IO_U8;
    r.rank = 4;
    r.dims[0] = 1;
    for (int d = 1; d < 4; d++)
        r.dims[d] = (uint32_t)strtoul(argv[3 + d], NULL, 10);
    r.bytes = (r.dtype == NIB_IO_F32 ? 4ull : 1ull) * r.dims[1] * r.dims[2] * r.dims[3];
    unsigned flags = argc == 8 && !strcmp(argv[7], "bgr") ? NIB_TF_BGR : 0;
    uint8_t *buf = malloc(r.bytes ? r.bytes : 1);
    char err[512];
    if (!buf || nib_tensor_load(argv[1], flags, &r, buf, err, sizeof err) ||
        nib_npy_write(argv[2], &r, buf, err, sizeof err)) {
        fprintf(stderr, "tensor_dump: %s\n", buf ? err : "out of memory");
        free(buf);
        return 1;
    }
    free(buf);
    return 0;
}
