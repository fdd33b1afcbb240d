/* Where an appliance's name lives (protocol version 3, docs/ring.md): a
 * runtime directory holding <name>.lock (the appliance's flock, held for its
 * whole life) and <name>.sock (its control socket, proto/ctl.h). The
 * appliance and every host compute the paths with the same function.
 *
 * Runtime directory: $NIB_RUNTIME_DIR if set (non-empty); else
 * $XDG_RUNTIME_DIR/nibble if XDG_RUNTIME_DIR is set; else /tmp/nibble-<uid>.
 * The appliance creates it mode 0700 (0750 with --group-access) and boots
 * only if lstat shows a directory, not a link, owned by its uid, of exactly
 * that mode. */
#ifndef NIB_SHM_NAME_H
#define NIB_SHM_NAME_H

#include <stddef.h>
#include <stdint.h>

#define NIB_PATH_MAX 108 /* sizeof(sockaddr_un.sun_path): every path fits in it */

struct nib_name_paths {
    char dir[NIB_PATH_MAX];
    char lock[NIB_PATH_MAX]; /* <dir>/<name>.lock */
    char sock[NIB_PATH_MAX]; /* <dir>/<name>.sock */
};

/* NAME must be 1..NIB_SHM_NAME_MAX-8 characters of [A-Za-z0-9_.-], not
 * starting with '.'. 0, or -1 with a message. */
int nib_name_check(const char *name, char *err, size_t errlen);

/* The runtime directory for this process's environment and uid. */
int nib_runtime_dir(char *dir, size_t cap, char *err, size_t errlen);

/* dir, lock and socket paths of NAME (nib_name_check, nib_runtime_dir; each
 * path must fit in a Unix socket address). 0, or -1 with a message. */
int nib_name_paths(const char *name, struct nib_name_paths *p, char *err, size_t errlen);

/* The appliance's rule: lstat(dir) is a directory (not a symbolic link)
 * owned by uid, mode exactly 0700, or 0750 when group_access. 0, or -1 with
 * a message naming what differs. */
int nib_runtime_dir_check(const char *dir, uint32_t uid, int group_access, char *err,
                          size_t errlen);

/* A host's rule: lstat(dir) is a directory (not a link), nobody but its
 * owner can write it (mode & 022 == 0), and it is owned by uid (the host's
 * own) or root, or, mode 0750, by another uid (an appliance started with
 * --group-access). The socket's peer is the real check (SO_PEERCRED). */
int nib_runtime_dir_check_host(const char *dir, uint32_t uid, char *err, size_t errlen);

#endif
