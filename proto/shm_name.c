#include "proto/shm_name.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/shm_layout.h"

int nib_name_check(const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (n == 0 || n > NIB_SHM_NAME_MAX - 8) {
        snprintf(err, errlen, "name must be 1..%d characters", NIB_SHM_NAME_MAX - 8);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-' || c == '.';
        if (!ok || (i == 0 && c == '.')) {
            snprintf(err, errlen,
                     "name '%s' may only hold letters, digits, '_', '-', '.' "
                     "(not starting with '.')",
                     name);
            return -1;
        }
    }
    return 0;
}

int nib_runtime_dir(char *dir, size_t cap, char *err, size_t errlen)
{
    const char *env = getenv("NIB_RUNTIME_DIR");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    if (env && *env)
        n = snprintf(dir, cap, "%s", env);
    else if (xdg && *xdg)
        n = snprintf(dir, cap, "%s/nibble", xdg);
    else
        n = snprintf(dir, cap, "/tmp/nibble-%u", (unsigned)geteuid());
    if (n < 0 || (size_t)n >= cap) {
        snprintf(err, errlen,
                 "runtime directory path too long (at most %zu bytes; set "
                 "NIB_RUNTIME_DIR to a shorter one)",
                 cap - 1);
        return -1;
    }
    if (dir[0] != '/') {
        snprintf(err, errlen, "runtime directory '%s' is not an absolute path", dir);
        return -1;
    }
    /* Without trailing slashes, so lstat sees the directory itself. */
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = 0;
    return 0;
}

int nib_name_paths(const char *name, struct nib_name_paths *p, char *err, size_t errlen)
{
    if (nib_name_check(name, err, errlen) || nib_runtime_dir(p->dir, sizeof p->dir, err, errlen))
        return -1;
    if ((size_t)snprintf(p->lock, sizeof p->lock, "%s/%s.lock", p->dir, name) >= sizeof p->lock ||
        (size_t)snprintf(p->sock, sizeof p->sock, "%s/%s.sock", p->dir, name) >= sizeof p->sock) {
        snprintf(err, errlen,
                 "socket path %s/%s.sock is longer than a Unix socket address "
                 "allows (%d bytes); set NIB_RUNTIME_DIR to a shorter directory",
                 p->dir, name, NIB_PATH_MAX - 1);
        return -1;
    }
    return 0;
}

static int dir_lstat(const char *dir, struct stat *st, char *err, size_t errlen)
{
    if (lstat(dir, st) != 0) {
        snprintf(err, errlen, "runtime directory %s: %s", dir, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st->st_mode)) {
        snprintf(err, errlen, "runtime directory %s is a symbolic link", dir);
        return -1;
    }
    if (!S_ISDIR(st->st_mode)) {
        snprintf(err, errlen, "runtime directory %s is not a directory", dir);
        return -1;
    }
    return 0;
}

int nib_runtime_dir_check(const char *dir, uint32_t uid, int group_access, char *err, size_t errlen)
{
    struct stat st;
    if (dir_lstat(dir, &st, err, errlen))
        return -1;
    if (st.st_uid != uid) {
        snprintf(err, errlen,
                 "runtime directory %s is owned by uid %u, not by this "
                 "appliance's uid %u",
                 dir, (unsigned)st.st_uid, (unsigned)uid);
        return -1;
    }
    unsigned want = group_access ? 0750u : 0700u, mode = (unsigned)st.st_mode & 07777u;
    if (mode != want) {
        snprintf(err, errlen,
                 "runtime directory %s has mode %04o, want exactly %04o%s (chmod "
                 "%04o %s, or remove it)",
                 dir, mode, want, group_access ? " for --group-access" : "", want, dir);
        return -1;
    }
    return 0;
}

int nib_runtime_dir_check_host(const char *dir, uint32_t uid, char *err, size_t errlen)
{
    struct stat st;
    if (dir_lstat(dir, &st, err, errlen))
        return -1;
    unsigned mode = (unsigned)st.st_mode & 07777u;
    if (mode & 022u) {
        snprintf(err, errlen, "runtime directory %s has mode %04o: others can write it", dir, mode);
        return -1;
    }
    if (st.st_uid != uid && st.st_uid != 0 && mode != 0750u) {
        snprintf(err, errlen, "runtime directory %s is owned by uid %u, not by this uid %u", dir,
                 (unsigned)st.st_uid, (unsigned)uid);
        return -1;
    }
    return 0;
}
