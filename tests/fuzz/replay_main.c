/* Runs a fuzz target over files and folders of inputs, once each, with any
 * compiler (no libFuzzer): the committed corpora become regression tests in
 * the unit suite, under ASan+UBSan in the sanitizer build. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

static int run_file(const char *path)
{
    size_t size;
    uint8_t *b = fuzz_read_file(path, &size);
    if (!b) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    /* An exact-size copy, so reads past the end are caught. */
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, b, size);
    free(b);
    LLVMFuzzerTestOneInput(copy, size);
    free(copy);
    return 0;
}

int main(int argc, char **argv)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or folder: %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]))
                return 1;
            n++;
            continue;
        }
        struct dirent **ents;
        int k = scandir(argv[i], &ents, NULL, alphasort);
        for (int j = 0; j < k; j++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], ents[j]->d_name);
            if (ents[j]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                if (run_file(path))
                    return 1;
                n++;
            }
            free(ents[j]);
        }
        free(ents);
    }
    if (n == 0) {
        fprintf(stderr, "replay: no inputs\n");
        return 1;
    }
    printf("replayed %d inputs without a failure\n", n);
    return 0;
}
