/* Host-side commands over libnibhost: nib ask, nib stop, nib stats. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "proto/shm_layout.h"
#include "proto/stats.h"
#include "tools/cli/cli.h"
#include "tools/util/args.h"
#include "tools/host/nibhost.h"

/* Length of the well-formed UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
               : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n || (len == 2 && s[0] < 0xC2))
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* JSON strings must be UTF-8: bytes the model produced that do not form
 * UTF-8 (a byte token on its own) are written as U+FFFD. The token ids are
 * always exact. */
static void json_string(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        size_t len = utf8_seq((const unsigned char *)s + i, n - i);
        if (len == 0) {
            fputs("\\ufffd", f);
        } else if (len > 1) {
            fwrite(s + i, 1, len, f);
            i += len - 1;
        } else if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_ids(FILE *f, const uint32_t *ids, uint32_t n)
{
    fputc('[', f);
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, "%s%u", i ? ", " : "", ids[i]);
    fputc(']', f);
}

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* Attach to the appliance NAME, or say why not on stderr and return NULL. */
static struct nib_host *attach(const char *cmd, const char *name)
{
    struct nib_host *h;
    if (nib_host_attach(&h, name) == NIB_HOST_OK)
        return h;
    fprintf(stderr, "%s: %s\n", cmd, nib_host_error(h));
    nib_host_detach(h);
    return NULL;
}

static void ask_usage(FILE *f)
{
    fprintf(f, "usage: nib ask [--name NAME] [--max-tokens N] [--temperature T] [--seed S] [--no-bos] [--json] [--] PROMPT\n"
               "  a PROMPT that starts with '-' goes after --\n");
}

enum { O_NAME = NIB_ARGS_OPT, O_MAX_TOKENS, O_TEMPERATURE, O_SEED, O_NO_BOS, O_JSON };

