// Chat templates, differentially: random templates built from the
// constructs real chat templates use (statements, whitespace control,
// operators, filters, methods, tests, slices, loops, namespaces, macros)
// rendered by `nib chat-render` and by @huggingface/jinja on a few
// conversations. Where the reference renders, nibble must give the same
// bytes; where it fails, nibble must fail too.
//
// usage: node random_xcheck.mjs --nib PATH [--count N] [--seed S] [--verbose]
// Exit 77 (skip) without the npm package (NIB_NPM_DIR, else tests/npm/node_modules).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

process.env.TZ = "UTC";
const here = path.dirname(fileURLToPath(import.meta.url));
const npmDir = process.env.NIB_NPM_DIR || path.join(here, "..", "npm", "node_modules");
const args = process.argv.slice(2);
const opt = (n, d) => (args.includes(n) ? args[args.indexOf(n) + 1] : d);
const nib = opt("--nib");
const count = Number(opt("--count", "1500"));
const seed0 = Number(opt("--seed", "12345"));
const verbose = args.includes("--verbose");
const entry = path.join(npmDir, "@huggingface", "jinja", "dist", "index.js");
if (!fs.existsSync(entry)) {
    console.log(`SKIP: @huggingface/jinja not found under ${npmDir} (NIB_NPM_DIR): run .ci/install-deps.sh`);
    process.exit(77);
}
const { Template } = await import(pathToFileURL(entry).href);
const NOW = 1764460800;
const RealDate = Date;
globalThis.Date = class extends RealDate {
    constructor(...a) {
        if (a.length === 0) super(NOW * 1000);
        else super(...a);
    }
};

let s = seed0 >>> 0;
const r = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = (a) => a[Math.floor(r() * a.length)];
const chance = (p) => r() < p;

