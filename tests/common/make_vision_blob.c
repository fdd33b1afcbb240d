/* make_vision_blob one|two OUT: write an identity vision blob
 * (tests/common/vision_blob.h) for the test appliances. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/vision_blob.h"

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "one") && strcmp(argv[1], "two"))) {
        fprintf(stderr, "usage: make_vision_blob one|two OUT\n");
        return 2;
    }
    uint8_t *buf = aligned_alloc(64, NIB_TEST_VISION_BLOB_SIZE);
    if (!buf)
        return 1;
    size_t n = nib_test_vision_blob(buf, strcmp(argv[1], "one") ? NIB_TEST_VISION_TWO
                                                                : NIB_TEST_VISION_ONE);
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "make_vision_blob: cannot write %s\n", argv[2]);
        return 1;
    }
    free(buf);
    return 0;
}
