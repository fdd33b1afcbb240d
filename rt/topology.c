#include "rt/topology.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/qkernels.h"

#define CPU_WORDS (NIB_TOPO_MAX_CPUS / 64)

static void msg(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int nib_sysfs_read(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t r = read(fd, buf + got, len - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0;
    while (got && (buf[got - 1] == '\n' || buf[got - 1] == ' '))
        buf[--got] = 0;
    return 0;
}

static int read_u32(const char *path, uint32_t *v)
{
    char buf[32], *end;
    if (nib_sysfs_read(path, buf, sizeof buf))
        return -1;
    unsigned long x = strtoul(buf, &end, 10);
    if (end == buf || *end || x > UINT32_MAX)
        return -1;
    *v = (uint32_t)x;
    return 0;
}

int nib_cpulist_parse(const char *s, uint64_t *bits, uint32_t nbits)
{
    memset(bits, 0, (nbits + 63) / 64 * 8);
    int n = 0;
    while (*s) {
        char *end;
        unsigned long a = strtoul(s, &end, 10), b;
        if (end == s)
            return -1;
        s = end;
        b = a;
        if (*s == '-') {
            b = strtoul(++s, &end, 10);
            if (end == s || b < a)
                return -1;
            s = end;
        }
        if (b >= nbits)
            return -1;
        for (unsigned long i = a; i <= b; i++) {
            if (!(bits[i / 64] >> (i % 64) & 1))
                n++;
            bits[i / 64] |= 1ull << (i % 64);
        }
        if (*s == ',')
            s++;
        else if (*s && *s != '\n')
            return -1;
        else if (*s)
            s++;
    }
    return n;
}

static int bit(const uint64_t *bits, uint32_t i)
{
    return (int)(bits[i / 64] >> (i % 64) & 1);
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return -1;
    if (*end == 'K')
        v <<= 10;
    else if (*end == 'M')
        v <<= 20;
    else if (*end == 'G')
        v <<= 30;
    else if (*end)
        return -1;
    *out = v;
    return 0;
}

int nib_topo_read_sys(struct nib_topo *t, const char *root, char *err, size_t errlen)
{
    char path[256], buf[4096];
    uint64_t online[CPU_WORDS], sib[CPU_WORDS];
    memset(t, 0, sizeof *t);
    snprintf(path, sizeof path, "%s/devices/system/cpu/online", root);
    if (nib_sysfs_read(path, buf, sizeof buf) ||
        nib_cpulist_parse(buf, online, NIB_TOPO_MAX_CPUS) <= 0) {
        msg(err, errlen, "cannot read the online CPU list from %s", path);
        return -1;
    }
    for (uint32_t c = 0; c < NIB_TOPO_MAX_CPUS; c++) {
        if (!bit(online, c))
            continue;
        struct nib_topo_cpu *p = &t->cpus[t->n_cpus++];
        p->cpu = c;
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%u/topology/physical_package_id",
                 root, c);
        if (read_u32(path, &p->package))
            p->package = 0; /* some hypervisors report -1 */
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%u/topology/core_id", root, c);
        if (read_u32(path, &p->core))
            p->core = c;
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%u/topology/thread_siblings_list",
                 root, c);
        if (nib_sysfs_read(path, buf, sizeof buf) == 0 &&
            nib_cpulist_parse(buf, sib, NIB_TOPO_MAX_CPUS) > 0) {
            for (uint32_t s = 0; s < c; s++)
                p->smt += (uint32_t)bit(sib, s);
        }
    }
    /* Nodes: a machine (or kernel) without NUMA has no node folder: node 0. */
    uint64_t nodes[CPU_WORDS], cpus[CPU_WORDS];
    snprintf(path, sizeof path, "%s/devices/system/node/online", root);
    if (nib_sysfs_read(path, buf, sizeof buf) == 0 &&
        nib_cpulist_parse(buf, nodes, NIB_TOPO_MAX_CPUS) > 0) {
        for (uint32_t n = 0; n < NIB_TOPO_MAX_CPUS; n++) {
            if (!bit(nodes, n))
                continue;
            snprintf(path, sizeof path, "%s/devices/system/node/node%u/cpulist", root, n);
            if (nib_sysfs_read(path, buf, sizeof buf) ||
                nib_cpulist_parse(buf, cpus, NIB_TOPO_MAX_CPUS) < 0)
                continue; /* a memory-only node has an empty list */
            for (uint32_t i = 0; i < t->n_cpus; i++)
                if (bit(cpus, t->cpus[i].cpu))
                    t->cpus[i].node = n;
        }
    }
    uint64_t seen[CPU_WORDS] = {0};
    for (uint32_t i = 0; i < t->n_cpus; i++) {
        uint32_t n = t->cpus[i].node;
        if (!bit(seen, n))
            t->n_nodes++;
        seen[n / 64] |= 1ull << (n % 64);
    }
    /* Caches of the first CPU. */
    for (uint32_t idx = 0; t->n_caches < NIB_TOPO_MAX_CACHES; idx++) {
        char base[200], type[32];
        uint32_t level;
        uint64_t size;
        snprintf(base, sizeof base, "%s/devices/system/cpu/cpu%u/cache/index%u", root,
                 t->cpus[0].cpu, idx);
        snprintf(path, sizeof path, "%s/level", base);
        if (read_u32(path, &level))
            break;
        snprintf(path, sizeof path, "%s/type", base);
        if (nib_sysfs_read(path, type, sizeof type))
            break;
        snprintf(path, sizeof path, "%s/size", base);
        if (nib_sysfs_read(path, buf, sizeof buf) || parse_size(buf, &size))
            continue;
        struct nib_topo_cache *k = &t->caches[t->n_caches++];
        snprintf(k->name, sizeof k->name, "L%u%s", level % 10,
                 !strcmp(type, "Data")          ? "d"
                 : !strcmp(type, "Instruction") ? "i"
                                                : "");
        k->size = size;
        snprintf(path, sizeof path, "%s/shared_cpu_list", base);
        int n = nib_sysfs_read(path, buf, sizeof buf)
                    ? 1
                    : nib_cpulist_parse(buf, sib, NIB_TOPO_MAX_CPUS);
        k->shared = n > 0 ? (uint32_t)n : 1;
    }
    return 0;
}

