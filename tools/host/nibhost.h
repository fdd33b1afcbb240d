/* libnibhost: the host side of the appliance's shared-memory protocol.
 * Attach to a running appliance by name, submit prompts, read tokens and
 * text as they stream, cancel, and read statistics. See docs/ring.md for
 * the layout this library implements.
 *
 * Thread-safety: one nib_host may be used from one thread at a time;
 * separate processes (and separate nib_host handles) may submit
 * concurrently. */
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
    NIB_HOST_GONE = -2,       /* the appliance stopped or restarted (epoch changed) */
};

struct nib_gen_params {
    uint32_t max_tokens;  /* default 64 */
    float temperature;    /* <= 0: greedy */
    uint64_t seed;
    int no_bos;           /* do not prepend BOS */
};

struct nib_req_handle {
    uint32_t slot;
    uint64_t ticket;
};

/* A snapshot of a request's progress. Pointers point into shared memory and
 * stay valid until nib_host_release(). */
struct nib_progress {
    uint32_t done;            /* final status posted */
    uint32_t status;          /* enum nib_status once done */
    uint32_t n_prompt;        /* prompt token ids (with BOS) */
    uint32_t n_tokens;        /* prompt + generated ids published so far */
    const uint32_t *tokens;
    uint32_t text_len;
    const char *text;
    const char *error;        /* for NIB_ST_BAD_REQUEST */
    uint64_t t_start_ns, t_first_ns, t_done_ns;
};

/* Attach to the appliance serving segment `name` (NULL: "nib"). Checks the
 * segment's magic, version, sizes and that the appliance is READY. */
int nib_host_attach(struct nib_host **h, const char *name);
void nib_host_detach(struct nib_host *h);
const char *nib_host_error(const struct nib_host *h);

/* Claim a slot and submit. Returns NIB_HOST_BUSY when no slot is free. */
int nib_host_submit(struct nib_host *h, const char *prompt, size_t len,
                    const struct nib_gen_params *p, struct nib_req_handle *out);

/* Non-blocking snapshot. Returns NIB_HOST_OK or NIB_HOST_GONE/ERR. */
int nib_host_poll(struct nib_host *h, const struct nib_req_handle *r, struct nib_progress *pr);

/* Wait until more output than (n_tokens, text_len) already seen, or done,
 * or timeout_ms (< 0: forever). Returns OK, TIMEOUT, GONE or ERR. */
int nib_host_wait(struct nib_host *h, const struct nib_req_handle *r, uint32_t seen_tokens,
                  int timeout_ms, struct nib_progress *pr);

/* Ask the appliance to stop this request; it then completes CANCELLED. */
int nib_host_cancel(struct nib_host *h, const struct nib_req_handle *r);

/* Give a finished (done) request's slot back. */
int nib_host_release(struct nib_host *h, const struct nib_req_handle *r);

/* Ask the appliance to shut down; waits up to timeout_ms for it to finish. */
int nib_host_stop(struct nib_host *h, int timeout_ms);

/* Read-only view of the statistics page (struct nib_stats in shm_layout.h). */
const void *nib_host_stats(const struct nib_host *h);

const char *nib_status_name(uint32_t status);

#ifdef __cplusplus
}
#endif

#endif
