/* The strict UTF-8 sanitizer (proto/utf8.h) on the shared vectors
 * (utf8_vectors.tsv, which tools/host/nibhost.py is tested on too), every
 * split of every vector streamed piece by piece, and random bytes: the
 * output is always well-formed (sanitizing it again changes nothing). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/utf8.h"
#include "tests/common/test_util.h"

struct vec {
    uint8_t in[32], out[96];
    size_t n_in, n_out, ready;
    char what[64];
};

static struct vec vecs[128];
static int n_vecs;

static size_t parse_hex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = 0;
    while (*s) {
        if (*s == ' ') {
            s++;
            continue;
        }
        unsigned v;
        ck_assert_int_eq(sscanf(s, "%2x", &v), 1);
        ck_assert_uint_lt(n, cap);
        out[n++] = (uint8_t)v;
        s += 2;
    }
    return n;
}

static void load(void)
{
    if (n_vecs)
        return;
    FILE *f = fopen(tu_env_path("NIB_UTF8_VECTORS"), "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        line[strcspn(line, "\n")] = 0;
        char *col[4], *p = line;
        for (int i = 0; i < 4; i++) {
            col[i] = p;
            p = strchr(p, '\t');
            ck_assert_msg(p || i == 3, "vector line '%s' has fewer than 4 columns", line);
            if (p)
                *p++ = 0;
        }
        struct vec *v = &vecs[n_vecs++];
        v->n_in = parse_hex(col[0], v->in, sizeof v->in);
        v->n_out = parse_hex(col[1], v->out, sizeof v->out);
        v->ready = strtoul(col[2], NULL, 10);
        snprintf(v->what, sizeof v->what, "%s", col[3]);
    }
    fclose(f);
    ck_assert_int_ge(n_vecs, 40);
}

START_TEST(vectors)
{
    load();
    for (int i = 0; i < n_vecs; i++) {
        const struct vec *v = &vecs[i];
        uint8_t out[96];
        size_t n = nib_utf8_sanitize(v->in, v->n_in, out, sizeof out);
        ck_assert_msg(n == v->n_out && !memcmp(out, v->out, n), "%s: wrong output", v->what);
        ck_assert_uint_eq(nib_utf8_sanitized_len(v->in, v->n_in), v->n_out);
        ck_assert_msg(nib_utf8_ready(v->in, v->n_in) == v->ready, "%s: ready %zu, want %zu",
                      v->what, nib_utf8_ready(v->in, v->n_in), v->ready);
    }
}
END_TEST

/* The way nib ask streams: convert what is ready, keep the rest. */
static size_t stream(const uint8_t *in, const size_t *cuts, int n_cuts, size_t n, uint8_t *out)
{
    size_t done = 0, o = 0;
    for (int c = 0; c <= n_cuts; c++) {
        size_t avail = c < n_cuts ? cuts[c] : n;
        size_t k = c < n_cuts ? nib_utf8_ready(in + done, avail - done) : avail - done;
        o += nib_utf8_sanitize(in + done, k, out + o, 3 * n + 4 - o);
        done += k;
    }
    return o;
}

START_TEST(every_split_streams_the_same)
{
    load();
    for (int i = 0; i < n_vecs; i++) {
        const struct vec *v = &vecs[i];
        for (size_t a = 0; a <= v->n_in; a++)
            for (size_t b = a; b <= v->n_in; b++) {
                size_t cuts[2] = {a, b};
                uint8_t out[128];
                size_t n = stream(v->in, cuts, 2, v->n_in, out);
                ck_assert_msg(n == v->n_out && !memcmp(out, v->out, n),
                              "%s: streamed in pieces at %zu and %zu differs", v->what, a, b);
            }
    }
}
END_TEST

START_TEST(random_bytes_come_out_well_formed)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    enum { N = 64 };
    uint8_t in[N], out[3 * N], again[3 * N];
    for (int round = 0; round < 30000; round++) {
        size_t n = (size_t)(round % N) + 1;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* bias towards the interesting bytes */
            uint8_t b = (uint8_t)x;
            uint64_t k = (x >> 8) % 4;
            in[i] = k == 0   ? (uint8_t)(0x80 | (b & 0x3F))
                    : k == 1 ? (uint8_t)(0xC0 | (b & 0x3F))
                             : b;
        }
        size_t m = nib_utf8_sanitize(in, n, out, sizeof out);
        ck_assert_uint_le(m, 3 * n);
        ck_assert_uint_eq(nib_utf8_ready(out, m), m);
        size_t m2 = nib_utf8_sanitize(out, m, again, sizeof again);
        ck_assert(m2 == m && !memcmp(again, out, m));
        /* Streamed at a random cut: the same bytes. */
        size_t cut = (size_t)(x >> 20) % (n + 1);
        uint8_t s[3 * N + 4];
        size_t ms = stream(in, &cut, 1, n, s);
        ck_assert(ms == m && !memcmp(s, out, m));
    }
}
END_TEST

START_TEST(every_code_point_round_trips)
{
    uint32_t bad = 0, first_bad = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF)
            continue;
        uint8_t b[4], out[12];
        size_t n = nib_utf8_encode(cp, b);
        uint32_t got;
        int inc;
        int ok = nib_utf8_ready(b, n) == n && nib_utf8_sanitize(b, n, out, sizeof out) == n &&
                 !memcmp(b, out, n) && nib_utf8_step(b, n, &got, &inc) == n && got == cp && !inc &&
                 (n == 1 || nib_utf8_ready(b, n - 1) == 0); /* a prefix is held back */
        if (!ok && !bad++)
            first_bad = cp;
    }
    ck_assert_msg(bad == 0, "%u code points do not round-trip, the first U+%04X", bad, first_bad);
}
END_TEST

START_TEST(short_output_buffer_ends_on_a_boundary)
{
    const uint8_t in[] = {'a', 0xE2, 0x82, 0xAC, 0xFF, 'b'};
    uint8_t out[8];
    memset(out, 0xAA, sizeof out);
    /* needs 1 + 3 + 3 + 1 = 8; with room for 5, only "a€" is written */
    ck_assert_uint_eq(nib_utf8_sanitize(in, sizeof in, out, 5), 8);
    ck_assert_uint_eq(out[4], 0xAA);
    ck_assert(!memcmp(out, "a\xE2\x82\xAC", 4));
}
END_TEST

TU_SUITE("utf8", "sanitizer", NULL, NULL, 60, vectors, every_split_streams_the_same,
         random_bytes_come_out_well_formed, every_code_point_round_trips,
         short_output_buffer_ends_on_a_boundary)
