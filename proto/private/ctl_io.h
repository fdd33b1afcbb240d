/* One control message (proto/ctl.h) over the Unix socket, with its
 * descriptors (SCM_RIGHTS): the one sendmsg/recvmsg of the project, shared
 * by the appliance (rt/control.c), libnibhost and the tests that play
 * either side. Private (never installed, libc only): how a side moves the
 * bytes is its own business; the message layout is in proto/ctl.h. Each
 * caller passes the flags it needs (the appliance MSG_DONTWAIT |
 * MSG_NOSIGNAL, a host MSG_CMSG_CLOEXEC). */
#ifndef NIB_PROTO_PRIVATE_CTL_IO_H
#define NIB_PROTO_PRIVATE_CTL_IO_H

#include <sys/types.h>

#include "proto/ctl.h"

/* The most descriptors one message carries or one receive takes in. */
#define NIB_CTL_FDS_MAX 8

/* Send m with nfds descriptors (0 to NIB_CTL_FDS_MAX; fds may be NULL
 * when 0) in one sendmsg with flags. Returns 0 when the whole message
 * went, else -1 (errno EINVAL for too many descriptors). */
int nib_ctl_send(int fd, const struct nib_ctl_msg *m, const int *fds, int nfds, int flags);

/* Receive one message into buf (len bytes) with one recvmsg with flags.
 * n_fds NULL: no control buffer at all, so the kernel installs no
 * descriptor a peer sends (it drops them: MSG_CTRUNC). Otherwise up to
 * NIB_CTL_FDS_MAX descriptors are taken in; the first max_fds go into fds,
 * the rest are closed, and *n_fds counts all that came. Returns the
 * message's length, 0 at the connection's end, -1 with errno (EMSGSIZE
 * when the message or its descriptors did not fit: MSG_TRUNC, MSG_CTRUNC;
 * the descriptors that came are still counted). */
ssize_t nib_ctl_recv(int fd, void *buf, size_t len, int flags, int *fds, int max_fds, int *n_fds);

#endif
