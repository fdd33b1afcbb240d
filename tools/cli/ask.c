/* Host-side commands over libnibhost: nib ask (text, or a conversation
 * the appliance renders with the model's chat template), nib stop, nib
 * stats. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/chat_msg.h"
#include "proto/shm_layout.h"
#include "proto/stats.h"
#include "proto/utf8.h"
#include "tools/cli/cli.h"
#include "proto/private/sync.h"
#include "tools/util/args.h"
#include "tools/util/json.h"
#include "tools/host/nibhost.h"

/* Every wait of nib ask, stop and stats ends after this long (--timeout). */
#define ASK_TIMEOUT_DEFAULT_S 60

/* The model's bytes as text: well-formed UTF-8 only, every invalid
 * subpart replaced by U+FFFD (proto/utf8.h, the rule nibhost.py shares). */
static void text_out(FILE *f, const char *s, size_t n)
{
    const uint8_t *b = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int inc;
        size_t k = nib_utf8_step(b + i, n - i, &cp, &inc);
        uint8_t enc[4];
        fwrite(enc, 1, nib_utf8_encode(cp, enc), f);
        i += k;
    }
}

/* A JSON string of the same text: always valid UTF-8 (non-ASCII written as
 * itself, U+FFFD for invalid bytes), '"', '\\' and control characters
 * escaped. The token ids are always exact. */
static void json_string(FILE *f, const char *s, size_t n)
{
    const uint8_t *b = (const uint8_t *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int inc;
        size_t k = nib_utf8_step(b + i, n - i, &cp, &inc);
        i += k;
        if (cp >= 0x80) {
            uint8_t enc[4];
            fwrite(enc, 1, nib_utf8_encode(cp, enc), f);
        } else if (cp == '"' || cp == '\\')
            fprintf(f, "\\%c", (int)cp);
        else if (cp == '\n')
            fputs("\\n", f);
        else if (cp == '\t')
            fputs("\\t", f);
        else if (cp == '\r')
            fputs("\\r", f);
        else if (cp < 0x20)
            fprintf(f, "\\u%04x", (unsigned)cp);
        else
            fputc((int)cp, f);
    }
    fputc('"', f);
}

/* --timeout SECONDS: a positive number of seconds, into ms. */
static int args_timeout(struct nib_args *a, int *ms)
{
    float sec;
    if (nib_args_f32(a, 0.001f, 86400.0f, &sec))
        return 2;
    *ms = (int)(sec * 1000.0f) > 0 ? (int)(sec * 1000.0f) : 1;
    return 0;
}

static uint64_t mono_ms(void)
{
    return nib_now_ns() / 1000000u;
}

/* Milliseconds left before deadline, at least 1 (the library takes 0 or
 * less as its default timeout, never as "none left"). */