const strs = ["'ÉTÉ ΣΑΣ'", "'straße'", "'a'", '"b c"', "' x '", "''", "'a,b,,c'", "'Hello World'", "'\\n'", "'<|im_end|>'", "'abc'", "'42'", "'2.5'", "' 7 '"];
const nums = ["0", "1", "2", "3", "-1", "10", "0.5", "2.0", "1.25", "-3"];
function atom(ctx) {
    const c = [
        () => pick(strs),
        () => pick(nums),
        () => pick(["true", "false", "none", "True", "None"]),
        () => pick(["messages", "add_generation_prompt", "bos_token", "eos_token", "undefined_x"]),
        () => `messages[${pick(["0", "1", "-1", "5"])}]`,
        () => `messages[${pick(["0", "-1"])}].${pick(["role", "content", "missing"])}`,
        () => `messages[${pick(["0", "1"])}]['${pick(["role", "content"])}']`,
        () => (ctx.loop ? pick(["m", "m.role", "m.content", "m['content']", "loop.index", "loop.index0", "loop.first", "loop.last", "loop.length", "loop.revindex", "loop.previtem", "loop.nextitem"]) : pick(strs)),
        () => (ctx.ns ? "ns.n" : pick(nums)),
        () => (ctx.vars.length ? pick(ctx.vars) : pick(strs)),
        () => `[${expr(ctx, 2)}, ${expr(ctx, 2)}]`,
        () => `{'k': ${expr(ctx, 2)}, 'role': 'user'}`,
        () => `range(${pick(["3", "0", "1, 4", "5, 0, -2"])})`,
        () => "strftime_now('%d %b %Y %H:%M')",
    ];
    return pick(c)();
}
const filters = ["trim", "upper", "lower", "length", "first", "last", "reverse", "join", "join(', ')", "tojson", "tojson(indent=2)", "string", "int", "float", "abs", "default('d')", "default('d', true)", "list", "sort", "unique", "title", "capitalize", "indent(2)", "indent(2, true)", "replace('a', 'b')", "items", "selectattr('role', 'equalto', 'user')", "rejectattr('role', 'equalto', 'user')", "map(attribute='role')", "safe", "count", "bool"];
const methods = [".strip()", ".lstrip()", ".rstrip('\\n')", ".split()", ".split(',')", ".split(',', 1)", ".startswith('a')", ".endswith(('b', 'c'))", ".upper()", ".lower()", ".title()", ".replace('a', 'b')", ".get('role')", ".get('x', 'dflt')", ".items()", ".keys()", ".values()", ".length", "[1:]", "[::-1]", "[:2]", "[-1]", "[0]", "[1:3]", "[::2]"];
const tests = ["defined", "undefined", "none", "string", "number", "integer", "mapping", "iterable", "sequence", "odd", "even", "boolean", "true", "false", "lower", "upper", "callable", "nosuch"];
const binops = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and", "or"];
function strAtom(ctx) {
    return pick([
        () => pick(strs),
        () => `messages[${pick(["0", "-1"])}].${pick(["role", "content"])}`,
        () => (ctx.loop ? pick(["m.role", "m.content", "m['content']"]) : pick(strs)),
        () => `(${pick(strs)} ~ ${pick(nums)})`,
    ])();
}
function numExpr(ctx) {
    return pick([
        () => pick(nums),
        () => (ctx.loop ? pick(["loop.index", "loop.index0", "loop.length", "loop.revindex"]) : pick(nums)),
        () => (ctx.ns ? "ns.n" : pick(nums)),
        () => `messages|length`,
        () => `${pick(strs)}|length`,
        () => `${pick(nums)} ${pick(["+", "-", "*", "//", "%", "/", "**"])} ${pick(nums)}`,
    ])();
}
function expr(ctx, d) {
    if (d <= 0) return atom(ctx);
    const c = [
        () => atom(ctx),
        () => `${expr(ctx, d - 1)} ${pick(binops)} ${expr(ctx, d - 1)}`,
        () => `(${expr(ctx, d - 1)})|${pick(filters)}`,
        () => `${atom(ctx)}|${pick(filters)}`,
        () => `${atom(ctx)} is ${chance(0.3) ? "not " : ""}${pick(tests)}`,
        () => `not ${expr(ctx, d - 1)}`,
        () => `-${pick(nums)}`,
        () => `-(${numExpr(ctx)})`,
        () => `${strAtom(ctx)}${pick(methods)}`,
        () => `${strAtom(ctx)}${pick(methods)}`,
        () => `${strAtom(ctx)} ${pick(["+", "~", "==", "!=", "in", "not in"])} ${strAtom(ctx)}`,
        () => `${numExpr(ctx)} ${pick(binops)} ${numExpr(ctx)}`,
        () => `${strAtom(ctx)}|${pick(filters)}`,
        () => `messages|${pick(filters)}`,
        () => `${expr(ctx, d - 1)} if ${expr(ctx, d - 1)} else ${expr(ctx, d - 1)}`,
        () => `${expr(ctx, d - 1)} if ${expr(ctx, d - 1)}`,
    ];
    return pick(c)();
}
const texts = ["x", " ", "\n", "  \n  ", "[", "]", "text ", "\n\n", "\t", "a\n  b"];
const dash = () => (chance(0.3) ? "-" : "");
function block(ctx, d) {
    let out = "";
    const n = 1 + Math.floor(r() * 4);
    for (let i = 0; i < n; i++) out += stmt(ctx, d);
    return out;
}
function stmt(ctx, d) {
    const c = [
        () => pick(texts),
        () => `{{${dash()} ${expr(ctx, 2)} ${dash()}}}`,
        () => `{{${dash()} ${expr(ctx, 1)} ${dash()}}}`,
        () => `{#${dash()} c ${dash()}#}`,
    ];
    if (d > 0) {
        c.push(() => `{%${dash()} if ${expr(ctx, 2)} ${dash()}%}${block(ctx, d - 1)}${chance(0.3) ? `{%${dash()} elif ${expr(ctx, 1)} ${dash()}%}${block(ctx, d - 1)}` : ""}${chance(0.5) ? `{%${dash()} else ${dash()}%}${block(ctx, d - 1)}` : ""}{%${dash()} endif ${dash()}%}`);
        c.push(() => {
            const inner = { ...ctx, loop: true };
            const src = pick(["messages", "messages[1:]", "messages[::-1]", "[1, 2, 3]", "range(3)", "{'a': 1, 'b': 2}", "[]", "messages|selectattr('role', 'equalto', 'user')"]);
            const cond = chance(0.3) ? ` if ${expr(inner, 1)}` : "";
            const brk = chance(0.2) ? `{% if loop.index ${pick(["==", ">"])} 2 %}{% ${pick(["break", "continue"])} %}{% endif %}` : "";
            const els = chance(0.2) ? `{% else %}${block(ctx, d - 1)}` : "";
            return `{%${dash()} for m in ${src}${cond} ${dash()}%}${brk}${block(inner, d - 1)}${els}{%${dash()} endfor ${dash()}%}`;
        });
        c.push(() => {
            const v = pick(["x", "y", "content"]);
            const st = `{%${dash()} set ${v} = ${expr(ctx, 2)} ${dash()}%}`;
            ctx.vars.push(v);
            return st;
        });
        c.push(() => (ctx.ns ? `{%${dash()} set ns.n = ${expr(ctx, 1)} ${dash()}%}` : "{% set ns = namespace(n=0) %}" + ((ctx.ns = true), "")));
        c.push(() => `{%- filter ${pick(["upper", "trim", "lower"])} %}${block(ctx, d - 1)}{% endfilter %}`);
        c.push(() => `{% macro mac(a, b='B') %}[{{ a }}|{{ b }}]{% endmacro %}{{ mac(${expr(ctx, 1)}) }}{{ mac(1, b=${expr(ctx, 1)}) }}`);
        c.push(() => `{% set blk %}${block(ctx, d - 1)}{% endset %}{{ blk|length }}{{ blk }}`);
        c.push(() => `{% if ${expr(ctx, 1)} %}{{ raise_exception('raised ' ~ ${expr(ctx, 1)}) }}{% endif %}`);
    }
    return pick(c)();
}

