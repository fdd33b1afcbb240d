/* blob_seeds DIR: every blob head seed in DIR (a name ending in
 * "-head.blob") must pass the validator as fuzz_blob takes it: zero-extended
 * to the blob_size its header claims, checksum not checked. A seed the
 * validator refuses (a blob format change that left the corpus behind)
 * stops at the header, so fuzz_blob and its replay would exercise nothing
 * past it and still pass; this test fails instead, naming the seed and the
 * validator's reason. Remaking the seeds: tests/fuzz/README.md. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "tests/fuzz/fuzz.h"

#define EXPAND_MAX (16u << 20) /* as fuzz_blob.c */
#define SUFFIX "-head.blob"

/* 0 when the head at path opens; -1 with a message. */
static int seed_opens(const char *path)
{
    size_t size;
    uint8_t *b = fuzz_read_file(path, &size);
    if (!b) {
        fprintf(stderr, "%s: cannot read\n", path);
        return -1;
    }
    uint64_t claimed = 0;
    if (size >= sizeof(struct nib_blob_header))
        memcpy(&claimed, b + offsetof(struct nib_blob_header, blob_size), 8);
    if (claimed <= size || claimed > EXPAND_MAX) {
        fprintf(stderr,
                "%s: not a blob head (%zu bytes, blob_size %llu; fuzz_blob expands up to %u)\n",
                path, size, (unsigned long long)claimed, EXPAND_MAX);
        free(b);
        return -1;
    }
    uint8_t *buf = aligned_alloc(64, ((size_t)claimed + 63) & ~(size_t)63);
    if (!buf) {
        free(b);
        return -1;
    }
    memset(buf, 0, (size_t)claimed);
    memcpy(buf, b, size);
    free(b);
    struct nib_blob_view v;
    char err[256] = "";
    int rc = nib_blob_open(&v, buf, claimed, 0, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s: the validator refuses it: %s\n", path, err);
    free(buf);
    return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: blob_seeds CORPUS_DIR\n");
        return 2;
    }
    struct dirent **ents;
    int k = scandir(argv[1], &ents, NULL, alphasort);
    if (k < 0) {
        fprintf(stderr, "blob_seeds: cannot read %s\n", argv[1]);
        return 1;
    }
    int n = 0, bad = 0;
    for (int j = 0; j < k; j++) {
        const char *name = ents[j]->d_name;
        size_t len = strlen(name), sl = strlen(SUFFIX);
        if (len > sl && strcmp(name + len - sl, SUFFIX) == 0) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[1], name);
            bad += seed_opens(path) != 0;
            n++;
        }
        free(ents[j]);
    }
    free(ents);
    if (n == 0) {
        fprintf(stderr, "blob_seeds: no *%s seeds in %s\n", SUFFIX, argv[1]);
        return 1;
    }
    printf("%d blob head seeds, %d refused (blob format %u)\n", n, bad, NIB_BLOB_VERSION);
    return bad ? 1 : 0;
}