static int ms_left(uint64_t deadline)
{
    uint64_t now = mono_ms();
    return now + 1 < deadline ? (int)(deadline - now) : 1;
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

static void ask_usage(FILE *f)
{
    fprintf(f,
            "usage: nib ask [--name NAME] [--max-tokens N] [--temperature T] [--seed S] "
            "[--no-bos] [--special] [--json]\n"
            "               [--timeout SECONDS] [--] PROMPT\n"
            "       nib ask --chat [--system TEXT] [--now SECONDS] [options] [--] MESSAGE\n"
            "       nib ask --messages conversation.json [--system TEXT] [options] [MESSAGE]\n"
            "  a PROMPT that starts with '-' goes after --\n"
            "  --special  control tokens written as text (<|eot_id|>) map to their ids\n"
            "             (in a conversation: in the messages too)\n"
            "  --chat     MESSAGE is a user message; the appliance renders the conversation\n"
            "             with the model's own chat template and prints the answer\n"
            "  --system   a system message first (with --chat or --messages)\n"
            "  --messages an OpenAI-style JSON array [{\"role\": ..., \"content\": ...}];\n"
            "             a MESSAGE after it is one more user message\n"
            "  --now      what the template's strftime_now() shows (UTC seconds since 1970;\n"
            "             default: the appliance's clock)\n"
            "  --timeout  give up (the request is cancelled) after this long; default %d s.\n"
            "             Every wait is bounded by it: attaching, a full ring, the answer.\n"
            "  Text is printed as UTF-8: bytes of the model that are not well-formed\n"
            "  UTF-8 become U+FFFD (also in --json, which is always valid UTF-8).\n",
            ASK_TIMEOUT_DEFAULT_S);
}

enum {
    O_NAME = NIB_ARGS_OPT,
    O_MAX_TOKENS,
    O_TEMPERATURE,
    O_SEED,
    O_NO_BOS,
    O_JSON,
    O_TIMEOUT,
    O_SPECIAL,
    O_CHAT,
    O_SYSTEM,
    O_MESSAGES,
    O_NOW,
};

/* A conversation: the messages and the JSON document their strings live
 * in (NULL for --chat alone). */
struct convo {
    struct nib_chat_msg *m;
    size_t n;
    struct json_doc *doc;
};

static void convo_free(struct convo *c)
{
    free(c->m);
    json_free(c->doc);
}

/* --messages FILE: an array of {"role": string, "content": string or null}
 * objects (other members, such as "name", are not sent). 0, or 1 after a
 * message. */
static int read_messages(const char *path, struct convo *c)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "nib ask: %s: cannot open: %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += k;
        if (len == cap && cap < JSON_DEFAULT_MAX_BYTES) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    int rd_err = ferror(f);
    fclose(f);
    if (!buf || rd_err) {
        fprintf(stderr, "nib ask: %s: %s\n", path, buf ? "read error" : "out of memory");
        free(buf);
        return 1;
    }
    char err[256];
    int rc = json_parse(buf, len, NULL, &c->doc, err, sizeof err);
    free(buf);
    if (rc) {
        fprintf(stderr, "nib ask: %s: %s\n", path, err);
        return 1;
    }
    const struct json_value *root = json_root(c->doc);
    if (!json_is(root, JSON_ARRAY)) {
        fprintf(stderr,
                "nib ask: %s: want a JSON array of {\"role\", \"content\"} objects, not %s\n", path,
                json_type_name(root));
        return 1;
    }
    c->m = calloc(root->n + 2, sizeof *c->m); /* + --system and a MESSAGE */
    if (!c->m) {
        fprintf(stderr, "nib ask: out of memory for %u messages\n", root->n);
        return 1;
    }
    for (uint32_t i = 0; i < root->n; i++) {
        const struct json_value *e = json_at(root, i), *role = json_get(e, "role"),
                                *content = json_get(e, "content");
        if (!json_is(e, JSON_OBJECT) || !json_is(role, JSON_STRING) ||
            !(json_is(content, JSON_STRING) || json_is(content, JSON_NULL))) {
            fprintf(stderr,
                    "nib ask: %s: message %u: want {\"role\": string, \"content\": string}, "
                    "got %s with role %s and content %s\n",
                    path, i, json_type_name(e), json_type_name(role), json_type_name(content));
            return 1;
        }
        c->m[c->n++] =
            (struct nib_chat_msg){role->str, json_is(content, JSON_STRING) ? content->str : "",
                                  json_is(content, JSON_STRING) ? content->n : 0};
    }
    return 0;
}

/* The JSON of a conversation, as nibhost.py writes it. */
static void json_messages(FILE *f, const struct convo *c)
{
    fputc('[', f);
    for (size_t i = 0; i < c->n; i++) {
        const char *content = c->m[i].content ? c->m[i].content : "";
        size_t n = c->m[i].content_len ? c->m[i].content_len : strlen(content);
        fprintf(f, "%s{\"role\": ", i ? ", " : "");
        json_string(f, c->m[i].role, strlen(c->m[i].role));
        fputs(", \"content\": ", f);
        json_string(f, content, n);
        fputc('}', f);
    }
    fputc(']', f);
}

