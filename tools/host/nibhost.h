/* libnibhost: the host side of the appliance's shared-memory protocol.
 * Attach to a running appliance by name, submit prompts (text or token ids),
 * read tokens and text as they stream, wait with a timeout, cancel, and read
 * statistics. docs/ring.md is the protocol this library implements;
 * <proto/shm_layout.h> (installed beside this header) is its layout.
 *
 * Every call that talks to the appliance notices when it has died, stopped
 * or been restarted (a new boot has a new epoch) and returns NIB_HOST_GONE
 * with a message, instead of waiting forever.
 *
 * Thread-safety: one nib_host may be used from one thread at a time;
 * separate processes, and separate nib_host handles in one process, may
 * submit concurrently. A handle belongs to the process that attached it:
 * attach again after fork(). */
#ifndef NIBHOST_H
#define NIBHOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct nib_host;

enum nib_host_rc {
    NIB_HOST_OK = 0,
    NIB_HOST_BUSY = 1,        /* every slot is in use: back-pressure, retry later */
    NIB_HOST_TIMEOUT = 2,
    NIB_HOST_ERR = -1,        /* message in nib_host_error() */
    NIB_HOST_GONE = -2,       /* the appliance stopped, died or restarted */
};

struct nib_gen_params {
    uint32_t max_tokens;  /* 0: 64 */
    float temperature;    /* 0: greedy; at most 100 */
    uint64_t seed;
    int no_bos;           /* do not prepend BOS */
    int prompt_ids;       /* the prompt is uint32_t token ids; len counts ids */
    uint64_t request_id;  /* echoed in nib_progress, never read by the appliance */
    int busy_wait_ms;     /* table full: 0 return BUSY at once, < 0 wait forever,
                             > 0 wait up to this long, then BUSY */
};

struct nib_req_handle {
    uint32_t slot;
    uint64_t ticket;
};

/* A snapshot of a request's progress. tokens and text point into shared
 * memory and stay valid until nib_host_release(). */
struct nib_progress {
    uint32_t done;            /* final status posted */
    uint32_t status;          /* enum nib_status once done (nib_status_name) */
    uint32_t n_prompt;        /* prompt token ids (with BOS) */
    uint32_t n_tokens;        /* prompt + generated ids published so far */
    const uint32_t *tokens;
    uint32_t text_len;
    const char *text;
    char error[128];          /* for NIB_ST_BAD_REQUEST: "field: why" */
    uint64_t request_id;
    uint64_t t_start_ns, t_first_ns, t_done_ns;
};

/* nib_host_wait's seen_tokens value that waits for the final status only. */
#define NIB_HOST_WAIT_DONE UINT32_MAX

/* Attach to the appliance serving segment `name` (NULL: "nib"). Checks the
 * header field by field against the layout this library was built for
 * (magic, version, sizes, offsets, limits) and that the appliance is READY.
 * On failure *h is still set (for nib_host_error); detach it. */
int nib_host_attach(struct nib_host **h, const char *name);
void nib_host_detach(struct nib_host *h);
const char *nib_host_error(const struct nib_host *h);
/* The boot this handle is attached to. */
uint64_t nib_host_epoch(const struct nib_host *h);
/* From the header: the appliance's pid, and the model's limits. */
uint32_t nib_host_appliance_pid(const struct nib_host *h);
uint32_t nib_host_vocab_size(const struct nib_host *h);
uint32_t nib_host_ctx_len(const struct nib_host *h);

/* Is the appliance this handle attached to still serving? OK or GONE. */
int nib_host_check(struct nib_host *h);

/* Claim a slot and submit. len is bytes of text, or with p->prompt_ids a
 * count of uint32_t ids. Returns NIB_HOST_BUSY when no slot is free (after
 * p->busy_wait_ms), ERR for arguments the appliance would reject. */
int nib_host_submit(struct nib_host *h, const void *prompt, size_t len,
                    const struct nib_gen_params *p, struct nib_req_handle *out);

/* Non-blocking snapshot. Returns OK, GONE, or ERR (the slot no longer holds
 * this request). */
int nib_host_poll(struct nib_host *h, const struct nib_req_handle *r, struct nib_progress *pr);

/* Wait until more than seen_tokens ids are published, or the request is
 * done, or timeout_ms passes (< 0: no limit). seen_tokens =
 * NIB_HOST_WAIT_DONE waits for the final status only (sleeping on a futex).
 * Returns OK, TIMEOUT, GONE or ERR; pr is filled in every case but ERR. */
int nib_host_wait(struct nib_host *h, const struct nib_req_handle *r, uint32_t seen_tokens,
                  int timeout_ms, struct nib_progress *pr);

/* Ask the appliance to stop this request; it then completes CANCELLED
 * (after at most one more token). Wait for it, then release. */
int nib_host_cancel(struct nib_host *h, const struct nib_req_handle *r);

/* Give a finished (done) request's slot back. */
int nib_host_release(struct nib_host *h, const struct nib_req_handle *r);

/* Ask the appliance to shut down; waits up to timeout_ms for it to finish. */
int nib_host_stop(struct nib_host *h, int timeout_ms);

/* Read-only view of the statistics page (struct nib_stats in
 * <proto/stats_layout.h>); counters only ever grow. */
const void *nib_host_stats(const struct nib_host *h);

/* "ok", "eos", "cancelled", ... ("unknown" for other values). */
const char *nib_status_name(uint32_t status);

#ifdef __cplusplus
}
#endif

#endif
