#!/usr/bin/env python3
"""The multiplexer (`nib vm run`) when its guest dies, hangs or reboots,
without a VM: `--qemu` runs tests/boot/vm_standin_guest.py, which runs the
real static appliance on the region memfd as the guest's init does
(docs/ring.md section 19, docs/appliance.md).

  vm_mux_guest_death.py --nib NIB --appliance APP --nibhost tools/host/nibhost.py

Each case: nib vm run reaches "ready", a local host (nibhost.py) attaches
and gets one answer through the region, then the guest's appliance is
frozen (SIGSTOP: the request it is then sent is forwarded into the region
and never answered) and one of these happens:
  exit    the appliance is killed: the stand-in exits as QEMU does when its
          guest powers off;
  hang    nothing more: the guest's heartbeat stands still;
  reboot  a new appliance boots on the same region (a new epoch).
Checked: the host's request ends (status shutdown, or Gone when the host
sees the hang-up first) within 4 times the documented bound of the case
(NIB_VMR_STALE_NS = 5 s for a hang; one poll for the others), never a
timeout, never a silent loss; nib vm run exits 1 by itself (no signal, no
crash) naming the cause; the name is released (a new host is refused
cleanly).
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from vm_region_mux import fake_image, standin_args  # noqa: E402

STALE_S = 5.0  # NIB_VMR_STALE_NS
PROMPT = b"Once upon a time"


def fail(msg, err=""):
    print("FAIL: " + msg)
    if err:
        print("---- nib vm run stderr ----\n" + err[-3000:])
    sys.exit(1)


def ok(msg):
    print("ok: " + msg)


def read_pid(d, name, deadline):
    path = os.path.join(d, name)
    while time.time() < deadline:
        try:
            with open(path) as f:
                return int(f.read())
        except (OSError, ValueError):
            time.sleep(0.02)
    fail("the stand-in guest did not write " + name)


def kill_quietly(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def run_case(a, nh, case, img, work):
    d = tempfile.mkdtemp(prefix="standin-", dir=work)
    env = dict(os.environ, NIB_STANDIN_APPLIANCE=a.appliance, NIB_STANDIN_DIR=d)
    name = "vmdeath-" + case
    vm = subprocess.Popen([a.nib, "vm", "run", img, "--name", name, "--accel", "tcg",
                           "--region-mib", "8", "--timeout", "60", "--qemu", a.standin, "--foreground",
                           "--console", os.path.join(d, "console")],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    app_pids = []
    try:
        line = ""
        while "nib vm run: ready on" not in line:
            line = vm.stderr.readline()
            if not line and vm.poll() is not None:
                fail("%s: nib vm run exited %s before ready" % (case, vm.returncode))
        deadline = time.time() + 30
        standin = read_pid(d, "standin.pid", deadline)
        app = read_pid(d, "app.pid", deadline)
        app_pids.append(app)
        h = nh.Host(name, timeout=30)
        first = h.ask(PROMPT, max_tokens=8, timeout=30)
        if first.status_name not in ("ok", "eos") or not first.generated_ids:
            fail("%s: the first request through the region: %s %r" % (case, first.status_name,
                                                                       first.error))
        os.kill(app, signal.SIGSTOP)
        hd = h.submit(PROMPT, max_tokens=8)
        time.sleep(0.2)  # forwarded into the region, never answered
        t0 = time.monotonic()
        if case == "exit":
            os.kill(app, signal.SIGKILL)
            bound, cause = 1.0, "the guest powered off"
        elif case == "reboot":
            os.kill(standin, signal.SIGUSR1)
            bound, cause = 1.0, "restarted or stopped"
        else:
            bound, cause = STALE_S, "stopped beating"
        limit = 4 * bound + 2.0
        try:
            p = h.wait(hd, timeout=limit)
            if not p.done or p.status_name != "shutdown":
                fail("%s: the request ended %s (%r), not shutdown" % (case, p.status_name,
                                                                     p.error))
            how = "status shutdown"
        except nh.Gone as e:
            how = "Gone (%s)" % e
        except nh.Timeout:
            fail("%s: the request did not end within %.0f s" % (case, limit))
        took = time.monotonic() - t0
        h.close()
        try:
            rc = vm.wait(timeout=30)
        except subprocess.TimeoutExpired:
            fail("%s: nib vm run still runs after its guest's %s" % (case, case))
        err = vm.stderr.read()
        if rc != 1:
            fail("%s: nib vm run exited %d (want 1: a guest lost, no crash)" % (case, rc), err)
        if "nib vm run: " + cause not in err and cause not in err:
            fail("%s: nib vm run did not say %r" % (case, cause), err)
        try:
            nh.Host(name, timeout=2).close()
            fail("%s: a host still attaches to %s after nib vm run ended" % (case, name))
        except nh.Gone:
            pass
        except nh.NibError:
            pass
        except OSError:
            pass
        if case == "reboot":
            app_pids.append(read_pid(d, "app.pid", time.time() + 5))
        ok("%s: the request ended with %s after %.1f s (bound %.0f s); nib vm run exited 1: %s"
           % (case, how, took, bound, cause))
    finally:
        if vm.poll() is None:
            vm.kill()
            vm.wait()
        for pid in app_pids:
            kill_quietly(pid)


def main():
    a, work = standin_args("nib-vmdeath-")
    sys.path.insert(0, os.path.dirname(os.path.abspath(a.nibhost)))
    import nibhost as nh
    img = fake_image(work)
    for case in ("exit", "reboot", "hang"):
        run_case(a, nh, case, img, work)


if __name__ == "__main__":
    main()
