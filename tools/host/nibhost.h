/* libnibhost: the host side of the appliance's protocol, version 4.
 * Attach to a running appliance by name over its Unix socket, submit
 * prompts (text, token ids, or a chat conversation the appliance renders
 * with the model's own template) into this host's own ring, read tokens and
 * text as they stream, wait with a timeout, cancel, read statistics, stop
 * the appliance. docs/ring.md is the protocol this library implements;
 * <proto/shm_layout.h> and <proto/ctl.h> (installed beside this header)
 * are its layout and control messages.
 *
 * Attaching: connect to <runtime dir>/<name>.sock (proto/shm_name.h), send
 * ATTACH, receive the appliance's header memfd (mapped read-only) and this
 * host's own ring memfd (mapped read-write). Everything received is checked
 * before use: the reply, the descriptors' sizes and seals, the header's
 * identity, limits and ring geometry, the ring's identity.
 *
 * Every wait is bounded. Calls that take timeout_ms use the default
 * NIB_HOST_TIMEOUT_DEFAULT_MS when it is 0 or negative; no call waits
 * forever. While waiting the library checks, at least every
 * NIB_HOST_CHECK_MS, that the appliance is alive: its socket has not hung
 * up (it exited, crashed or was killed) and its heartbeat in the header is
 * not older than NIB_HEARTBEAT_STALE_NS (it is stopped or stuck). Either
 * returns NIB_HOST_GONE with a message; the handle then stays gone
 * (detach it and attach again).
 *
 * Thread-safety: one nib_host may be used from one thread at a time (slots
 * are claimed with a compare-and-swap, so two handles of one process, or
 * threads that share one handle under their own lock, never take the same
 * slot). A handle belongs to the process that attached it: after fork()
 * the child's first call on an inherited handle attaches afresh (the
 * child's own connection and ring; the parent's stay the parent's), and
 * request handles taken before the fork are not valid in the child. The
 * check costs no system call (a pthread_atfork handler counts forks), so a
 * raw clone() that runs no fork handlers is not noticed.
 *
 * Changes from protocol version 2 (this library's previous API):
 *   - nib_host_attach takes timeout_ms (connect, reply, a booting appliance).
 *   - timeout_ms 0 or negative means the default, never "no limit"
 *     (nib_host_wait, nib_host_stop); busy_wait_ms < 0 means the default.
 *   - nib_host_stop_name stops an appliance without attaching (nib stop):
 *     it needs only the socket, whatever the shared memory holds.
 *   - nib_host_appliance_pid is informational only (liveness comes from the
 *     socket); nib_host_host_index names this host's ring.
 *   - limits (prompt bytes, tokens, text) come from the appliance's header:
 *     nib_host_prompt_max, nib_host_slot_tokens, nib_host_slot_text,
 *     nib_host_slots.
 *
 * Changes for protocol version 4:
 *   - nib_host_submit_chat sends a conversation (struct nib_chat_msg);
 *     nib_host_has_chat says whether the model has a chat template.
 *   - nib_gen_params gains special (control tokens written as text map to
 *     their ids), no_generation_prompt and now_s (chat), at its end.
 *   - a prompt or conversation larger than the appliance's prompt area is
 *     refused here, before anything is written (ERR, with both sizes).
 *   - text streams in whole UTF-8 characters (the appliance publishes
 *     text_len only up to one); status "eos" means any end-of-generation
 *     token of the model.
 *   - a vision appliance (header feature TENSOR, docs/ring.md 6.4):
 *     nib_host_is_vision, nib_host_tensor_info, nib_host_submit_tensors,
 *     nib_host_output; text and chat to it are refused here. */
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
    NIB_HOST_BUSY = 1, /* back-pressure, retry later: every slot of this host's ring
                                 (attach: every ring of the appliance) is in use */
    NIB_HOST_TIMEOUT = 2,
    NIB_HOST_ERR = -1,  /* message in nib_host_error() */
    NIB_HOST_GONE = -2, /* the appliance stopped, exited, died or stopped answering */
};

/* The bound on every wait when the caller passes 0 (or less). */
#define NIB_HOST_TIMEOUT_DEFAULT_MS 60000
/* Liveness is checked at least this often while waiting. */
#define NIB_HOST_CHECK_MS 100

struct nib_gen_params {
    uint32_t max_tokens; /* 0: 64 */
    float temperature;   /* 0: greedy; at most 100 */
    uint64_t seed;
    int no_bos;               /* do not prepend BOS */
    int prompt_ids;           /* the prompt is uint32_t token ids; len counts ids */
    uint64_t request_id;      /* echoed in nib_progress, never read by the appliance */
    int busy_wait_ms;         /* ring full: 0 return BUSY at once, > 0 wait up to this long,
                             < 0 wait up to NIB_HOST_TIMEOUT_DEFAULT_MS; then BUSY */
    int special;              /* control tokens written as text (<|im_end|>) map to their ids;
                             in a chat request, in the messages too */
    int no_generation_prompt; /* chat: do not end with the assistant's turn opening */
    int64_t now_s;            /* chat: what the template's strftime_now() formats (UTC
                                 seconds since 1970); 0: the appliance's clock */
};

