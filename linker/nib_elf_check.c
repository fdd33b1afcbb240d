/* nib_elf_check: verify the layout of a linked appliance.
 *
 *   nib_elf_check APPLIANCE [BLOB]
 *
 * Checks, reading only the ELF headers (and, given BLOB, the blob bytes):
 *   - a 64-bit ELF executable of the host's byte order, of type ET_EXEC;
 *   - static: no PT_INTERP and no PT_DYNAMIC;
 *   - exactly one section .nib_blob: PROGBITS, allocated, not writable, not
 *     executable, not empty;
 *   - exactly one PT_LOAD covers it, and that segment holds exactly the
 *     section: p_vaddr == sh_addr, p_offset == sh_offset,
 *     p_filesz == p_memsz == sh_size, and no other allocated section lies
 *     inside it;
 *   - p_vaddr % 2 MiB == 0 and p_offset % 2 MiB == 0;
 *   - the segment is readable, not writable, not executable;
 *   - the blob is last: every other allocated section ends at or below its
 *     first byte and no PT_LOAD starts above it, so no reference from code
 *     to code or data spans the blob, whatever its size (linker/nib_blob.ld
 *     says why);
 *   - nib_blob_start / nib_blob_end (when a .symtab is present) bound the
 *     section exactly, and nib_blob_size (the 64-bit constant boot code
 *     reads instead of nib_blob_end) holds the section's size;
 *   - PT_GNU_STACK, when present, is not executable;
 *   - with BLOB: the embedded bytes are exactly the file's bytes.
 *
 * Prints what it found; exits 0 when every check holds, 1 on any violation,
 * 2 when the file cannot be read as an ELF64 file at all.
 *
 * Used by linker/link-appliance.sh after every link and by the test suite.
 * Plain C11 + POSIX, builds against glibc or musl.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HUGE_2M UINT64_C(0x200000)

static const char *prog = "nib_elf_check";
static int n_fail;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("  FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    n_fail++;
}

/* A read-only view of a whole file. */
struct view {
    const unsigned char *p;
    uint64_t n;
};

static int map_file(const char *path, struct view *v)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "%s: %s: not a regular file\n", prog, path);
        close(fd);
        return -1;
    }
    v->n = (uint64_t)st.st_size;
    v->p = NULL;
    if (v->n > 0) {
        void *m = mmap(NULL, (size_t)v->n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            fprintf(stderr, "%s: %s: mmap: %s\n", prog, path, strerror(errno));
            close(fd);
            return -1;
        }
        v->p = m;
    }
    close(fd);
    return 0;
}

/* [off, off + len) lies inside a file of size n. */
static int in_file(uint64_t off, uint64_t len, uint64_t n)
{
    return off <= n && len <= n - off;
}

static const char *seg_flags(uint32_t f, char buf[4])
{
    buf[0] = (f & PF_R) ? 'R' : '-';
    buf[1] = (f & PF_W) ? 'W' : '-';
    buf[2] = (f & PF_X) ? 'X' : '-';
    buf[3] = 0;
    return buf;
}

static const char *ptype(uint32_t t)
{
    switch (t) {
    case PT_LOAD: return "LOAD";
    case PT_INTERP: return "INTERP";
    case PT_DYNAMIC: return "DYNAMIC";
    case PT_TLS: return "TLS";
    case PT_GNU_STACK: return "GNU_STACK";
    case PT_GNU_RELRO: return "GNU_RELRO";
    case PT_NOTE: return "NOTE";
    case PT_PHDR: return "PHDR";
    default: return "other";
    }
}

