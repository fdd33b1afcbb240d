/* The reference column of nib bench --tokenizer: @huggingface/tokenizers
 * under node, driven one round at a time through a pipe so that its rounds
 * interleave with nibble's (machine noise hits both alike). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/measure/bench_tok.h"

/* argv: tokenizer.json, chunk file (chunks separated by NUL), npm dir.
 * After loading and one warm-up pass it prints one JSON line; then one
 * line with the seconds of a pass for each "go" it reads. */
static const char js_ref[] =
    "import fs from 'node:fs'; import path from 'node:path'; import readline from "
    "'node:readline';\n"
    "import { pathToFileURL } from 'node:url';\n"
    "const [tokPath, chunkPath, npmDir] = process.argv.slice(1);\n"
    "const lib = await import(pathToFileURL(path.join(npmDir, '@huggingface', 'tokenizers', "
    "'dist', 'tokenizers.mjs')).href);\n"
    "const t0 = performance.now();\n"
    "const cfgPath = path.join(path.dirname(tokPath), 'tokenizer_config.json');\n"
    "const cfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, 'utf8')) : {};\n"
    "const tok = new lib.Tokenizer(JSON.parse(fs.readFileSync(tokPath, 'utf8')), cfg);\n"
    "const load = (performance.now() - t0) / 1000;\n"
    "const chunks = fs.readFileSync(chunkPath, 'utf8').split('\\0');\n"
    "let tokens = 0;\n"
    "for (const c of chunks) tokens += tok.encode(c, { add_special_tokens: false }).ids.length;\n"
    "console.log(JSON.stringify({ tokens, load_s: load, node: process.version }));\n"
    "for await (const line of readline.createInterface({ input: process.stdin })) {\n"
    "  if (line !== 'go') break;\n"
    "  const t = performance.now();\n"
    "  for (const c of chunks) tok.encode(c, { add_special_tokens: false });\n"
    "  console.log(((performance.now() - t) / 1000).toFixed(6));\n"
    "}\n";

/* snprintf that says when it cut: 0, or -1 */
static int fmt(char *out, size_t len, const char *f, const char *a, const char *b)
{
    int n = snprintf(out, len, f, a, b);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int has_tokenizers_js(const char *dir)
{
    char p[4096];
    struct stat st;
    if (fmt(p, sizeof p, "%s%s", dir, "/@huggingface/tokenizers/dist/tokenizers.mjs"))
        return 0;
    return stat(p, &st) == 0;
}

/* NIB_NPM_DIR, else tests/npm/node_modules above nib's own folder or the
 * current one (a build folder inside the checkout finds it). */
static int find_npm_dir(char *out, size_t len)
{
    const char *env = getenv("NIB_NPM_DIR");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return has_tokenizers_js(out) ? 0 : -1;
    }
    char start[2][4096] = {{0}, {0}};
    ssize_t n = readlink("/proc/self/exe", start[0], sizeof start[0] - 1);
    start[0][n > 0 ? n : 0] = 0;
    if (!getcwd(start[1], sizeof start[1]))
        start[1][0] = 0;
    for (int s = 0; s < 2; s++) {
        char *slash;
        while ((slash = strrchr(start[s], '/')) != NULL) {
            *slash = 0;
            if (!fmt(out, len, "%s%s", start[s], "/tests/npm/node_modules") &&
                has_tokenizers_js(out))
                return 0;
        }
    }
    snprintf(out, len, "<repo>/tests/npm/node_modules");
    return -1;
}

static double json_num(const char *s, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(s, k);
    return p ? strtod(p + strlen(k), NULL) : -1.0;
}

static int write_chunks(struct bench_ref *r, const struct bench_chunk *c, size_t nc)
{
    snprintf(r->chunk_file, sizeof r->chunk_file, "/tmp/nib-bench-tok-XXXXXX");
    int fd = mkstemp(r->chunk_file);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        r->chunk_file[0] = 0;
        return -1;
    }
    for (size_t i = 0; i < nc; i++) {
        fwrite(c[i].p, 1, c[i].n, f);
        if (i + 1 < nc)
            fputc(0, f);
    }
    return fclose(f) ? -1 : 0;
}

int bench_ref_start(struct bench_ref *r, const char *tok_json, const struct bench_chunk *c,
                    size_t nc, char *note, size_t note_len)
{
    memset(r, 0, sizeof *r);
    r->pid = -1;
    signal(SIGPIPE, SIG_IGN); /* a node that died is reported, not fatal */
    char npm[4096];
    if (find_npm_dir(npm, sizeof npm)) {
        snprintf(note, note_len,
                 "@huggingface/tokenizers not found in %.300s (NIB_NPM_DIR; "
                 ".ci/install-deps.sh installs it)",
                 npm);
        return -1;
    }
    if (write_chunks(r, c, nc)) {
        snprintf(note, note_len, "cannot write a temporary file: %s", strerror(errno));
        bench_ref_stop(r);
        return -1;
    }
    int in[2], out[2];
    if (pipe(in) || pipe(out)) {
        snprintf(note, note_len, "pipe: %s", strerror(errno));
        bench_ref_stop(r);
        return -1;
    }
    fflush(stdout);
    r->pid = fork();
    if (r->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        char *args[] = {"node",           "--input-type=module", "-e", (char *)js_ref,
                        (char *)tok_json, r->chunk_file,         npm,  NULL};
        execvp("node", args);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    r->to = fdopen(in[1], "w");
    r->from = fdopen(out[0], "r");
    char line[512];
    if (r->pid < 0 || !r->to || !r->from || !fgets(line, sizeof line, r->from)) {
        int st = 0;
        if (r->pid > 0 && r->from && r->to) {
            fclose(r->to), r->to = NULL;
            waitpid(r->pid, &st, 0);
            r->pid = -1;
        }
        snprintf(note, note_len, "%s",
                 WIFEXITED(st) && WEXITSTATUS(st) == 127 ? "node not found on PATH"
                                                         : "node failed (its message is above)");
        bench_ref_stop(r);
        return -1;
    }
    r->tokens = (unsigned long)json_num(line, "tokens");
    r->load_s = json_num(line, "load_s");
    const char *v = strstr(line, "\"node\":\"");
    if (v)
        snprintf(r->node, sizeof r->node, "%.*s", (int)strcspn(v + 8, "\""), v + 8);
    return 0;
}

double bench_ref_round(struct bench_ref *r, char *note, size_t note_len)
{
    char line[128];
    if (fputs("go\n", r->to) < 0 || fflush(r->to) || !fgets(line, sizeof line, r->from)) {
        snprintf(note, note_len, "node stopped answering");
        return -1;
    }
    return strtod(line, NULL);
}

void bench_ref_stop(struct bench_ref *r)
{
    if (r->to)
        fclose(r->to); /* end of input: the script's loop ends */
    if (r->pid > 0)
        waitpid(r->pid, NULL, 0);
    if (r->from)
        fclose(r->from);
    if (r->chunk_file[0])
        unlink(r->chunk_file);
    memset(r, 0, sizeof *r);
    r->pid = -1;
}