/* One chat message. role: printable ASCII, 1..64 bytes ("system", "user",
 * "assistant", ...). content: content_len bytes, or when content_len is 0
 * a NUL-terminated string (NULL: empty). */
struct nib_chat_msg {
    const char *role;
    const char *content;
    size_t content_len;
};

struct nib_req_handle {
    uint32_t slot;
    uint64_t ticket;
};

/* A snapshot of a request's progress. tokens and text point into this
 * host's ring and stay valid until nib_host_release() or detach. text is the
 * model's bytes as they are (not necessarily UTF-8: see <proto/utf8.h>). */
struct nib_progress {
    uint32_t done;     /* final status posted */
    uint32_t status;   /* enum nib_status once done (nib_status_name) */
    uint32_t n_prompt; /* prompt token ids (with BOS) */
    uint32_t n_tokens; /* prompt + generated ids published so far */
    const uint32_t *tokens;
    uint32_t text_len;
    const char *text;
    char error[128]; /* for NIB_ST_BAD_REQUEST: "field: why" */
    uint64_t request_id;
    uint64_t t_start_ns, t_first_ns, t_done_ns; /* the appliance's clock */
};

/* nib_host_wait's seen_tokens value that waits for the final status only. */
#define NIB_HOST_WAIT_DONE UINT32_MAX

/* Attach to the appliance named `name` (NULL: "nib"), waiting at most
 * timeout_ms (0: the default). Refuses, with a message, anything that is
 * not exactly the layout this library was built for (ERR), an appliance
 * that does not answer in time (TIMEOUT) or is not responding (GONE).
 * BUSY: every ring is attached (the appliance's --max-hosts); try again
 * later. On failure *h is still set (for nib_host_error); detach it. */
int nib_host_attach(struct nib_host **h, const char *name, int timeout_ms);
/* DETACH, close the connection, unmap. NULL is fine. */
void nib_host_detach(struct nib_host *h);
const char *nib_host_error(const struct nib_host *h);
/* The boot this handle is attached to. */
uint64_t nib_host_epoch(const struct nib_host *h);
/* From the header: the appliance's pid (informational), the model's limits. */
uint32_t nib_host_appliance_pid(const struct nib_host *h);
uint32_t nib_host_vocab_size(const struct nib_host *h);
uint32_t nib_host_ctx_len(const struct nib_host *h);
/* This host's ring: its index, its slots, and their areas' sizes. */
uint32_t nib_host_host_index(const struct nib_host *h);
uint32_t nib_host_slots(const struct nib_host *h);
uint32_t nib_host_prompt_max(const struct nib_host *h);  /* bytes */
uint32_t nib_host_slot_tokens(const struct nib_host *h); /* prompt + generated ids */
uint32_t nib_host_slot_text(const struct nib_host *h);   /* bytes */

/* Is the appliance this handle attached to still serving? OK or GONE. */
int nib_host_check(struct nib_host *h);

/* Claim a slot and submit. len is bytes of text, or with p->prompt_ids a
 * count of uint32_t ids. Returns NIB_HOST_BUSY when no slot is free (after
 * p->busy_wait_ms), ERR for arguments the appliance would reject. Sends
 * KICK when the header says the appliance sleeps. */
int nib_host_submit(struct nib_host *h, const void *prompt, size_t len,
                    const struct nib_gen_params *p, struct nib_req_handle *out);

/* Claim a slot and submit a conversation of n messages, rendered by the
 * appliance with the model's chat template, then generated from (p as for
 * nib_host_submit; prompt_ids must be 0). ERR, before anything is sent:
 * the model has no chat template, a role is invalid, or the encoded
 * conversation is larger than nib_host_prompt_max() (the message says
 * both sizes). The template's own refusals (roles that do not alternate,
 * ...) come back as status bad_request, error "messages: ...". */
int nib_host_submit_chat(struct nib_host *h, const struct nib_chat_msg *msgs, size_t n,
                         const struct nib_gen_params *p, struct nib_req_handle *out);

/* Bytes the conversation takes in the prompt area (compare with
 * nib_host_prompt_max), or 0 when it cannot be encoded (a bad role, more
 * than 16384 messages). */
size_t nib_host_chat_size(const struct nib_chat_msg *msgs, size_t n);