int nib_ask_main(int argc, char **argv)
{
    const char *name = NULL, *prompt = NULL;
    struct nib_gen_params p = {.max_tokens = 64, .temperature = 0.0f, .seed = 0};
    static const struct nib_opt opts[] = {
        {"--name", O_NAME, 1},
        {"--max-tokens", O_MAX_TOKENS, 1},
        {"--temperature", O_TEMPERATURE, 1},
        {"--seed", O_SEED, 1},
        {"--no-bos", O_NO_BOS, 0},
        {"--json", O_JSON, 0},
        {"--timeout", O_TIMEOUT, 1},
        {"--special", O_SPECIAL, 0},
        {"--chat", O_CHAT, 0},
        {"--system", O_SYSTEM, 1},
        {"--messages", O_MESSAGES, 1},
        {"--now", O_NOW, 1},
        {NULL, 0, 0},
    };
    int json = 0, seed_given = 0, timeout_ms = ASK_TIMEOUT_DEFAULT_S * 1000, chat = 0;
    const char *system = NULL, *messages_file = NULL;
    struct nib_args a;
    nib_args_init(&a, "nib ask", argc, argv, opts, ask_usage, &prompt);
    int o;
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        if (o == O_NAME)
            name = a.value;
        else if (o == O_MAX_TOKENS) {
            /* The appliance checks against its own context length. */
            if (nib_args_u32(&a, 1, NIB_PROMPT_LIMIT, &p.max_tokens))
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
        else if (o == O_TIMEOUT) {
            if (args_timeout(&a, &timeout_ms))
                return 2;
        } else if (o == O_SPECIAL)
            p.special = 1;
        else if (o == O_CHAT)
            chat = 1;
        else if (o == O_SYSTEM)
            system = a.value;
        else if (o == O_MESSAGES)
            messages_file = a.value;
        else if (o == O_NOW) {
            uint64_t now;
            if (nib_args_u64(&a, &now))
                return 2;
            if (now > (uint64_t)NIB_CHAT_NOW_MAX)
                return nib_args_fail(&a, "--now %llu is past year 9999", (unsigned long long)now);
            p.now_s = (int64_t)now;
        }
    }
    if (o == NIB_ARGS_EXIT)
        return a.status;
    if (!prompt && !messages_file)
        return nib_args_missing(&a);
    if (system && !chat && !messages_file)
        return nib_args_fail(&a, "--system goes with --chat or --messages");
    if (p.now_s && !chat && !messages_file)
        return nib_args_fail(&a, "--now goes with --chat or --messages");
    struct convo conv = {0};
    int is_chat = chat || messages_file;
    if (messages_file && read_messages(messages_file, &conv)) {
        convo_free(&conv);
        return 1;
    }
    if (chat && !conv.m && !(conv.m = calloc(2, sizeof *conv.m))) {
        fprintf(stderr, "nib ask: out of memory\n");
        return 1;
    }
    if (system) { /* first */
        memmove(conv.m + 1, conv.m, conv.n * sizeof *conv.m);
        conv.m[0] = (struct nib_chat_msg){"system", system, 0};
        conv.n++;
    }
    if (is_chat && prompt)
        conv.m[conv.n++] = (struct nib_chat_msg){"user", prompt, 0};
    if (!prompt)
        prompt = "";
    if (seed_given && p.temperature == 0.0f)
        nib_args_note("nib ask", "--seed is ignored: temperature 0 decodes greedily");
    uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
    struct nib_host *h;
    int rc;
    /* Every ring attached (--max-hosts) is back-pressure too: try again
     * until the timeout, each try bounded by the time left. */
    while ((rc = nib_host_attach(&h, name, ms_left(deadline))) == NIB_HOST_BUSY &&
           mono_ms() + 50 < deadline) {
        nib_host_detach(h);
        struct timespec ts = {0, 50000000L};
        nanosleep(&ts, NULL);
    }
    if (rc != NIB_HOST_OK) {
        fprintf(stderr, "nib ask: %s\n", nib_host_error(h));
        nib_host_detach(h);
        convo_free(&conv);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);

    struct nib_req_handle r;
    /* A full ring is back-pressure: wait for a slot (in short steps, so
     * Ctrl-C still works), up to the timeout. */
    p.busy_wait_ms = 100;
    while ((rc = is_chat ? nib_host_submit_chat(h, conv.m, conv.n, &p, &r)
                         : nib_host_submit(h, prompt, strlen(prompt), &p, &r)) == NIB_HOST_BUSY &&
           !interrupted && mono_ms() < deadline)
        ;
    if (rc != NIB_HOST_OK) {
        fprintf(stderr, "nib ask: %s\n", interrupted ? "interrupted" : nib_host_error(h));
        nib_host_detach(h);
        convo_free(&conv);
        return 1;
    }
    struct nib_progress pr;
    uint32_t shown = 0, seen = 0;
    int cancelled = 0;
    for (;;) {
        rc = nib_host_wait(h, &r, seen, 100, &pr);
        if (rc != NIB_HOST_OK && rc != NIB_HOST_TIMEOUT) {
            fprintf(stderr, "\nnib ask: %s\n", nib_host_error(h));
            nib_host_detach(h);
            convo_free(&conv);
            return 1;
        }
        if (!pr.done && mono_ms() >= deadline) {
            /* Hanging up ends the request too (the appliance drops a gone
             * host's requests); cancel says it first. */
            nib_host_cancel(h, &r);
            fprintf(stderr,
                    "%snib ask: no answer within %.1f s (--timeout): the request was "
                    "cancelled\n",
                    json || !shown ? "" : "\n", timeout_ms / 1000.0);
            nib_host_detach(h);
            convo_free(&conv);
            return 1;
        }
        if (interrupted && !cancelled) {
            nib_host_cancel(h, &r);
            cancelled = 1;
        }
        if (!json && pr.text_len > shown) {
            /* Never half a character: hold back a trailing incomplete
             * sequence until more bytes come, or the end. */
            uint32_t k = pr.done ? pr.text_len - shown
                                 : (uint32_t)nib_utf8_ready((const uint8_t *)pr.text + shown,
                                                            pr.text_len - shown);
            if (shown == 0 && k && !is_chat)
                text_out(stdout, prompt, strlen(prompt));
            text_out(stdout, pr.text + shown, k);
            fflush(stdout);
            shown += k;
        }
        seen = pr.n_tokens;
        if (pr.done)
            break;
    }
    int exit_rc = pr.status == NIB_ST_BAD_REQUEST || pr.status == NIB_ST_SHUTDOWN ||
                          pr.status == NIB_ST_HOST_CHANGED
                      ? 1
                      : 0;
    uint32_t n_gen = pr.n_tokens - pr.n_prompt;
    double prefill_ms =
        pr.t_first_ns > pr.t_start_ns ? (double)(pr.t_first_ns - pr.t_start_ns) / 1e6 : 0;
    double decode_s =
        pr.t_done_ns > pr.t_first_ns ? (double)(pr.t_done_ns - pr.t_first_ns) / 1e9 : 0;
    if (json) {
        if (is_chat) {
            printf("{\"messages\": ");
            json_messages(stdout, &conv);
        } else {
            printf("{\"prompt\": ");
            json_string(stdout, prompt, strlen(prompt));
        }
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
        printf(", \"timings\": {\"prefill_ms\": %.3f, \"decode_s\": %.6f, \"decode_tokens_per_s\": "
               "%.1f}}\n",
               prefill_ms, decode_s, n_gen > 1 && decode_s > 0 ? (n_gen - 1) / decode_s : 0.0);
    } else {
        if (shown == 0 && !is_chat)
            text_out(stdout, prompt, strlen(prompt));
        fputc('\n', stdout);
        fflush(stdout);
        if (pr.status == NIB_ST_BAD_REQUEST)
            fprintf(stderr, "nib ask: request rejected: %s\n", pr.error);
        else
            fprintf(stderr,
                    "[%u prompt tokens, %u generated, %s; prefill %.1f ms, %.1f tokens/s]\n",
                    pr.n_prompt, n_gen, nib_status_name(pr.status), prefill_ms,
                    n_gen > 1 && decode_s > 0 ? (n_gen - 1) / decode_s : 0.0);
    }
    nib_host_release(h, &r);
    nib_host_detach(h);
    convo_free(&conv);
    return exit_rc;
}

