#!/usr/bin/env python3
"""A stand-in for QEMU and its guest, for `nib vm run --qemu` in tests.

It takes QEMU's arguments as `nib vm run` writes them, finds the region
(`mem-path=/proc/self/fd/N` of the memory backend), and runs the real
static appliance on it with `--vm-region /proc/self/fd/N`, as the guest's
init runs it on the ivshmem device's BAR2. Like QEMU it ends when its
guest ends: appliance exit 0 -> exit 3 (init's "stopped cleanly"), else
exit 9. The appliance dies with it (PR_SET_PDEATHSIG), as a guest dies
with QEMU.

Environment: NIB_STANDIN_APPLIANCE (the appliance), NIB_STANDIN_DIR (where
it writes standin.pid and app.pid). SIGUSR1 "reboots" the guest: the
appliance is killed and a new one boots on the same region (a new epoch).
"""
import ctypes
import os
import signal
import subprocess
import sys
import time


def region_fd(argv):
    for a in argv:
        for part in a.split(","):
            if part.startswith("mem-path=/proc/self/fd/"):
                return int(part.rsplit("/", 1)[1])
    print("stand-in guest: no mem-path=/proc/self/fd/N among the arguments", flush=True)
    sys.exit(1)


def write_pid(d, name, pid):
    tmp = os.path.join(d, name + ".tmp")
    with open(tmp, "w") as f:
        f.write("%d\n" % pid)
    os.rename(tmp, os.path.join(d, name))


def die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def main():
    fd = region_fd(sys.argv[1:])
    app = os.environ["NIB_STANDIN_APPLIANCE"]
    d = os.environ["NIB_STANDIN_DIR"]
    reboot = []
    signal.signal(signal.SIGUSR1, lambda s, f: reboot.append(1))
    write_pid(d, "standin.pid", os.getpid())
    boots = 0
    while True:
        boots += 1
        p = subprocess.Popen([app, "--name", "standin-guest-%d-%d" % (os.getpid(), boots),
                              "--spin-us", "200", "--vm-region", "/proc/self/fd/%d" % fd],
                             pass_fds=(fd,), preexec_fn=die_with_parent)
        write_pid(d, "app.pid", p.pid)
        print("stand-in guest: boot %d, appliance pid %d" % (boots, p.pid), flush=True)
        while p.poll() is None and not reboot:
            time.sleep(0.02)
        if reboot:
            reboot.clear()
            p.kill()
            p.wait()
            print("stand-in guest: rebooting", flush=True)
            continue
        print("stand-in guest: the appliance exited %d; powering off" % p.returncode, flush=True)
        sys.exit(3 if p.returncode == 0 else 9)


if __name__ == "__main__":
    main()
