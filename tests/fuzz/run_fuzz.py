#!/usr/bin/env python3
"""run_fuzz.py FUZZER CORPUS WORKDIR SECONDS [INPUT_TIMEOUT]: run a
libFuzzer target for a bounded time (an input running longer than
INPUT_TIMEOUT seconds, default 10, is a failure), starting from the committed corpus (read only: new inputs go
to WORKDIR), and fail on any crash, leak, sanitizer report or invariant.
A crashing input is left in WORKDIR/crash-*; fix the bug, then copy the
input into the committed corpus so it stays a regression test."""
import os
import subprocess
import sys

fuzzer, corpus, work, seconds = sys.argv[1:5]
input_timeout = sys.argv[5] if len(sys.argv) > 5 else "10"
os.makedirs(work, exist_ok=True)
cmd = [fuzzer, "-max_total_time=" + seconds, "-timeout=" + input_timeout, "-rss_limit_mb=2048",
       "-max_len=65536", "-print_final_stats=1", "-artifact_prefix=" + work + "/", work, corpus]
print(" ".join(cmd), flush=True)
r = subprocess.run(cmd)
if r.returncode != 0:
    print("FAIL: %s exited %d; the input is in %s" % (os.path.basename(fuzzer), r.returncode, work))
    sys.exit(1)
print("%s: no failure in %s s" % (os.path.basename(fuzzer), seconds))