static void stop_usage(FILE *f)
{
    fprintf(f, "usage: nib stop [--name NAME] [--timeout SECONDS (default %d)]\n",
            ASK_TIMEOUT_DEFAULT_S);
}

/* Where boot found the weight shards (docs/ring.md, the statistics page):
 * present only when the appliance filled those fields (NIB_BOOT_PLACED). */
static void json_placement(const struct nib_stats *s)
{
    printf(", \"n_workers\": %u, \"numa_nodes\": %u, \"placement_verified\": %s", s->n_workers,
           s->numa_nodes, (s->boot_flags & NIB_BOOT_PLACED) ? "true" : "false");
    if (!(s->boot_flags & NIB_BOOT_PLACED))
        return;
    printf(", \"placement_kib\": %u, \"shard_bytes\": %llu, \"shard_misplaced_bytes\": %llu, "
           "\"node_shard_bytes\": [",
           s->placement_kib, (unsigned long long)s->shard_bytes,
           (unsigned long long)s->shard_misplaced_bytes);
    uint32_t nodes = s->numa_nodes < NIB_STATS_NODES ? s->numa_nodes : NIB_STATS_NODES;
    for (uint32_t n = 0; n < nodes; n++)
        printf("%s%llu", n ? ", " : "", (unsigned long long)s->node_shard_bytes[n]);
    printf("], \"worker_nodes\": [");
    uint32_t workers =
        s->n_workers < NIB_STATS_WORKER_NODES ? s->n_workers : NIB_STATS_WORKER_NODES;
    for (uint32_t i = 0; i < workers; i++)
        printf("%s%u", i ? ", " : "", nib_stats_worker_node(s, i));
    printf("]");
}

