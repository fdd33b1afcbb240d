/* Helpers every room of tools/ uses: whole-file mapping, error messages and
 * strict number parsing for options (args.h: the option conventions). The lowest rank
 * inside tools/: includes nothing of tools/. */
#ifndef NIB_TOOL_UTIL_H
#define NIB_TOOL_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Format a message into err (errlen bytes, truncated) and return -1, the
 * failure every reader and importer of tools/ reports. */
int nib_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int nib_vfail(char *err, size_t errlen, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Map a whole file read-only. 0, or -1 with a message. */
int nib_map_file(const char *path, const uint8_t **data, size_t *size, char *err, size_t errlen);
void nib_unmap_file(const uint8_t *data, size_t size);

/* n bytes of a string from an untrusted file made safe to print into out:
 * at most 64 bytes (then "..."), control and non-ASCII bytes as '?'. */
const char *nib_show(const char *s, size_t n, char out[72]);

/* Strict number parsing for options: 0 ok, -1 on junk or out of range. */
int nib_parse_u32(const char *s, uint32_t max, uint32_t *out);
int nib_parse_u64(const char *s, uint64_t *out);
int nib_parse_f32(const char *s, float *out);

#endif
