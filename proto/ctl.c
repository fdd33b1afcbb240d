#include "proto/ctl.h"

#include <stdio.h>
#include <string.h>

int nib_ctl_parse(const void *buf, size_t len, char *err, size_t errlen)
{
    struct nib_ctl_msg m;
    if (len != sizeof m) {
        snprintf(err, errlen, "message of %zu bytes, want %zu", len, sizeof m);
        return -1;
    }
    memcpy(&m, buf, sizeof m);
    if (m.magic != NIB_CTL_MAGIC) {
        snprintf(err, errlen, "bad magic 0x%08x", m.magic);
        return -1;
    }
    if (m.version != NIB_CTL_VERSION) {
        snprintf(err, errlen, "control version %u, this appliance speaks %u", m.version,
                 NIB_CTL_VERSION);
        return -1;
    }
    switch (m.type) {
    case NIB_CTL_ATTACH:
    case NIB_CTL_DETACH:
    case NIB_CTL_STOP:
    case NIB_CTL_KICK: break;
    default: snprintf(err, errlen, "type 0x%x is not a host's message", m.type); return -1;
    }
    if (m.status || m.host_index || m.header_size || m.ring_size) {
        snprintf(err, errlen, "status, host_index and sizes must be zero in a host's message");
        return -1;
    }
    for (size_t i = 0; i < sizeof m.reserved; i++)
        if (m.reserved[i]) {
            snprintf(err, errlen, "reserved byte %zu is not zero", i);
            return -1;
        }
    return m.type;
}

struct nib_ctl_msg nib_ctl_make(uint16_t type)
{
    struct nib_ctl_msg m;
    memset(&m, 0, sizeof m);
    m.magic = NIB_CTL_MAGIC;
    m.version = NIB_CTL_VERSION;
    m.type = type;
    return m;
}
