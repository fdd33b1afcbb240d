// A stand-in for `nib tokenize` built on the reference itself, so that the
// harness can be tested on its own: with it crosscheck.mjs must pass, and
// with NIB_STUB_BUG set it must fail (the harness-selftest test).
//   NIB_STUB_BUG=merge   every id list that has two or more ids gets its last two swapped
//   NIB_STUB_BUG=special control tokens are matched in plain text too
//   NIB_STUB_BUG=bytes   ill-formed bytes are dropped
//   NIB_STUB_BUG=decode  decoded text loses its last byte
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { bytesToUnicode, loadReference, loadTokenizersLib, npmDir } from "./reference.mjs";
import { splitIllFormed } from "./strings.mjs";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const bug = process.env.NIB_STUB_BUG || "";
const args = process.argv.slice(2);
if (args[0] !== "tokenize") {
    console.error(`nib_stub: only 'tokenize' (got ${args[0]})`);
    process.exit(2);
}
const flags = new Set(args.filter((a) => a.startsWith("--")));
const src = args.filter((a) => !a.startsWith("--"))[1];
const ref = loadReference(await loadTokenizersLib(npmDir(repo)), src);
const lines = fs.readFileSync(0, "latin1").split("\n");
if (lines[lines.length - 1] === "") lines.pop();

const u2b = new Map(bytesToUnicode().map((c, b) => [c, b]));
const strip = JSON.stringify(ref.json.decoder || {}).includes("\"Strip\"");
const skipped = new Set(ref.specialTexts); // special added tokens (unk too) decode to nothing
function decodeBytes(ids) {
    const out = [];
    let first = true; // Fuse then Strip: one space off the whole text
    ids.forEach((id) => {
        const p = ref.piece(id);
        if (skipped.has(p)) return;
        if (ref.byteLevel) for (const c of p) out.push(u2b.get(c));
        else if (/^<0x[0-9A-F]{2}>$/.test(p)) out.push(parseInt(p.slice(3, 5), 16));
        else {
            let s = p.replaceAll("\u2581", " ");
            if (first && strip && s.startsWith(" ")) s = s.slice(1);
            first = false;
            out.push(...Buffer.from(s, "utf8"));
        }
    });
    return Buffer.from(bug === "decode" ? out.slice(0, -1) : out);
}

const res = lines.map((line) => {
    if (flags.has("--decode")) {
        const ids = line.trim() ? line.trim().split(/\s+/).map(Number) : [];
        return decodeBytes(ids).toString("hex");
    }
    let pieces = splitIllFormed(Buffer.from(line, "hex"));
    if (bug === "bytes") pieces = pieces.filter((p) => p.text !== undefined);
    const ids = ref.encodePieces(pieces, { special: flags.has("--special") || bug === "special", bos: !flags.has("--no-bos") });
    if (bug === "merge" && ids.length > 1) [ids[ids.length - 2], ids[ids.length - 1]] = [ids[ids.length - 1], ids[ids.length - 2]];
    return ids.join(" ");
});
process.stdout.write(res.map((l) => l + "\n").join(""));
