/* nib chat-render: render a conversation with a chat template, the way the
 * appliance does (compile with tools/compiler/chat_compile.c, run with
 * rt/chat), and print the text. The template comes from a file, a blob or
 * a built-in family. Used by the cross-check against @huggingface/jinja
 * (tests/chat/) and to see what a model is sent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_blob/blob_view.h"
#include "rt/chat/chat.h"
#include "rt/tokenizer.h"
#include "tools/cli/cli.h"
#include "tools/compiler/chat_compile.h"
#include "tools/util/args.h"
#include "tools/util/json.h"
#include "tools/util/tool_util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nib chat-render (--template FILE | --blob BLOB | --family NAME)\n"
            "                       --messages FILE.json [--bos S] [--eos S] [--now UNIX_SECONDS]\n"
            "                       [--no-generation-prompt] [--taint] [--out-cap BYTES]\n"
            "                       [--program-out FILE]\n"
            "  Renders an OpenAI-style conversation ([{\"role\": ..., \"content\": ...}]) with a\n"
            "  Jinja chat template as the appliance does and prints the text. --taint adds a\n"
            "  line with one digit per byte: 1 where the byte came from a message.\n"
            "  --now pins what strftime_now() formats (UTC; default: the clock).\n"
            "  A template that raises an exception exits with status 3 and its message.\n"
            "  --program-out writes the compiled program (what nib compile puts in the blob).\n"
            "  Families: llama2 llama3 chatml phi3 gemma mistral zephyr.\n");
}

enum {
    O_TEMPLATE = NIB_ARGS_OPT,
    O_BLOB,
    O_FAMILY,
    O_MESSAGES,
    O_BOS,
    O_EOS,
    O_NOW,
    O_NOGEN,
    O_TAINT,
    O_CAP,
    O_PROG_OUT
};

static const struct nib_opt opts[] = {
    {"--template", O_TEMPLATE, 1},
    {"--blob", O_BLOB, 1},
    {"--family", O_FAMILY, 1},
    {"--messages", O_MESSAGES, 1},
    {"--bos", O_BOS, 1},
    {"--eos", O_EOS, 1},
    {"--now", O_NOW, 1},
    {"--no-generation-prompt", O_NOGEN, 0},
    {"--taint", O_TAINT, 0},
    {"--out-cap", O_CAP, 1},
    {"--program-out", O_PROG_OUT, 1},
    {NULL, 0, 0},
};

/* The messages of an OpenAI-style conversation file. */
static int read_messages(const char *path, struct json_doc **doc, struct nib_chat_message **out,
                         uint32_t *n)
{
    const uint8_t *data;
    size_t size;
    char err[256];
    if (nib_map_file(path, &data, &size, err, sizeof err) != 0) {
        fprintf(stderr, "nib chat-render: %s\n", err);
        return -1;
    }
    int rc = json_parse((const char *)data, size, NULL, doc, err, sizeof err);
    nib_unmap_file(data, size);
    if (rc != 0) {
        fprintf(stderr, "nib chat-render: %s: %s\n", path, err);
        return -1;
    }
    const struct json_value *root = json_root(*doc);
    if (!json_is(root, JSON_ARRAY)) {
        fprintf(stderr, "nib chat-render: %s: expected an array of messages\n", path);
        return -1;
    }
    *out = calloc(root->n ? root->n : 1, sizeof **out);
    if (!*out)
        return -1;
    for (uint32_t i = 0; i < root->n; i++) {
        const struct json_value *m = json_at(root, i), *role = json_get(m, "role"),
                                *content = json_get(m, "content");
        if (!json_is(role, JSON_STRING) || !json_is(content, JSON_STRING)) {
            fprintf(stderr,
                    "nib chat-render: %s: message %u needs string \"role\" and \"content\"\n", path,
                    (unsigned)i);
            return -1;
        }
        (*out)[i] = (struct nib_chat_message){(const uint8_t *)role->str,
                                              (const uint8_t *)content->str, role->n, content->n};
    }
    *n = root->n;
    return 0;
}

static char *read_text(const char *path, size_t *len)
{
    const uint8_t *data;
    size_t size;
    char err[256];
    if (nib_map_file(path, &data, &size, err, sizeof err) != 0) {
        fprintf(stderr, "nib chat-render: %s\n", err);
        return NULL;
    }
    char *t = malloc(size + 1);
    if (t) {
        memcpy(t, data, size);
        t[size] = 0;
    }
    nib_unmap_file(data, size);
    *len = size;
    return t;
}