/* --- text form ------------------------------------------------------------ */

void nib_topo_write(FILE *f, const struct nib_topo *t)
{
    fprintf(f, "# nibble machine topology, written by `nib topo`; format: docs/runtime.md\n");
    fprintf(f, "nibble-topology %d\n", NIB_TOPO_VERSION);
    for (uint32_t i = 0; i < t->n_cpus; i++) {
        const struct nib_topo_cpu *c = &t->cpus[i];
        fprintf(f, "cpu %u node %u package %u core %u smt %u\n", c->cpu, c->node, c->package,
                c->core, c->smt);
    }
    for (uint32_t i = 0; i < t->n_caches; i++)
        fprintf(f, "cache %s %llu shared %u\n", t->caches[i].name,
                (unsigned long long)t->caches[i].size, t->caches[i].shared);
    if (t->prefetch)
        fprintf(f, "prefetch %u\n", t->prefetch);
}

static int next_u32(char **s, const char *key, uint32_t *v)
{
    char *p = *s, *end;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t kl = strlen(key);
    if (kl) {
        if (strncmp(p, key, kl) || (p[kl] != ' ' && p[kl] != '\t'))
            return -1;
        p += kl;
        while (*p == ' ' || *p == '\t')
            p++;
    }
    if (*p < '0' || *p > '9')
        return -1;
    unsigned long long x = strtoull(p, &end, 10);
    if (x > UINT32_MAX)
        return -1;
    *v = (uint32_t)x;
    *s = end;
    return 0;
}

static int line_end(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    return *s == 0;
}