int nib_ask_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {
        {"--name", O_NAME, 1},       {"--max-tokens", O_MAX_TOKENS, 1},
        {"--temperature", O_TEMPERATURE, 1}, {"--seed", O_SEED, 1},
        {"--no-bos", O_NO_BOS, 0},   {"--json", O_JSON, 0},
        {NULL, 0, 0},
    };
    const char *name = NULL, *prompt = NULL;
    struct nib_gen_params p = {.max_tokens = 64, .temperature = 0.0f, .seed = 0};
    int json = 0, seed_given = 0;
    struct nib_args a;
    nib_args_init(&a, "nib ask", argc, argv, opts, ask_usage, &prompt);
    int o;
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        if (o == O_NAME)
            name = a.value;
        else if (o == O_MAX_TOKENS) {
            if (nib_args_u32(&a, 1, NIB_SLOT_TOKENS, &p.max_tokens))
                return 2;
        } else if (o == O_TEMPERATURE) {
            if (nib_args_f32(&a, 0, 100, &p.temperature))
                return 2;
        } else if (o == O_SEED) {
            if (nib_args_u64(&a, &p.seed))
                return 2;
            seed_given = 1;
        } else if (o == O_NO_BOS)
            p.no_bos = 1;
        else if (o == O_JSON)
            json = 1;
    }
    if (o == NIB_ARGS_EXIT)
        return a.status;
    if (!prompt)
        return nib_args_missing(&a);
    if (seed_given && p.temperature == 0.0f)
        nib_args_note("nib ask", "--seed is ignored: temperature 0 decodes greedily");
    struct nib_host *h = attach("nib ask", name);
    if (!h)
        return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);

    struct nib_req_handle r;
    int rc;
    /* A full table is back-pressure: wait for a slot (in short steps, so
     * Ctrl-C still works). */
    p.busy_wait_ms = 100;
    while ((rc = nib_host_submit(h, prompt, strlen(prompt), &p, &r)) == NIB_HOST_BUSY &&
           !interrupted)
        ;
    if (rc != NIB_HOST_OK) {
        fprintf(stderr, "nib ask: %s\n", interrupted ? "interrupted" : nib_host_error(h));
        nib_host_detach(h);
        return 1;
    }
    struct nib_progress pr;
    uint32_t shown = 0, seen = 0;
    int cancelled = 0;
    for (;;) {
        rc = nib_host_wait(h, &r, seen, 100, &pr);
        if (rc == NIB_HOST_TIMEOUT && !interrupted)
            continue;
        if (rc != NIB_HOST_OK && rc != NIB_HOST_TIMEOUT) {
            fprintf(stderr, "\nnib ask: %s\n", nib_host_error(h));
            nib_host_detach(h);
            return 1;
        }
        if (interrupted && !cancelled) {
            nib_host_cancel(h, &r);
            cancelled = 1;
        }
        if (!json && pr.text_len > shown) {
            if (shown == 0)
                fputs(prompt, stdout);
            fwrite(pr.text + shown, 1, pr.text_len - shown, stdout);
            fflush(stdout);
            shown = pr.text_len;
        }
        seen = pr.n_tokens;
        if (pr.done)
            break;
    }
    int exit_rc = pr.status == NIB_ST_BAD_REQUEST || pr.status == NIB_ST_SHUTDOWN ? 1 : 0;
    uint32_t n_gen = pr.n_tokens - pr.n_prompt;
    double prefill_ms = pr.t_first_ns > pr.t_start_ns ? (double)(pr.t_first_ns - pr.t_start_ns) / 1e6 : 0;
    double decode_s = pr.t_done_ns > pr.t_first_ns ? (double)(pr.t_done_ns - pr.t_first_ns) / 1e9 : 0;
    if (json) {
        printf("{\"prompt\": ");
        json_string(stdout, prompt, strlen(prompt));
        printf(", \"prompt_token_ids\": ");
        json_ids(stdout, pr.tokens, pr.n_prompt);
        printf(", \"generated_token_ids\": ");
        json_ids(stdout, pr.tokens + pr.n_prompt, n_gen);
        printf(", \"text\": ");
        json_string(stdout, pr.text, pr.text_len);
        printf(", \"status\": \"%s\"", nib_status_name(pr.status));
        if (pr.status == NIB_ST_BAD_REQUEST) {
            printf(", \"error\": ");
            json_string(stdout, pr.error, strlen(pr.error));
        }
        printf(", \"timings\": {\"prefill_ms\": %.3f, \"decode_s\": %.6f, \"decode_tokens_per_s\": %.1f}}\n",
               prefill_ms, decode_s, n_gen > 1 && decode_s > 0 ? (n_gen - 1) / decode_s : 0.0);
    } else {
        if (shown == 0)
            fputs(prompt, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        if (pr.status == NIB_ST_BAD_REQUEST)
            fprintf(stderr, "nib ask: request rejected: %s\n", pr.error);
        else
            fprintf(stderr, "[%u prompt tokens, %u generated, %s; prefill %.1f ms, %.1f tokens/s]\n",
                    pr.n_prompt, n_gen, nib_status_name(pr.status), prefill_ms,
                    n_gen > 1 && decode_s > 0 ? (n_gen - 1) / decode_s : 0.0);
    }
    nib_host_release(h, &r);
    nib_host_detach(h);
    return exit_rc;
}

static void stop_usage(FILE *f)
{
    fprintf(f, "usage: nib stop [--name NAME]\n");
}

static void stats_usage(FILE *f)
{
    fprintf(f, "usage: nib stats [--name NAME] [--json]\n");
}

/* nib stop and nib stats: --name, and for stats --json; no operands.
 * -1 to go on, else the exit status. */
