/* Segment names: a short word chosen by the user, mapped to a POSIX shm path. */
#ifndef NIB_SHM_NAME_H
#define NIB_SHM_NAME_H

#include <stddef.h>

/* "/nibble-NAME" into path; NAME must be 1..NIB_SHM_NAME_MAX-8 characters of
 * [A-Za-z0-9_.-]. 0, or -1 with a message. */
int nib_shm_path(const char *name, char *path, size_t cap, char *err, size_t errlen);

#endif
