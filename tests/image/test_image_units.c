/* Units of the boot image: init's reading of the appliance's end
 * (boot/init/exit_cause.c) and the newc cpio writer (tools/util/cpio_newc.c)
 * read back field by field. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boot/init/exit_cause.h"
#include "tests/common/test_util.h"
#include "tools/util/cpio_newc.h"

/* waitpid() statuses as Linux encodes them */
#define EXITED(code) (((code)&0xff) << 8)
#define SIGNALED(sig) ((sig)&0x7f)

START_TEST(causes)
{
    ck_assert(WIFEXITED(EXITED(0)) && WIFSIGNALED(SIGNALED(SIGSEGV)));
    ck_assert_int_eq(nib_init_cause(EXITED(0)), NIB_INIT_STOPPED);
    ck_assert_int_eq(nib_init_cause(EXITED(2)), NIB_INIT_REFUSED);
    ck_assert_int_eq(nib_init_cause(EXITED(1)), NIB_INIT_FAILED);
    ck_assert_int_eq(nib_init_cause(EXITED(127)), NIB_INIT_FAILED);
    ck_assert_int_eq(nib_init_cause(SIGNALED(SIGSEGV)), NIB_INIT_CRASHED);
    ck_assert_int_eq(nib_init_cause(SIGNALED(SIGKILL)), NIB_INIT_CRASHED);
    ck_assert_int_eq(nib_init_cause(SIGNALED(SIGSYS)), NIB_INIT_SECCOMP);
    /* every cause has its own words and its own status */
    for (int a = NIB_INIT_STOPPED; a <= NIB_INIT_NO_START; a++)
        for (int b = a + 1; b <= NIB_INIT_NO_START; b++)
            ck_assert_str_ne(nib_init_cause_words(a), nib_init_cause_words(b));
}
END_TEST

static unsigned hexfield(const char *h, int i)
{
    char f[9];
    memcpy(f, h + 6 + 8 * i, 8);
    f[8] = 0;
    return (unsigned)strtoul(f, NULL, 16);
}

struct entry {
    char name[64];
    unsigned mode, size, rmajor, rminor;
    const char *body;
};

/* Parse an archive back; returns the number of entries (trailer included). */
static int read_back(const char *a, size_t len, struct entry *out, int max)
{
    size_t off = 0;
    int n = 0;
    while (off + 110 <= len && n < max) {
        const char *h = a + off;
        ck_assert_msg(!memcmp(h, "070701", 6), "entry %d at %zu: bad magic", n, off);
        struct entry *e = &out[n++];
        e->mode = hexfield(h, 1);
        e->size = hexfield(h, 6);
        e->rmajor = hexfield(h, 9);
        e->rminor = hexfield(h, 10);
        unsigned namesize = hexfield(h, 11);
        ck_assert(namesize >= 2 && namesize < sizeof e->name && off + 110 + namesize <= len);
        memcpy(e->name, h + 110, namesize);
        ck_assert_int_eq(e->name[namesize - 1], 0);
        off = (off + 110 + namesize + 3) & ~(size_t)3;
        e->body = a + off;
        off = (off + e->size + 3) & ~(size_t)3;
        ck_assert(off <= len);
        if (!strcmp(e->name, "TRAILER!!!")) {
            ck_assert_uint_eq(off, len);
            return n;
        }
    }
    ck_abort_msg("no trailer");
    return n;
}

START_TEST(cpio_round_trip)
{
    char src[] = "/tmp/nib-cpio-src-XXXXXX";
    int fd = mkstemp(src);
    ck_assert(fd >= 0);
    const char payload[] = "12345"; /* 5 bytes: the body needs padding */
    ck_assert_int_eq(write(fd, payload, 5), 5);
    close(fd);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct nib_cpio c;
    nib_cpio_begin(&c, f);
    nib_cpio_dir(&c, "etc", 0755);
    nib_cpio_chardev(&c, "dev/console", 0600, 5, 1);
    nib_cpio_bytes(&c, "etc/a", 0644, "xy", 2);
    nib_cpio_file(&c, "init", 0755, src);
    ck_assert_int_eq(nib_cpio_end(&c), 0);
    fclose(f);
    unlink(src);

    struct entry e[8];
    ck_assert_int_eq(read_back(buf, len, e, 8), 5);
    ck_assert_str_eq(e[0].name, "etc");
    ck_assert_uint_eq(e[0].mode, S_IFDIR | 0755);
    ck_assert_str_eq(e[1].name, "dev/console");
    ck_assert_uint_eq(e[1].mode, S_IFCHR | 0600);
    ck_assert_uint_eq(e[1].rmajor, 5);
    ck_assert_uint_eq(e[1].rminor, 1);
    ck_assert_str_eq(e[2].name, "etc/a");
    ck_assert_uint_eq(e[2].size, 2);
    ck_assert(!memcmp(e[2].body, "xy", 2));
    ck_assert_str_eq(e[3].name, "init");
    ck_assert_uint_eq(e[3].mode, S_IFREG | 0755);
    ck_assert_uint_eq(e[3].size, 5);
    ck_assert(!memcmp(e[3].body, payload, 5));
    free(buf);
}
END_TEST

START_TEST(cpio_missing_file)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct nib_cpio c;
    nib_cpio_begin(&c, f);
    nib_cpio_file(&c, "init", 0755, "/nonexistent/nib-init");
    ck_assert_int_eq(nib_cpio_end(&c), -1);
    ck_assert_msg(strstr(c.err, "/nonexistent/nib-init"), "error names the file: %s", c.err);
    fclose(f);
    free(buf);
}
END_TEST

TU_SUITE("image-units", "image", NULL, NULL, 0, causes, cpio_round_trip, cpio_missing_file)
