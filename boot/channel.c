/* Boot step: the name and everything a host will get (protocol version 3,
 * docs/ring.md). Nothing here trusts a file it finds: liveness is the
 * kernel's flock on <name>.lock, held for the appliance's whole life;
 * whatever sits at <name>.sock once the lock is ours is stale and goes.
 *
 *   runtime dir   created 0700 (0750 with --group-access), then checked
 *                 with lstat: a directory, ours, exactly that mode;
 *   lock          open O_NOFOLLOW, flock(LOCK_EX | LOCK_NB): held -> refuse;
 *   socket        SOCK_SEQPACKET, bound after removing anything at the path,
 *                 mode 0600 (0660), its (dev, ino) recorded: at exit it is
 *                 unlinked only if the path still is that inode;
 *   header memfd  one page, written, then sealed FUTURE_WRITE | SHRINK |
 *                 GROW | SEAL (our mapping stays writable, no host's can be);
 *   ring memfds   --max-hosts of them, ring_size bytes each, prefaulted,
 *                 sealed SHRINK | GROW | SEAL.
 *
 * Everything is made before the serving thread's seccomp filter: nothing
 * is created or mapped after boot. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "boot/boot.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

int boot_name(const char *name, int group_access, struct boot_channel *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    c->lock_fd = c->listen_fd = c->header_fd = -1;
    c->group_access = group_access;
    for (uint32_t i = 0; i < NIB_HOSTS_MAX; i++)
        c->ring_fd[i] = -1;
    if (nib_name_paths(name, &c->paths, err, errlen))
        return -1;
    const char *dir = c->paths.dir;
    mode_t mode = group_access ? 0750 : 0700;
    if (mkdir(dir, mode) == 0) {
        /* Ours, just made: the mode exactly, whatever the umask. */
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0 || fchmod(dfd, mode) != 0 ||
            (group_access && fchown(dfd, (uid_t)-1, getegid()) != 0)) {
            snprintf(err, errlen, "runtime directory %s: cannot set mode %04o: %s", dir,
                     (unsigned)mode, strerror(errno));
            if (dfd >= 0)
                close(dfd);
            return -1;
        }
        close(dfd);
    } else if (errno != EEXIST) {
        snprintf(err, errlen,
                 "cannot create runtime directory %s: %s (set NIB_RUNTIME_DIR to "
                 "a directory this user may create)",
                 dir, strerror(errno));
        return -1;
    }
    if (nib_runtime_dir_check(dir, (uint32_t)geteuid(), group_access, err, errlen))
        return -1;
    if (group_access) {
        struct stat st;
        if (lstat(dir, &st) != 0 || st.st_gid != getegid()) {
            snprintf(err, errlen,
                     "runtime directory %s: group is not this appliance's group "
                     "%u (chgrp %u %s)",
                     dir, (unsigned)getegid(), (unsigned)getegid(), dir);
            return -1;
        }
    }

    int fd = open(c->paths.lock, O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "cannot open lock file %s: %s", c->paths.lock,
                 fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK)
            snprintf(err, errlen,
                     "name %s is in use by a running appliance (%s is locked); "
                     "stop it (nib stop --name %s) or choose another --name",
                     name, c->paths.lock, name);
        else
            snprintf(err, errlen, "cannot lock %s: %s", c->paths.lock, strerror(e));
        return -1;
    }
    c->lock_fd = fd;
    return 0;
}

int boot_listen(struct boot_channel *c, char *err, size_t errlen)
{
    const char *path = c->paths.sock;
    /* The lock is ours: anything at the path is stale, whatever it is. */
    if (unlink(path) != 0 && errno != ENOENT) {
        if (errno != EISDIR || rmdir(path) != 0) {
            snprintf(err, errlen, "cannot remove stale %s: %s", path, strerror(errno));
            return -1;
        }
    }
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, path, strlen(path) + 1);
    struct stat st;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        chmod(path, c->group_access ? 0660 : 0600) != 0 || listen(fd, 64) != 0 ||
        lstat(path, &st) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    c->listen_fd = fd;
    c->sock_dev = (uint64_t)st.st_dev;
    c->sock_ino = (uint64_t)st.st_ino;
    return 0;
}

void boot_unlisten(struct boot_channel *c)
{
    struct stat st;
    if (c->listen_fd < 0)
        return;
    if (lstat(c->paths.sock, &st) == 0 && (uint64_t)st.st_dev == c->sock_dev &&
        (uint64_t)st.st_ino == c->sock_ino)
        unlink(c->paths.sock);
}

static void *make_memfd(const char *name, uint64_t size, int *fd_out, char *err, size_t errlen)
{
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        snprintf(err, errlen, "memfd_create(%s): %s", name, strerror(errno));
        return NULL;
    }
    if (ftruncate(fd, (off_t)size) != 0) {
        snprintf(err, errlen, "cannot size %s to %llu bytes: %s", name, (unsigned long long)size,
                 strerror(errno));
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "cannot map %s (%llu bytes): %s", name, (unsigned long long)size,
                 strerror(errno));
        close(fd);
        return NULL;
    }
    memset(p, 0, size); /* prefault: every page exists before READY */
    *fd_out = fd;
    return p;
}

int boot_memfds(struct boot_channel *c, uint32_t header_size, uint32_t n_rings, uint64_t ring_size,
                char *err, size_t errlen)
{
    c->header = make_memfd("nibble-header", header_size, &c->header_fd, err, errlen);
    if (!c->header)
        return -1;
    c->n_rings = n_rings;
    c->ring_size = ring_size;
    for (uint32_t i = 0; i < n_rings; i++) {
        char name[32];
        snprintf(name, sizeof name, "nibble-ring-%u", i);
        c->ring[i] = make_memfd(name, ring_size, &c->ring_fd[i], err, errlen);
        if (!c->ring[i])
            return -1;
        if (fcntl(c->ring_fd[i], F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
            snprintf(err, errlen, "sealing %s: %s", name, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int boot_seal_header(struct boot_channel *c, char *err, size_t errlen)
{
    if (fcntl(c->header_fd, F_ADD_SEALS,
              F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        snprintf(err, errlen,
                 "sealing the header memfd: %s (F_SEAL_FUTURE_WRITE needs Linux "
                 "5.1 or later)",
                 strerror(errno));
        return -1;
    }
    return 0;
}
