/* The guest's search for the ivshmem device (boot/ivshmem.c) over a made-up
 * sysfs tree: other PCI devices, one of the same vendor, malformed id files;
 * the BAR2 file mapped shared, so what the multiplexer wrote is what the
 * guest reads and the guest's writes reach the file; the refusals named. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot/ivshmem.h"
#include "proto/vm_region.h"
#include "tests/common/test_util.h"

static char root[64];

static void put(const char *dev, const char *file, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/bus/pci/devices/%s", root, dev);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/bus/pci/devices/%s/%s", root, dev, file);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void bar(const char *dev, uint64_t size)
{
    char p[256];
    snprintf(p, sizeof p, "%s/bus/pci/devices/%s/resource2", root, dev);
    int fd = open(p, O_CREAT | O_RDWR | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
    close(fd);
}

static void setup(void)
{
    char p[128];
    strcpy(root, "/tmp/nib-sysfs-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(p, sizeof p, "%s/bus", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/bus/pci", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/bus/pci/devices", root);
    mkdir(p, 0755);
    put("0000:00:00.0", "vendor", "0x8086\n");
    put("0000:00:00.0", "device", "0x29c0\n");
    put("0000:00:02.0", "vendor", "0x1af4\n"); /* virtio-net: same vendor */
    put("0000:00:02.0", "device", "0x1000\n");
    put("0000:00:03.0", "vendor", "garbage\n");
    put("0000:00:03.0", "device", "0x1110\n");
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(finds_the_device_and_maps_its_bar)
{
    put("0000:00:04.0", "vendor", "0x1af4\n");
    put("0000:00:04.0", "device", "0x1110\n");
    bar("0000:00:04.0", 1u << 20);
    char path[512], err[256];
    uint64_t size = 0;
    ck_assert_msg(boot_ivshmem_find(root, path, sizeof path, &size, err, sizeof err) == 0, "%s",
                  err);
    ck_assert(strstr(path, "0000:00:04.0/resource2"));
    ck_assert_uint_eq(size, 1u << 20);
    /* The multiplexer writes line 0 through the file; the guest's mapping
     * reads it and accepts it; the guest's write reaches the file. */
    int fd = open(path, O_RDWR);
    struct nib_vmr_header *mux = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert(mux != MAP_FAILED);
    nib_vmr_init(mux, size, 99, 4);
    struct nib_vmr_header *g = boot_ivshmem_map(path, size, err, sizeof err);
    ck_assert_msg(g != NULL, "%s", err);
    struct nib_vmr_header copy = *g;
    ck_assert_msg(nib_vmr_check_mux(&copy, size, err, sizeof err) == 0, "%s", err);
    g->guest_beat = 5;
    ck_assert_uint_eq(mux->guest_beat, 5);
    munmap(g, size);
    munmap(mux, size);
    close(fd);
}
END_TEST

START_TEST(first_device_in_name_order)
{
    put("0000:00:09.0", "vendor", "0x1af4");
    put("0000:00:09.0", "device", "0x1110");
    bar("0000:00:09.0", 8192);
    put("0000:00:05.0", "vendor", "0x1af4");
    put("0000:00:05.0", "device", "0x1110");
    bar("0000:00:05.0", 4096);
    char path[512], err[256];
    uint64_t size = 0;
    ck_assert_int_eq(boot_ivshmem_find(root, path, sizeof path, &size, err, sizeof err), 0);
    ck_assert(strstr(path, "0000:00:05.0"));
    ck_assert_uint_eq(size, 4096);
}
END_TEST

START_TEST(refusals_are_named)
{
    char path[512], err[256];
    uint64_t size = 0;
    ck_assert_int_eq(boot_ivshmem_find(root, path, sizeof path, &size, err, sizeof err), 1);
    ck_assert_msg(strstr(err, "no ivshmem device (PCI 1af4:1110)") && strstr(err, "ivshmem-plain"),
                  "%s", err);
    put("0000:00:06.0", "vendor", "0x1af4");
    put("0000:00:06.0", "device", "0x1110");
    ck_assert_int_eq(boot_ivshmem_find(root, path, sizeof path, &size, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "has no shared memory"), "%s", err);
    bar("0000:00:06.0", 0);
    ck_assert_int_eq(boot_ivshmem_find(root, path, sizeof path, &size, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "empty BAR2"), "%s", err);
    ck_assert_int_eq(boot_ivshmem_find("/nonexistent", path, sizeof path, &size, err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "cannot list /nonexistent/bus/pci/devices"), "%s", err);
    ck_assert_ptr_null(boot_ivshmem_map("/nonexistent/resource2", 4096, err, sizeof err));
    ck_assert_msg(strstr(err, "cannot open"), "%s", err);
}
END_TEST

TU_SUITE("ivshmem", "ivshmem", setup, teardown, 0, finds_the_device_and_maps_its_bar,
         first_device_in_name_order, refusals_are_named)