static void stats_usage(FILE *f)
{
    fprintf(f, "usage: nib stats [--name NAME] [--json] [--timeout SECONDS (default %d)]\n",
            ASK_TIMEOUT_DEFAULT_S);
}

/* nib stop and nib stats: --name, --timeout, and for stats --json; no
 * operands. -1 to go on, else the exit status. */
static int parse_name_only(int argc, char **argv, const char *cmd, void (*usage)(FILE *f),
                           const char **name, int *json, int *timeout_ms)
{
    static const struct nib_opt opts[] = {
        {"--name", O_NAME, 1}, {"--timeout", O_TIMEOUT, 1}, {"--json", O_JSON, 0}, {NULL, 0, 0}};
    static const struct nib_opt no_json[] = {
        {"--name", O_NAME, 1}, {"--timeout", O_TIMEOUT, 1}, {NULL, 0, 0}};
    struct nib_args a;
    nib_args_init(&a, cmd, argc, argv, json ? opts : no_json, usage, NULL);
    int o;
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        if (o == O_NAME)
            *name = a.value;
        else if (o == O_TIMEOUT) {
            if (args_timeout(&a, timeout_ms))
                return 2;
        } else
            *json = 1;
    }
    return o == NIB_ARGS_EXIT ? a.status : -1;
}

/* nib stop asks over the socket: it needs no ring and reads nothing from
 * shared memory, so it works whatever that holds. */
int nib_stop_main(int argc, char **argv)
{
    const char *name = NULL;
    int timeout_ms = ASK_TIMEOUT_DEFAULT_S * 1000;
    int rc = parse_name_only(argc, argv, "nib stop", stop_usage, &name, NULL, &timeout_ms);
    if (rc >= 0)
        return rc;
    char err[512];
    rc = nib_host_stop_name(name, timeout_ms, err, sizeof err);
    if (rc != NIB_HOST_OK)
        fprintf(stderr, "nib stop: %s\n", err);
    return rc == NIB_HOST_OK ? 0 : 1;
}

