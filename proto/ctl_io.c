#include "proto/private/ctl_io.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

union ctl_buf {
    struct cmsghdr h;
    char buf[CMSG_SPACE(NIB_CTL_FDS_MAX * sizeof(int))];
};

int nib_ctl_send(int fd, const struct nib_ctl_msg *m, const int *fds, int nfds, int flags)
{
    if (nfds < 0 || nfds > NIB_CTL_FDS_MAX) {
        errno = EINVAL;
        return -1;
    }
    struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof *m};
    union ctl_buf u;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (nfds > 0) {
        memset(&u, 0, sizeof u);
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
    }
    return sendmsg(fd, &msg, flags) == (ssize_t)sizeof *m ? 0 : -1;
}

ssize_t nib_ctl_recv(int fd, void *buf, size_t len, int flags, int *fds, int max_fds, int *n_fds)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    union ctl_buf u;
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (n_fds) {
        *n_fds = 0;
        msg.msg_control = u.buf;
        msg.msg_controllen = sizeof u.buf;
    }
    ssize_t n = recvmsg(fd, &msg, flags);
    if (n < 0)
        return -1;
    if (n_fds)
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int got;
                memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
                if (fds && *n_fds < max_fds)
                    fds[*n_fds] = got;
                else
                    close(got);
                (*n_fds)++; /* counts them all: the caller judges how many */
            }
        }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        errno = EMSGSIZE;
        return -1;
    }
    return n;
}
