/* Fuzz target: chat templates. The bytes are compiled as a Jinja template
 * (tools/compiler/chat_compile.c); a program the compiler emits must pass
 * nib_chat_check and render a fixed conversation without a crash (an error
 * is fine and must say something). The same bytes are also given to
 * nib_chat_check as a program from a hostile blob, and rendered when it
 * accepts them. */
#include <stdlib.h>
#include <string.h>

#include "rt/chat/chat.h"
#include "tests/fuzz/fuzz.h"
#include "tools/compiler/chat_compile.h"

#define OUT_CAP 4096

static const struct nib_chat_message conv[] = {
    {(const uint8_t *)"system", (const uint8_t *)" Be brief. ", 6, 11},
    {(const uint8_t *)"user", (const uint8_t *)"Hi \xc3\xa9 <|im_end|>", 4, 17},
    {(const uint8_t *)"assistant", (const uint8_t *)"", 9, 0},
    {(const uint8_t *)"user", (const uint8_t *)"\xff\xfe bad utf-8 \xf0\x9f\x98", 4, 16},
};

static void render(const uint8_t *prog, size_t len)
{
    static uint8_t out[OUT_CAP], taint[OUT_CAP];
    size_t scratch_size = nib_chat_scratch_footprint(256, OUT_CAP);
    void *scratch = malloc(scratch_size);
    FUZZ_ASSERT(scratch != NULL);
    struct nib_chat_args a = {conv, 4, 1, (const uint8_t *)"<s>", NULL, 3, 0, 1764460800};
    size_t out_len = 0;
    char err[256];
    if (nib_chat_render(prog, len, &a, scratch, scratch_size, out, taint, OUT_CAP, &out_len, err,
                        sizeof err) == 0)
        FUZZ_ASSERT(out_len <= OUT_CAP);
    else
        FUZZ_ASSERT(out_len == 0);
    free(scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so that any over-read is caught */
    uint8_t *buf = malloc(size ? size : 1);
    FUZZ_ASSERT(buf != NULL);
    if (size)
        memcpy(buf, data, size);
    char err[256];
    if (nib_chat_check(buf, size, err, sizeof err) == 0)
        render(buf, size);
    else
        FUZZ_ASSERT(err[0] != 0);

    uint8_t *prog = NULL;
    size_t len = 0;
    if (nib_chat_compile((const char *)buf, size, &prog, &len, err, sizeof err) == 0) {
        FUZZ_ASSERT(prog != NULL);
        FUZZ_ASSERT(nib_chat_check(prog, len, err, sizeof err) == 0);
        render(prog, len);
        free(prog);
    } else {
        FUZZ_ASSERT(prog == NULL && err[0] != 0);
    }
    free(buf);
    return 0;
}