int nib_chat_render_main(int argc, char **argv)
{
    struct nib_args a;
    nib_args_init(&a, "nib chat-render", argc, argv, opts, usage, NULL);
    const char *tpath = NULL, *bpath = NULL, *family = NULL, *mpath = NULL;
    const char *bos = NULL, *eos = NULL, *prog_out = NULL;
    int gen = 1, show_taint = 0;
    uint64_t now = (uint64_t)time(NULL), cap = 1u << 20;
    int r;
    while ((r = nib_args_next(&a)) > NIB_ARGS_END) {
        switch (r) {
        case O_TEMPLATE: tpath = a.value; break;
        case O_BLOB: bpath = a.value; break;
        case O_FAMILY: family = a.value; break;
        case O_MESSAGES: mpath = a.value; break;
        case O_BOS: bos = a.value; break;
        case O_EOS: eos = a.value; break;
        case O_NOW:
            if (nib_args_u64(&a, &now))
                return 2;
            break;
        case O_NOGEN: gen = 0; break;
        case O_TAINT: show_taint = 1; break;
        case O_PROG_OUT: prog_out = a.value; break;
        case O_CAP:
            if (nib_args_u64(&a, &cap))
                return 2;
            break;
        }
    }
    if (r == NIB_ARGS_EXIT)
        return a.status;
    if (!!tpath + !!bpath + !!family != 1)
        return nib_args_fail(&a, "give one of --template, --blob, --family");
    if (!mpath)
        return nib_args_fail(&a, "--messages FILE.json is required");

    char err[512];
    uint8_t *prog = NULL, *blob_prog_copy = NULL;
    size_t prog_len = 0;
    const uint8_t *blob = NULL;
    size_t blob_size = 0;
    struct nib_blob_view v;
    if (bpath) {
        if (nib_map_file(bpath, &blob, &blob_size, err, sizeof err) != 0 ||
            nib_blob_open(&v, blob, blob_size, 1, err, sizeof err) != 0) {
            fprintf(stderr, "nib chat-render: %s: %s\n", bpath, err);
            return 1;
        }
        const uint8_t *p = nib_tok_chat_program(&v, &prog_len);
        if (!p) {
            fprintf(stderr, "nib chat-render: %s has no chat template\n", bpath);
            return 1;
        }
        blob_prog_copy = malloc(prog_len ? prog_len : 1);
        if (!blob_prog_copy)
            return 1;
        memcpy(blob_prog_copy, p, prog_len);
        prog = blob_prog_copy;
        uint32_t n;
        if (!bos && v.tok->bos_id != NIB_TOK_NONE)
            bos = (const char *)nib_tok_piece(&v, v.tok->bos_id, &n), bos = strndup(bos, n);
        if (!eos && v.tok->eos_id != NIB_TOK_NONE)
            eos = (const char *)nib_tok_piece(&v, v.tok->eos_id, &n), eos = strndup(eos, n);
    } else {
        size_t tl = 0;
        char *text = NULL;
        const char *src = family ? nib_chat_builtin(family) : (text = read_text(tpath, &tl));
        if (!src) {
            if (family)
                fprintf(stderr, "nib chat-render: no built-in family '%s'\n", family);
            return 1;
        }
        if (family)
            tl = strlen(src);
        int rc = nib_chat_compile(src, tl, &prog, &prog_len, err, sizeof err);
        free(text);
        if (rc != 0) {
            fprintf(stderr, "nib chat-render: %s\n", err);
            return 1;
        }
    }

    if (prog_out) {
        FILE *f = fopen(prog_out, "wb");
        if (!f || fwrite(prog, 1, prog_len, f) != prog_len || fclose(f) != 0) {
            fprintf(stderr, "nib chat-render: cannot write %s\n", prog_out);
            return 1;
        }
    }
    struct json_doc *doc = NULL;
    struct nib_chat_message *msgs = NULL;
    uint32_t n_msgs = 0;
    if (read_messages(mpath, &doc, &msgs, &n_msgs) != 0)
        return 1;
    size_t in_bytes = 0;
    for (uint32_t i = 0; i < n_msgs; i++)
        in_bytes += msgs[i].role_len + msgs[i].content_len + 8;
    struct nib_chat_args ca = {
        .messages = msgs,
        .n_messages = n_msgs,
        .add_generation_prompt = gen,
        .bos_token = (const uint8_t *)bos,
        .eos_token = (const uint8_t *)eos,
        .bos_len = bos ? (uint32_t)strlen(bos) : 0,
        .eos_len = eos ? (uint32_t)strlen(eos) : 0,
        .now_s = (int64_t)now,
    };
    size_t scratch_size = nib_chat_scratch_footprint(in_bytes, cap);
    void *scratch = malloc(scratch_size);
    uint8_t *out = malloc(cap ? cap : 1), *taint = malloc(cap ? cap : 1);
    size_t out_len = 0;
    int status = 0;
    if (!scratch || !out || !taint) {
        fprintf(stderr, "nib chat-render: out of memory\n");
        status = 1;
    } else if (nib_chat_render(prog, prog_len, &ca, scratch, scratch_size, out, taint, cap,
                               &out_len, err, sizeof err) != 0) {
        fprintf(stderr, "nib chat-render: %s\n", err);
        status = 3;
    } else {
        fwrite(out, 1, out_len, stdout);
        if (show_taint) {
            putchar('\n');
            for (size_t i = 0; i < out_len; i++)
                putchar(taint[i] ? '1' : '0');
            putchar('\n');
        }
    }
    free(scratch);
    free(out);
    free(taint);
    free(msgs);
    json_free(doc);
    free(prog);
    if (blob)
        nib_unmap_file(blob, blob_size);
    return status;
}