/* Claim a slot and ask for a measurement (kind MEASURE, docs/ring.md 6.3):
 * `passes` reference-loop passes at positions first_pos.., run between
 * requests. Once done, tokens[0 .. n_tokens) hold each pass's nanoseconds
 * (n_prompt is 0). ERR when the appliance does not offer it or the
 * positions pass the context. Waits for a free slot without limit. */
int nib_host_submit_measure(struct nib_host *h, uint32_t first_pos, uint32_t passes,
                            struct nib_req_handle *out);

/* 1 when the appliance serves measurements (nib_host_submit_measure). */
int nib_host_measures(const struct nib_host *h);

/* 1 when the served model has a chat template (nib_host_submit_chat). */
int nib_host_has_chat(const struct nib_host *h);

/* A vision model (the header's TENSOR feature): tensors in, tensors out,
 * requests of kind TENSOR only (docs/ring.md section 6.4). The model's
 * inputs and outputs as its tensor table declares them: name, element type
 * (NIB_TENSOR_F32 1, NIB_TENSOR_U8 2), dims, exact bytes (dense,
 * row-major, little-endian). */
struct nib_tensor_info {
    const char *name; /* valid while attached */
    uint32_t dtype;
    uint32_t rank;
    uint32_t dims[8];
    size_t bytes;
};
int nib_host_is_vision(const struct nib_host *h);
uint32_t nib_host_n_inputs(const struct nib_host *h);  /* 0 for a decoder */
uint32_t nib_host_n_outputs(const struct nib_host *h); /* 0 for a decoder */
/* Input (output 0) or output (output 1) i: OK, or ERR when there is none. */
int nib_host_tensor_info(const struct nib_host *h, int output, uint32_t i,
                         struct nib_tensor_info *out);
/* Submit one run: inputs[i] holds lens[i] bytes, exactly input i's bytes,
 * n the model's input count; anything else is refused here (ERR, naming
 * the input) before anything is written. busy_wait_ms as in
 * nib_gen_params. Then nib_host_wait(..., NIB_HOST_WAIT_DONE, ...). */
int nib_host_submit_tensors(struct nib_host *h, const void *const *inputs, const size_t *lens,
                            size_t n, int busy_wait_ms, struct nib_req_handle *out);
/* Output i of a finished request (pr from nib_host_wait or _poll: done,
 * status ok): its bytes in this host's ring (valid until release), with
 * *len its size; NULL otherwise. */
const void *nib_host_output(const struct nib_host *h, const struct nib_progress *pr, uint32_t i,
                            size_t *len);

/* Non-blocking snapshot. Returns OK, GONE (only while the request is not
 * done), or ERR (the slot no longer holds this request). */
int nib_host_poll(struct nib_host *h, const struct nib_req_handle *r, struct nib_progress *pr);

/* Wait until more than seen_tokens ids are published, or the request is
 * done, or timeout_ms passes (0 or less: the default). seen_tokens =
 * NIB_HOST_WAIT_DONE waits for the final status only (sleeping on the
 * ring's done_seq futex); streaming waits poll with a backoff (50 us
 * doubling to 2 ms): the appliance makes no system call per token.
 * Returns OK, TIMEOUT, GONE or ERR; pr is filled in every case but ERR. */
int nib_host_wait(struct nib_host *h, const struct nib_req_handle *r, uint32_t seen_tokens,
                  int timeout_ms, struct nib_progress *pr);

/* Ask the appliance to stop this request; it then completes CANCELLED
 * (after at most one more token), or OK / EOS when the token being made
 * as the cancel lands was its last anyway. Wait for it, then release. */
int nib_host_cancel(struct nib_host *h, const struct nib_req_handle *r);

/* Give a finished (done) request's slot back. */
int nib_host_release(struct nib_host *h, const struct nib_req_handle *r);

/* Ask the appliance to shut down over this handle's connection; waits up
 * to timeout_ms (0: the default) for its STOPPING reply and for it to exit
 * (the connection's end). OK, TIMEOUT, ERR (refused: the message says why). */
int nib_host_stop(struct nib_host *h, int timeout_ms);

/* The same without attaching: connect to NAME's socket, send STOP, wait as
 * above. Works whatever the shared memory holds, and when every ring is
 * taken. err (errlen bytes) gets the message on failure. */
int nib_host_stop_name(const char *name, int timeout_ms, char *err, size_t errlen);

/* Read-only view of the statistics page (struct nib_stats in
 * <proto/stats_layout.h>); counters only ever grow. */
const void *nib_host_stats(const struct nib_host *h);

/* "ok", "eos", "cancelled", ... ("unknown" for other values). */
const char *nib_status_name(uint32_t status);

#ifdef __cplusplus
}
#endif

#endif