int nib_topo_parse(struct nib_topo *t, const char *text, size_t len, char *err, size_t errlen)
{
    char line[256];
    int have_header = 0;
    uint32_t lineno = 0;
    uint64_t seen_cpu[CPU_WORDS] = {0}, seen_node[CPU_WORDS] = {0};
    memset(t, 0, sizeof *t);
    for (size_t pos = 0; pos < len;) {
        size_t e = pos;
        while (e < len && text[e] != '\n')
            e++;
        lineno++;
        if (e - pos >= sizeof line) {
            msg(err, errlen, "line %u: longer than %zu bytes", lineno, sizeof line - 1);
            return -1;
        }
        memcpy(line, text + pos, e - pos);
        line[e - pos] = 0;
        pos = e + 1;
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '#' || line_end(s))
            continue;
        if (!have_header) {
            uint32_t v;
            char *p = s;
            if (next_u32(&p, "nibble-topology", &v) || !line_end(p)) {
                msg(err, errlen, "line %u: expected \"nibble-topology %d\" first", lineno,
                    NIB_TOPO_VERSION);
                return -1;
            }
            if (v != NIB_TOPO_VERSION) {
                msg(err, errlen, "line %u: format version %u, this build reads %d", lineno, v,
                    NIB_TOPO_VERSION);
                return -1;
            }
            have_header = 1;
        } else if (!strncmp(s, "cpu ", 4)) {
            struct nib_topo_cpu c;
            char *p = s + 3;
            if (next_u32(&p, "", &c.cpu) || next_u32(&p, "node", &c.node) ||
                next_u32(&p, "package", &c.package) || next_u32(&p, "core", &c.core) ||
                next_u32(&p, "smt", &c.smt) || !line_end(p)) {
                msg(err, errlen, "line %u: expected \"cpu N node N package N core N smt N\"",
                    lineno);
                return -1;
            }
            if (c.cpu >= NIB_TOPO_MAX_CPUS || c.node >= NIB_TOPO_MAX_CPUS) {
                msg(err, errlen, "line %u: cpu and node numbers must be below %d", lineno,
                    NIB_TOPO_MAX_CPUS);
                return -1;
            }
            if (bit(seen_cpu, c.cpu)) {
                msg(err, errlen, "line %u: cpu %u listed twice", lineno, c.cpu);
                return -1;
            }
            if (t->n_cpus && c.cpu < t->cpus[t->n_cpus - 1].cpu) {
                msg(err, errlen, "line %u: cpus must be listed in increasing order", lineno);
                return -1;
            }
            seen_cpu[c.cpu / 64] |= 1ull << (c.cpu % 64);
            if (!bit(seen_node, c.node))
                t->n_nodes++;
            seen_node[c.node / 64] |= 1ull << (c.node % 64);
            t->cpus[t->n_cpus++] = c;
        } else if (!strncmp(s, "cache ", 6)) {
            if (t->n_caches == NIB_TOPO_MAX_CACHES) {
                msg(err, errlen, "line %u: more than %d caches", lineno, NIB_TOPO_MAX_CACHES);
                return -1;
            }
            struct nib_topo_cache *k = &t->caches[t->n_caches];
            char *p = s + 6, *end;
            while (*p == ' ')
                p++;
            size_t nl = strcspn(p, " \t");
            if (nl == 0 || nl >= sizeof k->name) {
                msg(err, errlen, "line %u: cache name must be 1..%zu characters", lineno,
                    sizeof k->name - 1);
                return -1;
            }
            memcpy(k->name, p, nl);
            k->name[nl] = 0;
            p += nl;
            k->size = strtoull(p, &end, 10);
            if (end == p || next_u32(&end, "shared", &k->shared) || !line_end(end)) {
                msg(err, errlen, "line %u: expected \"cache NAME BYTES shared N\"", lineno);
                return -1;
            }
            t->n_caches++;
        } else if (!strncmp(s, "prefetch ", 9)) {
            char *p = s + 8;
            if (next_u32(&p, "", &t->prefetch) || !line_end(p) ||
                !nib_prefetch_valid(t->prefetch)) {
                msg(err, errlen, "line %u: expected \"prefetch BYTES\", a multiple of 64 up to %d",
                    lineno, NIB_PREFETCH_MAX);
                return -1;
            }
        } else {
            msg(err, errlen, "line %u: unknown entry (expected cpu, cache or prefetch)", lineno);
            return -1;
        }
    }
    if (!have_header) {
        msg(err, errlen, "not a topology file: no \"nibble-topology %d\" line", NIB_TOPO_VERSION);
        return -1;
    }
    if (t->n_cpus == 0) {
        msg(err, errlen, "no cpu lines");
        return -1;
    }
    return 0;
}

void nib_topo_write_c(FILE *f, const struct nib_topo *t, const char *from)
{
    fprintf(f, "/* Generated by `nib topo --c` from %s. Do not edit. */\n", from);
    fprintf(f, "#include \"rt/topology.h\"\n\n");
    fprintf(f, "const char nib_topology_from[] = \"");
    for (const char *p = from; *p; p++) {
        if (*p == '"' || *p == '\\')
            fputc('\\', f);
        fputc((unsigned char)*p < ' ' ? '?' : *p, f);
    }
    fprintf(f, "\";\n\n");
    fprintf(f, "const struct nib_topo nib_topology_table = {\n");
    fprintf(f, "    .n_cpus = %u,\n    .n_nodes = %u,\n    .n_caches = %u,\n", t->n_cpus,
            t->n_nodes, t->n_caches);
    fprintf(f, "    .cpus = {\n");
    for (uint32_t i = 0; i < t->n_cpus; i++) {
        const struct nib_topo_cpu *c = &t->cpus[i];
        fprintf(f, "        {.cpu = %u, .node = %u, .package = %u, .core = %u, .smt = %u},\n",
                c->cpu, c->node, c->package, c->core, c->smt);
    }
    fprintf(f, "    },\n    .caches = {\n");
    for (uint32_t i = 0; i < t->n_caches; i++)
        fprintf(f, "        {.name = \"%s\", .size = %lluull, .shared = %u},\n", t->caches[i].name,
                (unsigned long long)t->caches[i].size, t->caches[i].shared);
    fprintf(f, "    },\n    .prefetch = %u,\n};\n", t->prefetch);
}