int nib_stats_main(int argc, char **argv)
{
    const char *name = NULL;
    int json = 0, timeout_ms = ASK_TIMEOUT_DEFAULT_S * 1000;
    int rc = parse_name_only(argc, argv, "nib stats", stats_usage, &name, &json, &timeout_ms);
    if (rc >= 0)
        return rc;
    struct nib_host *h;
    if (nib_host_attach(&h, name, timeout_ms) != NIB_HOST_OK) {
        fprintf(stderr, "nib stats: %s\n", nib_host_error(h));
        nib_host_detach(h);
        return 1;
    }
    struct nib_stats s;
    memcpy(&s, nib_host_stats(h), sizeof s);
    struct nib_latency tok, req;
    nib_hist_summary(&nib_token_hist_shape, s.token_hist, s.token_pass_ns_max, &tok);
    nib_hist_summary(&nib_request_hist_shape, s.request_hist, s.request_ns_max, &req);
    if (json) {
        printf(
            "{\"requests_accepted\": %llu, \"requests_done\": %llu, \"requests_rejected\": %llu, "
            "\"requests_cancelled\": %llu, \"slots_reclaimed\": %llu, \"tokens_prompt\": %llu, "
            "\"tokens_generated\": %llu, \"tokens_run\": %llu, \"epoch\": %llu",
            (unsigned long long)s.requests_accepted, (unsigned long long)s.requests_done,
            (unsigned long long)s.requests_rejected, (unsigned long long)s.requests_cancelled,
            (unsigned long long)s.slots_reclaimed, (unsigned long long)s.tokens_prompt,
            (unsigned long long)s.tokens_generated, (unsigned long long)s.tokens_run,
            (unsigned long long)nib_host_epoch(h));
        printf(", \"attaches\": %llu, \"attach_refused\": %llu, \"host_hangups\": %llu, "
               "\"requests_host_changed\": %llu, \"ctl_malformed\": %llu, \"hosts_attached\": %u, "
               "\"socket_lost\": %u",
               (unsigned long long)s.attaches, (unsigned long long)s.attach_refused,
               (unsigned long long)s.host_hangups, (unsigned long long)s.requests_host_changed,
               (unsigned long long)s.ctl_malformed, s.hosts_attached, s.socket_lost);
        json_placement(&s);
        const struct nib_latency *l[2] = {&tok, &req};
        const char *key[2] = {"token_latency_us", "request_latency_us"};
        for (int i = 0; i < 2; i++)
            printf(", \"%s\": {\"count\": %llu, \"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, "
                   "\"p99.9\": %.1f, \"max\": %.1f}",
                   key[i], (unsigned long long)l[i]->count, l[i]->p50 / 1e3, l[i]->p90 / 1e3,
                   l[i]->p99 / 1e3, l[i]->p999 / 1e3, l[i]->max / 1e3);
        printf("}\n");
    } else {
        printf("requests: %llu accepted, %llu done, %llu rejected, %llu cancelled, %llu slots "
               "reclaimed\n",
               (unsigned long long)s.requests_accepted, (unsigned long long)s.requests_done,
               (unsigned long long)s.requests_rejected, (unsigned long long)s.requests_cancelled,
               (unsigned long long)s.slots_reclaimed);
        printf("tokens: %llu prompt, %llu generated, %llu forward passes\n",
               (unsigned long long)s.tokens_prompt, (unsigned long long)s.tokens_generated,
               (unsigned long long)s.tokens_run);
        printf("hosts: %u attached, %llu attaches, %llu refused, %llu hung up, %llu requests "
               "failed because their host changed them, %llu malformed messages\n",
               s.hosts_attached, (unsigned long long)s.attaches,
               (unsigned long long)s.attach_refused, (unsigned long long)s.host_hangups,
               (unsigned long long)s.requests_host_changed, (unsigned long long)s.ctl_malformed);
        if (s.socket_lost)
            printf("warning: the appliance's socket path was removed or replaced: new hosts "
                   "cannot attach\n");
        printf("per-token latency: p50 %.1f us, p90 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f "
               "us\n",
               tok.p50 / 1e3, tok.p90 / 1e3, tok.p99 / 1e3, tok.p999 / 1e3, tok.max / 1e3);
        printf("per-request latency: p50 %.1f us, p99 %.1f us, max %.1f us\n", req.p50 / 1e3,
               req.p99 / 1e3, req.max / 1e3);
    }
    nib_host_detach(h);
    return 0;
}