const convs = [
    [{ role: "system", content: " Be brief. " }, { role: "user", content: "a,b" }, { role: "assistant", content: "Yes\n" }, { role: "user", content: "abc" }],
    [{ role: "user", content: "Hello World" }],
    [{ role: "user", content: "" }, { role: "assistant", content: "  " }],
    [{ role: "user", content: "Straße ÉTÉ ΟΔΟΣ ǅ ﬁ İ 😀 ΑΣ." }, { role: "assistant", content: " été, Ωμέγα! " }],
];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "nib-chatrx-"));
let failures = 0, agreeOk = 0, agreeErr = 0, refused = 0;
for (let i = 0; i < count; i++) {
    const ctx = { vars: [], loop: false, ns: false };
    const tmpl = block(ctx, 3);
    const conv = convs[i % convs.length];
    const gen = i % 2 === 0;
    let ref, refErr = null;
    try {
        ref = new Template(tmpl).render({ messages: conv, add_generation_prompt: gen, bos_token: "<s>", eos_token: "</s>" });
    } catch (e) {
        refErr = String(e && e.message);
    }
    const tf = path.join(tmp, "t.jinja"), mf = path.join(tmp, "m.json");
    fs.writeFileSync(tf, tmpl);
    fs.writeFileSync(mf, JSON.stringify(conv));
    const argv = ["chat-render", "--template", tf, "--messages", mf, "--bos", "<s>", "--eos", "</s>", "--now", String(NOW)];
    if (!gen) argv.push("--no-generation-prompt");
    const res = spawnSync(nib, argv, { maxBuffer: 64 << 20 });
    const err = res.stderr.toString().replace(/^nib chat-render: /, "").trim();
    if (/Sanitizer|runtime error:/.test(res.stderr.toString())) {
        console.log(`FAIL: sanitizer report\n${res.stderr.toString()}`);
        process.exit(1);
    }
    let bad = null;
    if (refErr === null) {
        if (/not supported/.test(err)) refused++;
        else if (res.status !== 0) bad = `nib failed: ${err}`;
        else if (!res.stdout.equals(Buffer.from(ref, "utf8")))
            bad = `differs\n  ref: ${JSON.stringify(ref)}\n  nib: ${JSON.stringify(res.stdout.toString())}`;
        else agreeOk++;
    } else if (res.status === 0) {
        bad = `nib rendered what the reference rejects (${refErr})\n  nib: ${JSON.stringify(res.stdout.toString())}`;
    } else {
        agreeErr++;
        if (args.includes("--errors")) console.log("ERR", refErr.slice(0, 60));
    }
    if (bad) {
        failures++;
        if (failures <= 10 || verbose) console.log(`FAIL #${i}: ${bad}\n  template: ${JSON.stringify(tmpl)}`);
    }
}
fs.rmSync(tmp, { recursive: true, force: true });
console.log(`${count} random templates: ${agreeOk} rendered alike, ${agreeErr} rejected by both, ${refused} refused by nibble as not supported, ${failures} differ`);
process.exit(failures ? 1 : 0);
