"""What the Python tests share: checks that count their failures, a command
that must succeed, and the skip (exit 77, saying why) when a Debian package
for /usr/bin/python3 is missing. A test puts this folder on sys.path:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
    from checks import Checks, sh, skip  # noqa: E402
"""
import subprocess
import sys

ONNX_NEEDS = ("needs Debian's python3-onnx and python3-numpy for /usr/bin/python3 "
              "(.ci/install-deps.sh)")


def skip(why):
    """Says why and exits 77, which meson reports as SKIP, never as a pass."""
    print(f"SKIP: {why}", flush=True)
    sys.exit(77)


class Checks:
    """check = Checks(); check(cond, what) prints "ok" or "FAIL" and the
    claim, counts the failures and gives cond back."""

    def __init__(self):
        self.failures = 0

    def __call__(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            self.failures += 1
        return cond

    def status(self):
        """Prints the count of failures; the exit status: 1 when any failed."""
        print(f"{self.failures} failure(s)", flush=True)
        return 1 if self.failures else 0


def sh(argv, timeout=900):
    """Runs argv capturing its output; a non-zero exit prints the command
    and its output and ends the test (exit 1)."""
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        print("FAIL %s: exit %d\n%s%s" % (" ".join(map(str, argv)), r.returncode, r.stdout,
                                          r.stderr), flush=True)
        sys.exit(1)
    return r