/* --- comparison --------------------------------------------------------------- */

struct out {
    char *p;
    size_t len, used;
    int n;
};

static void add(struct out *o, const char *fmt, ...)
{
    o->n++;
    if (o->used + 1 >= o->len)
        return;
    if (o->n > 1 && o->used + 3 < o->len)
        o->used += (size_t)snprintf(o->p + o->used, o->len - o->used, "; ");
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(o->p + o->used, o->len - o->used, fmt, ap);
    va_end(ap);
    if (w > 0)
        o->used += (size_t)w;
    if (o->used >= o->len)
        o->used = o->len - 1;
}

static const struct nib_topo_cpu *find_cpu(const struct nib_topo *t, uint32_t cpu)
{
    for (uint32_t i = 0; i < t->n_cpus; i++)
        if (t->cpus[i].cpu == cpu)
            return &t->cpus[i];
    return NULL;
}

int nib_topo_diff(const struct nib_topo *table, const struct nib_topo *here, char *out,
                  size_t outlen)
{
    struct out o = {out, outlen, 0, 0};
    if (outlen)
        out[0] = 0;
    for (uint32_t i = 0; i < table->n_cpus; i++) {
        const struct nib_topo_cpu *a = &table->cpus[i], *b = find_cpu(here, a->cpu);
        if (!b) {
            add(&o, "cpu %u is in the table but missing or offline here", a->cpu);
            continue;
        }
        if (a->node != b->node)
            add(&o, "cpu %u is on node %u in the table, node %u here", a->cpu, a->node, b->node);
        if (a->package != b->package || a->core != b->core || a->smt != b->smt)
            add(&o,
                "cpu %u is package %u core %u smt %u in the table, package %u core %u smt %u here",
                a->cpu, a->package, a->core, a->smt, b->package, b->core, b->smt);
    }
    for (uint32_t i = 0; i < here->n_cpus; i++)
        if (!find_cpu(table, here->cpus[i].cpu))
            add(&o, "cpu %u is online here but not in the table", here->cpus[i].cpu);
    if (table->n_nodes != here->n_nodes)
        add(&o, "%u NUMA nodes in the table, %u here", table->n_nodes, here->n_nodes);
    for (uint32_t i = 0; i < table->n_caches; i++) {
        const struct nib_topo_cache *a = &table->caches[i], *b = NULL;
        for (uint32_t j = 0; j < here->n_caches; j++)
            if (!strcmp(here->caches[j].name, a->name))
                b = &here->caches[j];
        if (!b)
            add(&o, "cache %s is in the table but not here", a->name);
        else if (a->size != b->size)
            add(&o, "cache %s is %llu KiB in the table, %llu KiB here", a->name,
                (unsigned long long)(a->size >> 10), (unsigned long long)(b->size >> 10));
    }
    return o.n;
}

uint32_t nib_topo_workers(const struct nib_topo *t, uint32_t *cpus, uint32_t *nodes, uint32_t max)
{
    uint32_t n = 0;
    /* By node, then CPU number: workers of one node get adjacent shares. */
    uint32_t node = 0;
    for (uint32_t done = 0; done < t->n_cpus && n < max;) {
        uint32_t next_node = UINT32_MAX;
        for (uint32_t i = 0; i < t->n_cpus; i++) {
            const struct nib_topo_cpu *c = &t->cpus[i];
            if (c->node == node) {
                done++;
                if (c->smt == 0 && n < max) {
                    cpus[n] = c->cpu;
                    if (nodes)
                        nodes[n] = c->node;
                    n++;
                }
            } else if (c->node > node && c->node < next_node) {
                next_node = c->node;
            }
        }
        if (next_node == UINT32_MAX)
            break;
        node = next_node;
    }
    return n;
}
