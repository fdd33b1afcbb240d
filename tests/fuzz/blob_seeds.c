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
#include "tests/fuzz/blob_expand.h"
#include "tests/fuzz/fuzz.h"

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
    size_t n;
    int expanded;
    uint8_t *buf = fuzz_blob_expand(b, size, &n, &expanded);
    free(b);
    if (!buf || !expanded) {
        fprintf(stderr, "%s: not a blob head fuzz_blob would zero-extend (%zu bytes)\n", path,
                size);
        free(buf);
        return -1;
    }
    struct nib_blob_view v;
    char err[256] = "";
    int rc = nib_blob_open(&v, buf, n, 0, err, sizeof err);
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