static int parse_name_only(int argc, char **argv, const char *cmd, void (*usage)(FILE *f),
                           const char **name, int *json)
{
    static const struct nib_opt opts[] = {{"--name", O_NAME, 1}, {"--json", O_JSON, 0}, {NULL, 0, 0}};
    static const struct nib_opt name_opt[] = {{"--name", O_NAME, 1}, {NULL, 0, 0}};
    struct nib_args a;
    nib_args_init(&a, cmd, argc, argv, json ? opts : name_opt, usage, NULL);
    int o;
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        if (o == O_NAME)
            *name = a.value;
        else
            *json = 1;
    }
    return o == NIB_ARGS_EXIT ? a.status : -1;
}

int nib_stop_main(int argc, char **argv)
{
    const char *name = NULL;
    int rc = parse_name_only(argc, argv, "nib stop", stop_usage, &name, NULL);
    if (rc >= 0)
        return rc;
    struct nib_host *h = attach("nib stop", name);
    if (!h)
        return 1;
    rc = nib_host_stop(h, 30000);
    if (rc != NIB_HOST_OK)
        fprintf(stderr, "nib stop: %s\n", nib_host_error(h));
    nib_host_detach(h);
    return rc == NIB_HOST_OK ? 0 : 1;
}

int nib_stats_main(int argc, char **argv)
{
    const char *name = NULL;
    int json = 0;
    int rc = parse_name_only(argc, argv, "nib stats", stats_usage, &name, &json);
    if (rc >= 0)
        return rc;
    struct nib_host *h = attach("nib stats", name);
    if (!h)
        return 1;
    struct nib_stats s;
    memcpy(&s, nib_host_stats(h), sizeof s);
    struct nib_latency tok, req;
    nib_hist_summary(&nib_token_hist_shape, s.token_hist, s.token_pass_ns_max, &tok);
    nib_hist_summary(&nib_request_hist_shape, s.request_hist, s.request_ns_max, &req);
    if (json) {
        printf("{\"requests_accepted\": %llu, \"requests_done\": %llu, \"requests_rejected\": %llu, "
               "\"requests_cancelled\": %llu, \"slots_reclaimed\": %llu, \"tokens_prompt\": %llu, "
               "\"tokens_generated\": %llu, \"epoch\": %llu",
               (unsigned long long)s.requests_accepted, (unsigned long long)s.requests_done,
               (unsigned long long)s.requests_rejected, (unsigned long long)s.requests_cancelled,
               (unsigned long long)s.slots_reclaimed, (unsigned long long)s.tokens_prompt,
               (unsigned long long)s.tokens_generated, (unsigned long long)nib_host_epoch(h));
        const struct nib_latency *l[2] = {&tok, &req};
        const char *key[2] = {"token_latency_us", "request_latency_us"};
        for (int i = 0; i < 2; i++)
            printf(", \"%s\": {\"count\": %llu, \"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, "
                   "\"p99.9\": %.1f, \"max\": %.1f}", key[i], (unsigned long long)l[i]->count,
                   l[i]->p50 / 1e3, l[i]->p90 / 1e3, l[i]->p99 / 1e3, l[i]->p999 / 1e3,
                   l[i]->max / 1e3);
        printf("}\n");
    } else {
        printf("requests: %llu accepted, %llu done, %llu rejected, %llu cancelled, %llu slots reclaimed\n",
               (unsigned long long)s.requests_accepted, (unsigned long long)s.requests_done,
               (unsigned long long)s.requests_rejected, (unsigned long long)s.requests_cancelled,
               (unsigned long long)s.slots_reclaimed);
        printf("tokens: %llu prompt, %llu generated\n", (unsigned long long)s.tokens_prompt,
               (unsigned long long)s.tokens_generated);
        printf("per-token latency: p50 %.1f us, p90 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us\n",
               tok.p50 / 1e3, tok.p90 / 1e3, tok.p99 / 1e3, tok.p999 / 1e3, tok.max / 1e3);
        printf("per-request latency: p50 %.1f us, p99 %.1f us, max %.1f us\n", req.p50 / 1e3,
               req.p99 / 1e3, req.max / 1e3);
    }
    nib_host_detach(h);
    return 0;
}
