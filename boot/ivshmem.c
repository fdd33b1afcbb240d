#include "boot/ivshmem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/topology.h"

/* A sysfs id file ("0x1af4\n") as a number; -1 when it is not one. */
static long read_id(const char *dir, const char *name)
{
    char p[512], buf[32];
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p ||
        nib_sysfs_read(p, buf, sizeof buf))
        return -1;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 16);
    if (errno || end == buf || *end || v < 0 || v > 0xffff)
        return -1;
    return v;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int boot_ivshmem_find(const char *sysfs, char *path, size_t pathlen, uint64_t *size, char *err,
                      size_t errlen)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/bus/pci/devices", sysfs);
    struct dirent **names;
    int n = scandir(dir, &names, NULL, by_name);
    if (n < 0) {
        snprintf(err, errlen, "cannot list %s: %s", dir, strerror(errno));
        return -1;
    }
    int rc = 1;
    snprintf(err, errlen,
             "no ivshmem device (PCI %04x:%04x) in %s: start the machine with "
             "-device ivshmem-plain",
             NIB_IVSHMEM_VENDOR, NIB_IVSHMEM_DEVICE, dir);
    for (int i = 0; i < n && rc == 1; i++) {
        char dev[512];
        if (names[i]->d_name[0] == '.' ||
            (size_t)snprintf(dev, sizeof dev, "%s/%s", dir, names[i]->d_name) >= sizeof dev)
            continue;
        if (read_id(dev, "vendor") != NIB_IVSHMEM_VENDOR ||
            read_id(dev, "device") != NIB_IVSHMEM_DEVICE)
            continue;
        struct stat st;
        rc = -1;
        if ((size_t)snprintf(path, pathlen, "%s/resource2", dev) >= pathlen)
            snprintf(err, errlen, "ivshmem device path %s is too long", dev);
        else if (stat(path, &st) != 0)
            snprintf(err, errlen, "ivshmem device %s has no shared memory (%s: %s)", dev, path,
                     strerror(errno));
        else if (st.st_size <= 0)
            snprintf(err, errlen, "ivshmem device %s has an empty BAR2 (%s)", dev, path);
        else
            rc = 0;
        if (rc)
            break;
        *size = (uint64_t)st.st_size;
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

void *boot_ivshmem_map(const char *path, uint64_t size, char *err, size_t errlen)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the device memory */
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "cannot map %s (%llu bytes): %s", path, (unsigned long long)size,
                 strerror(e));
        return NULL;
    }
    return p;
}

struct nib_vmr_header *boot_vm_region(const char *spec, const struct nib_shm_header *geo,
                                      uint32_t app_header_size, uint32_t *max_hosts, uint64_t epoch,
                                      uint64_t ring_offset[NIB_VMR_RINGS_MAX], char *err,
                                      size_t errlen)
{
    char path[512];
    uint64_t size = 0;
    if (!strcmp(spec, "auto")) {
        if (boot_ivshmem_find("/sys", path, sizeof path, &size, err, errlen))
            return NULL;
    } else {
        struct stat st;
        snprintf(path, sizeof path, "%s", spec);
        if (stat(path, &st) != 0) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            return NULL;
        }
        size = (uint64_t)st.st_size;
    }
    if (size < 3 * (uint64_t)NIB_VMR_PAGE) {
        snprintf(err, errlen, "%s: %llu bytes, too small for a region", path,
                 (unsigned long long)size);
        return NULL;
    }
    struct nib_vmr_header *h = boot_ivshmem_map(path, size, err, errlen);
    if (!h)
        return NULL;
    struct nib_vmr_header copy;
    memcpy(&copy, h, sizeof copy);
    char why[200];
    if (nib_vmr_check_mux(&copy, size, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", path, why);
        return NULL;
    }
    /* A reboot over a live region: the multiplexer must not read the old
     * layout while this one is written (release: pairs with its acquire). */
    __atomic_store_n(&h->guest_state, NIB_VMR_GUEST_ABSENT, __ATOMIC_RELEASE);
    memset((uint8_t *)h + NIB_VMR_PAGE, 0, size - NIB_VMR_PAGE);
    /* The layout is computed from our own copy of line 0, never from what
     * the multiplexer might rewrite meanwhile. */
    if (nib_vmr_layout(&copy, geo->ring_size, app_header_size, *max_hosts, epoch, why,
                       sizeof why)) {
        snprintf(err, errlen, "%s: %s", path, why);
        return NULL;
    }
    h->guest_epoch = copy.guest_epoch;
    h->app_header_offset = copy.app_header_offset;
    h->ring_size = copy.ring_size;
    h->n_rings = copy.n_rings;
    h->app_header_size = copy.app_header_size;
    memcpy(h->ring_offset, copy.ring_offset, sizeof h->ring_offset);
    memcpy(ring_offset, copy.ring_offset, sizeof copy.ring_offset);
    *max_hosts = copy.n_rings;
    return h;
}
