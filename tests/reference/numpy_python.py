"""Run the calling script under a python3 that has numpy.

The python3 first on PATH may be another interpreter than Debian's (which
.ci/install-deps.sh gives python3-numpy): re-exec the script under
/usr/bin/python3 when that one has numpy, or exit 77 (skip) saying why."""
import os
import subprocess
import sys


def reexec_with_numpy():
    try:
        import numpy  # noqa: F401
        return
    except ImportError:
        pass
    for py in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(py) and os.path.realpath(py) != os.path.realpath(sys.executable):
            r = subprocess.run([py, "-c", "import numpy"], capture_output=True)
            if r.returncode == 0:
                os.execv(py, [py] + sys.argv)
    print("SKIP: numpy not found (python3-numpy, .ci/install-deps.sh): the float64 reference "
          "needs it")
    sys.exit(77)