/* Look a symbol up in .symtab; returns 1 when found. */
static int find_symbol(const struct view *f, const Elf64_Shdr *sh, unsigned shnum, const char *name,
                       uint64_t *value)
{
    for (unsigned i = 0; i < shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_entsize != sizeof(Elf64_Sym))
            continue;
        if (sh[i].sh_link >= shnum)
            continue;
        const Elf64_Shdr *st = &sh[sh[i].sh_link];
        if (!in_file(sh[i].sh_offset, sh[i].sh_size, f->n) ||
            !in_file(st->sh_offset, st->sh_size, f->n) || st->sh_size == 0)
            continue;
        const char *strs = (const char *)f->p + st->sh_offset;
        uint64_t nsym = sh[i].sh_size / sizeof(Elf64_Sym);
        for (uint64_t k = 0; k < nsym; k++) {
            Elf64_Sym s;
            memcpy(&s, f->p + sh[i].sh_offset + k * sizeof s, sizeof s);
            if (s.st_name >= st->sh_size)
                continue;
            const char *nm = strs + s.st_name;
            size_t room = (size_t)(st->sh_size - s.st_name);
            if (strnlen(nm, room) < room && strcmp(nm, name) == 0) {
                *value = s.st_value;
                return 1;
            }
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s APPLIANCE [BLOB]\n", prog);
        return 2;
    }
    const char *path = argv[1];
    struct view f;
    if (map_file(path, &f) != 0)
        return 2;

    Elf64_Ehdr eh;
    if (f.n < sizeof eh || memcmp(f.p, ELFMAG, SELFMAG) != 0) {
        fprintf(stderr, "%s: %s: not an ELF file\n", prog, path);
        return 2;
    }
    memcpy(&eh, f.p, sizeof eh);
    const uint16_t one = 1;
    const int host_le = *(const unsigned char *)&one == 1;
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != (host_le ? ELFDATA2LSB : ELFDATA2MSB)) {
        fprintf(stderr, "%s: %s: only 64-bit ELF files of the host's byte order are read\n", prog,
                path);
        return 2;
    }
    if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
        !in_file(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), f.n) ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff == 0 ||
        !in_file(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), f.n) || eh.e_shnum == 0 ||
        eh.e_shstrndx >= eh.e_shnum) {
        fprintf(stderr, "%s: %s: program or section header table is missing or out of bounds\n",
                prog, path);
        return 2;
    }

    /* Copies, so that nothing depends on the mapping's alignment. */
    unsigned phnum = eh.e_phnum, shnum = eh.e_shnum;
    int rc;
    Elf64_Phdr *ph = malloc((phnum ? phnum : 1) * sizeof(Elf64_Phdr));
    Elf64_Shdr *sh = malloc(shnum * sizeof(Elf64_Shdr));
    if (!ph || !sh) {
        fprintf(stderr, "%s: out of memory\n", prog);
        {
            rc = 2;
            goto out;
        }
    }
    memcpy(ph, f.p + eh.e_phoff, phnum * sizeof(Elf64_Phdr));
    memcpy(sh, f.p + eh.e_shoff, shnum * sizeof(Elf64_Shdr));
    const Elf64_Shdr *shstr = &sh[eh.e_shstrndx];
    if (!in_file(shstr->sh_offset, shstr->sh_size, f.n) || shstr->sh_size == 0) {
        fprintf(stderr, "%s: %s: section name table out of bounds\n", prog, path);
        {
            rc = 2;
            goto out;
        }
    }
    const char *names = (const char *)f.p + shstr->sh_offset;

    printf("%s: %s\n", prog, path);
    printf("  ELF64 machine %u, type %s, %u program headers, %u sections\n", eh.e_machine,
           eh.e_type == ET_EXEC  ? "EXEC"
           : eh.e_type == ET_DYN ? "DYN"
                                 : "other",
           phnum, shnum);

    printf("  segments:");
    for (unsigned i = 0; i < phnum; i++) {
        char fb[4];
        printf(" %s(%s)", ptype(ph[i].p_type), seg_flags(ph[i].p_flags, fb));
    }
    printf("\n");
    if (eh.e_type != ET_EXEC)
        fail("type is not ET_EXEC: the blob's address would not be fixed at link time"
             " (link with -static -no-pie)");

    /* Static: no interpreter, no dynamic section. */
    int interp = 0, dynamic = 0;
    for (unsigned i = 0; i < phnum; i++) {
        if (ph[i].p_type == PT_INTERP)
            interp++;
        if (ph[i].p_type == PT_DYNAMIC)
            dynamic++;
        if (ph[i].p_type == PT_GNU_STACK && (ph[i].p_flags & PF_X))
            fail("PT_GNU_STACK is executable");
    }
    if (interp)
        fail("PT_INTERP present: dynamically linked");
    if (dynamic)
        fail("PT_DYNAMIC present: not a plain static executable");
    if (!interp && !dynamic)
        printf("  static: no PT_INTERP, no PT_DYNAMIC\n");

    /* The .nib_blob section. */
    int nb = -1, nb_count = 0;
    for (unsigned i = 0; i < shnum; i++) {
        if (sh[i].sh_name >= shstr->sh_size)
            continue;
        const char *nm = names + sh[i].sh_name;
        size_t room = (size_t)(shstr->sh_size - sh[i].sh_name);
        if (strnlen(nm, room) < room && strcmp(nm, ".nib_blob") == 0) {
            nb = (int)i;
            nb_count++;
        }
    }
    if (nb_count != 1) {
        fail("%d sections named .nib_blob (want exactly 1)", nb_count);
        printf("%s: %d violation(s)\n", prog, n_fail);
        {
            rc = 1;
            goto out;
        }
    }
    const Elf64_Shdr *bs = &sh[nb];
    printf("  section .nib_blob: addr 0x%" PRIx64 " offset 0x%" PRIx64 " size 0x%" PRIx64
           " (%" PRIu64 " bytes) align 0x%" PRIx64 "\n",
           bs->sh_addr, bs->sh_offset, bs->sh_size, bs->sh_size, bs->sh_addralign);
    if (bs->sh_type != SHT_PROGBITS)
        fail(".nib_blob is not PROGBITS (type %u)", bs->sh_type);
    if (!(bs->sh_flags & SHF_ALLOC))
        fail(".nib_blob is not allocated (flags 0x%" PRIx64 ")", bs->sh_flags);
    if (bs->sh_flags & (SHF_WRITE | SHF_EXECINSTR))
        fail(".nib_blob is writable or executable (flags 0x%" PRIx64 ")", bs->sh_flags);
    if (bs->sh_size == 0)
        fail(".nib_blob is empty");
    if (!in_file(bs->sh_offset, bs->sh_size, f.n))
        fail(".nib_blob lies outside the file");

    /* The PT_LOAD(s) covering it. */
    int seg = -1, seg_count = 0;
    for (unsigned i = 0; i < phnum; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        uint64_t lo = ph[i].p_vaddr, hi = ph[i].p_vaddr + ph[i].p_memsz;
        if (lo < bs->sh_addr + bs->sh_size && bs->sh_addr < hi) {
            seg = (int)i;
            seg_count++;
        }
    }
    if (seg_count != 1) {
        fail("%d PT_LOAD segments overlap .nib_blob (want exactly 1)", seg_count);
    } else {
        const Elf64_Phdr *p = &ph[seg];
        char fb[4];
        printf("  PT_LOAD #%d: offset 0x%" PRIx64 " vaddr 0x%" PRIx64 " filesz 0x%" PRIx64
               " memsz 0x%" PRIx64 " flags %s align 0x%" PRIx64 "\n",
               seg, p->p_offset, p->p_vaddr, p->p_filesz, p->p_memsz, seg_flags(p->p_flags, fb),
               p->p_align);
        if (p->p_vaddr % HUGE_2M)
            fail("segment p_vaddr 0x%" PRIx64 " is not a multiple of 2 MiB", p->p_vaddr);
        if (p->p_offset % HUGE_2M)
            fail("segment p_offset 0x%" PRIx64 " is not a multiple of 2 MiB", p->p_offset);
        if (p->p_vaddr != bs->sh_addr || p->p_offset != bs->sh_offset ||
            p->p_filesz != bs->sh_size || p->p_memsz != bs->sh_size)
            fail("segment does not hold exactly .nib_blob (section addr 0x%" PRIx64
                 " size 0x%" PRIx64 ")",
                 bs->sh_addr, bs->sh_size);
        if (!(p->p_flags & PF_R) || (p->p_flags & (PF_W | PF_X)))
            fail("segment flags %s, want R only", seg_flags(p->p_flags, fb));
        if (p->p_align < HUGE_2M)
            printf("  note: p_align 0x%" PRIx64 " < 2 MiB (harmless for ET_EXEC)\n", p->p_align);

        /* No other allocated section inside the segment. */
        int others = 0;
        for (unsigned i = 0; i < shnum; i++) {
            const Elf64_Shdr *s = &sh[i];
            if ((int)i == nb || !(s->sh_flags & SHF_ALLOC) || s->sh_size == 0)
                continue;
            if ((s->sh_flags & SHF_TLS) && s->sh_type == SHT_NOBITS)
                continue; /* .tbss takes no address space of its own */
            if (s->sh_addr < p->p_vaddr + p->p_memsz && p->p_vaddr < s->sh_addr + s->sh_size) {
                const char *nm = s->sh_name < shstr->sh_size ? names + s->sh_name : "?";
                fail("section %.64s (addr 0x%" PRIx64 ") shares the blob's segment", nm,
                     s->sh_addr);
                others++;
            }
        }
        if (!others)
            printf("  segment holds .nib_blob alone\n");
    }

    /* The blob is last: code and data end below it. */
    int above = 0;
    for (unsigned i = 0; i < shnum; i++) {
        const Elf64_Shdr *s = &sh[i];
        if ((int)i == nb || !(s->sh_flags & SHF_ALLOC) || s->sh_size == 0)
            continue;
        if ((s->sh_flags & SHF_TLS) && s->sh_type == SHT_NOBITS)
            continue; /* .tbss: its address range is a template inside .tdata's */
        if (s->sh_addr + s->sh_size > bs->sh_addr) {
            const char *nm = s->sh_name < shstr->sh_size ? names + s->sh_name : "?";
            if (s->sh_addr >= bs->sh_addr + bs->sh_size)
                fail("section %.64s (addr 0x%" PRIx64 ") lies above the blob: code and data must"
                     " end below it (linker/nib_blob.ld puts the blob after .bss)",
                     nm, s->sh_addr);
            else if (s->sh_addr < bs->sh_addr)
                fail("section %.64s (addr 0x%" PRIx64 ", size 0x%" PRIx64 ") reaches into the blob",
                     nm, s->sh_addr, s->sh_size);
            above++;
        }
    }
    for (unsigned i = 0; i < phnum; i++) {
        if ((int)i != seg && ph[i].p_type == PT_LOAD && ph[i].p_vaddr >= bs->sh_addr) {
            fail("PT_LOAD #%u (vaddr 0x%" PRIx64 ") lies above the blob: the blob's segment must"
                 " be the last",
                 i, ph[i].p_vaddr);
            above++;
        }
    }
    if (!above)
        printf("  blob is last: code and data end below 0x%" PRIx64 "\n", bs->sh_addr);

    /* Symbols, when the file still has a symbol table. */
    uint64_t s0 = 0, s1 = 0;
    int h0 = find_symbol(&f, sh, shnum, "nib_blob_start", &s0);
    int h1 = find_symbol(&f, sh, shnum, "nib_blob_end", &s1);
    if (h0 && h1) {
        printf("  nib_blob_start 0x%" PRIx64 ", nib_blob_end 0x%" PRIx64 "\n", s0, s1);
        if (s0 != bs->sh_addr || s1 != bs->sh_addr + bs->sh_size)
            fail("nib_blob_start/nib_blob_end do not bound .nib_blob exactly");
        uint64_t sz_addr = 0;
        if (!find_symbol(&f, sh, shnum, "nib_blob_size", &sz_addr)) {
            fail("no symbol nib_blob_size (model_blob/blob_incbin.S defines it; boot code"
                 " reads the blob's size from it)");
        } else {
            /* Its 8 bytes, through the allocated PROGBITS section holding them. */
            int found = 0;
            for (unsigned i = 0; i < shnum && !found; i++) {
                const Elf64_Shdr *s = &sh[i];
                if (!(s->sh_flags & SHF_ALLOC) || s->sh_type != SHT_PROGBITS ||
                    sz_addr < s->sh_addr || s->sh_size < 8 || sz_addr - s->sh_addr > s->sh_size - 8)
                    continue;
                found = 1;
                uint64_t off = s->sh_offset + (sz_addr - s->sh_addr), val;
                if (!in_file(off, 8, f.n)) {
                    fail("nib_blob_size lies outside the file");
                    break;
                }
                memcpy(&val, f.p + off, 8);
                printf("  nib_blob_size 0x%" PRIx64 " = %" PRIu64 "\n", sz_addr, val);
                if (val != bs->sh_size)
                    fail("nib_blob_size holds %" PRIu64 ", .nib_blob has %" PRIu64 " bytes", val,
                         bs->sh_size);
            }
            if (!found)
                fail("nib_blob_size (0x%" PRIx64 ") is not in an allocated PROGBITS section",
                     sz_addr);
        }
    } else {
        printf("  symbols: not checked (no nib_blob_start/nib_blob_end in .symtab)\n");
    }

    /* The embedded bytes against the blob file. */
    if (argc == 3) {
        struct view b;
        if (map_file(argv[2], &b) != 0) {
            rc = 2;
            goto out;
        }
        if (b.n != bs->sh_size)
            fail("blob %s has %" PRIu64 " bytes, .nib_blob has %" PRIu64, argv[2], b.n,
                 bs->sh_size);
        else if (in_file(bs->sh_offset, bs->sh_size, f.n) && b.n &&
                 memcmp(f.p + bs->sh_offset, b.p, (size_t)b.n) != 0)
            fail("embedded bytes differ from %s", argv[2]);
        else
            printf("  embedded bytes match %s\n", argv[2]);
    }

    if (n_fail) {
        printf("%s: %d violation(s)\n", prog, n_fail);
        {
            rc = 1;
            goto out;
        }
    }
    printf("%s: OK\n", prog);
    rc = 0;
out:
    free(ph);
    free(sh);
    return rc;
}
