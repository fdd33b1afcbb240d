// The code points random test strings may use: those whose general category
// is the same in Debian's UnicodeData.txt (15.0, the version of nibble's
// tables, rt/text/ucd_gen.py) and in node's own regex engine (\p{gc=..},
// a newer Unicode). Surrogates, private use and unassigned code points are
// left out: the first are not UTF-8, the others mean nothing to a tokenizer.
import fs from "node:fs";

export const UCD_DIR = process.env.NIB_UCD_DIR || "/usr/share/unicode";

const GC = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
            "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf"];

// gc per code point from UnicodeData.txt (ranges given as <..., First>/<..., Last>).
function readCategories(file) {
    const gc = new Map();
    let first = -1;
    for (const line of fs.readFileSync(file, "utf8").split("\n")) {
        if (!line) continue;
        const f = line.split(";");
        const cp = parseInt(f[0], 16);
        if (f[1].endsWith(", First>")) { first = cp; continue; }
        if (f[1].endsWith(", Last>")) {
            for (let c = first; c <= cp; c++) gc.set(c, f[2]);
            continue;
        }
        gc.set(cp, f[2]);
    }
    return gc;
}

function readBlocks(file) {
    const blocks = [];
    for (const line of fs.readFileSync(file, "utf8").split("\n")) {
        const m = /^([0-9A-F]+)\.\.([0-9A-F]+); (.+)$/.exec(line);
        if (m) blocks.push({ lo: parseInt(m[1], 16), hi: parseInt(m[2], 16), name: m[3] });
    }
    return blocks;
}

// { all: [cp...], byBlock: [{name, cps}], gcOf: Map, skipped: n }
export function agreedCodePoints() {
    const file = `${UCD_DIR}/UnicodeData.txt`;
    if (!fs.existsSync(file)) throw new Error(`${file} not found (Debian package unicode-data)`);
    const gc15 = readCategories(file);
    const re = new Map(GC.map((g) => [g, new RegExp(`^\\p{gc=${g}}$`, "u")]));
    const all = [];
    const gcOf = new Map();
    let skipped = 0;
    for (const [cp, g] of gc15) {
        if (!re.has(g)) continue; // Cs, Co, Cn
        if (re.get(g).test(String.fromCodePoint(cp))) {
            all.push(cp);
            gcOf.set(cp, g);
        } else skipped++;
    }
    all.sort((a, b) => a - b);
    const byBlock = [];
    for (const b of readBlocks(`${UCD_DIR}/Blocks.txt`)) {
        const cps = all.filter((c) => c >= b.lo && c <= b.hi);
        if (cps.length) byBlock.push({ name: b.name, cps });
    }
    return { all, byBlock, gcOf, skipped };
}
