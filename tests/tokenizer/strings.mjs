// Deterministic test strings for the tokenizer cross-check: the same seed
// gives the same strings on every machine and node version (a seeded PRNG,
// code points only from ucd_agree.mjs, no Math.random, no locale).
//
//   validStrings(seed, count, addedTexts) -> [string]   well-formed text
//   invalidStrings(seed, count)          -> [Buffer]   ill-formed UTF-8
import { agreedCodePoints } from "./ucd_agree.mjs";

// mulberry32: small, fast, and the same everywhere.
export function rng(seed) {
    let a = seed >>> 0;
    const next = () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const r = {
        next,
        int: (n) => Math.floor(next() * n), // 0..n-1
        range: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
        pick: (arr) => arr[Math.floor(next() * arr.length)],
        chance: (p) => next() < p,
    };
    return r;
}

// Prompts of the existing tests (tests/proto/test_protocol.py PROMPTS,
// tests/rt/test_serve.c, tests/proto/proto_host.c, tests/fuzz) and the
// classic tokenizer edge cases.
export const TEST_PROMPTS = [
    "Once upon a time", "The little dog", "Lily and Ben", "hello", "A", "One day, a girl",
    "The sun was hot", "Tom had a red ball", "Once upon", "abc", "once upon ",
    "Once upon a time, \u2581 caf\u00e9!", "the ", "th", "ing", "\u00e9", "\u2581", "\u{1f600}",
    "", " ", "  ", "   ", "\n", "\n\n", " \n", "\t", "Hello world", " Hello world",
    "Hello World!", "hello  world", "Hello\nworld", "Hello, y'all! How are you \u{1f601} ?",
    "I'm 99.9% sure it's 1,234,567 or 3.14159", "\u00a0Hello", "<s>", "</s>", "<unk>",
];

const WORDS = [
    "the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on", "are",
    "with", "as", "I", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had",
    "by", "hot", "word", "but", "what", "some", "we", "can", "out", "other", "were", "all",
    "there", "when", "up", "use", "your", "how", "said", "an", "each", "she", "which", "do",
    "their", "time", "if", "will", "way", "about", "many", "then", "them", "write", "would",
    "like", "so", "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look",
    "tokenization", "unbelievable", "antidisestablishmentarianism", "Llama", "Qwen", "Gemma",
    "nibble", "appliance", "transformer", "café", "naïve", "résumé", "Zürich", "straße",
    "jalapeño", "façade", "coöperate", "Ελληνικά", "русский", "日本語", "中文", "한국어",
    "العربية", "עברית", "हिन्दी", "ไทย", "Tiếng Việt", "Türkçe", "İstanbul", "ıi", "ǅ",
];
const CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve",
                      "'M", "'LL", "'D", "\u2019s", "\u2019t", "'", "''", "'x", "n't", "N'T"];
const PUNCT = [".", ",", "!", "?", ";", ":", "...", "-", "--", "\u2014", "(", ")", "[", "]", "{",
               "}", "\"", "'", "`", "/", "\\", "@", "#", "$", "%", "^", "&", "*", "_", "+", "=",
               "<", ">", "|", "~", "\u00bf", "\u00a1", "\u00ab", "\u00bb", "\u201c", "\u201d",
               "\u3001", "\u3002", "\uff0c", "\uff01", "\u00b7", "\u2026"];
const SPACES = [" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\n ", "\u00a0", "\u3000",
                "\u2009", "\u200b", "\u0085", "\u2028", "\u2029", "\u000b", "\u000c", "\u1680",
                "\u202f", "\u205f", "\ufeff", "\t\t", "    ", "\u2003"];
const CODE = [
    "int main(void) {\n    return 0;\n}\n",
    "for (size_t i = 0; i < n; i++)\n\tsum += a[i] * b[i];",
    "def f(x):\n    return x ** 2  # square\n",
    "if __name__ == \"__main__\":\n    main()\n",
    "const xs = [1, 2, 3].map((x) => x * 2);\n",
    "{\"name\": \"nibble\", \"version\": 4, \"ok\": true, \"list\": [1.5e-3, null]}",
    "<div class=\"a\"><p>Hello &amp; welcome</p></div>",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "$ ls -la | grep '^d' && echo \"done\" >> /tmp/log.txt 2>&1",
    "fn main() { println!(\"{}\", 1 + 2); }",
    "#include <stdio.h>\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n",
    "x = {'a': 1, 'b': [2, 3]}\r\nprint(x['a'])\r\n",
    "    \n        \n\t\t\n",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=6;g>>=7;h&=8;i|=9;j^=10;",
    "// TODO(nib): don't forget the 'edge' cases\n/* block */",
    "https://example.com/path?q=1&r=two#frag",
    "user@example.org, 192.168.0.1:8080, 2001:db8::1",
];
const EMOJI_BASE = [0x1f600, 0x1f601, 0x1f602, 0x1f923, 0x1f60d, 0x1f44d, 0x1f44b, 0x1f468,
                    0x1f469, 0x1f467, 0x1f466, 0x1f9d1, 0x2764, 0x1f525, 0x2728, 0x1f680,
                    0x1f30d, 0x1f436, 0x1f431, 0x1f355, 0x2615, 0x26bd, 0x1f3f3, 0x1f3f4,
                    0x1f4a9, 0x1f937, 0x1f926, 0x1f91d, 0x1f64f, 0x263a, 0x2639, 0x1f9e0];
const SKIN = [0x1f3fb, 0x1f3fc, 0x1f3fd, 0x1f3fe, 0x1f3ff];

function emoji(r) {
    const k = r.int(7);
    const base = () => String.fromCodePoint(r.pick(EMOJI_BASE));
    if (k === 0) return base();
    if (k === 1) return base() + String.fromCodePoint(r.pick(SKIN));
    if (k === 2) { // ZWJ sequence: family, couple, profession
        let s = base();
        for (let i = r.range(1, 3); i > 0; i--)
            s += "\u200d" + (r.chance(0.3) ? "\u2764\ufe0f" : base());
        return s;
    }
    if (k === 3) { // flag: two regional indicators
        const ri = () => String.fromCodePoint(0x1f1e6 + r.int(26));
        return ri() + ri();
    }
    if (k === 4) return String.fromCodePoint(0x30 + r.int(10)) + "\ufe0f\u20e3"; // keycap
    if (k === 5) // tag sequence (subdivision flag)
        return "\u{1f3f4}\u{e0067}\u{e0062}" + r.pick(["\u{e0065}\u{e006e}\u{e0067}",
                                                       "\u{e0073}\u{e0063}\u{e0074}"]) + "\u{e007f}";
    return base() + "\ufe0f";
}

// Every character of the fixed lists above must be one the tables agree on.
function checkLists(ucd) {
    const lists = [TEST_PROMPTS, WORDS, CONTRACTIONS, PUNCT, SPACES, CODE,
                   [EMOJI_BASE, SKIN].flat().map((c) => String.fromCodePoint(c))];
    for (const s of lists.flat())
        for (const ch of s)
            if (!ucd.gcOf.has(ch.codePointAt(0)))
                throw new Error(`U+${ch.codePointAt(0).toString(16)} in a fixed list has no agreed category`);
}

export function validStrings(seed, count, addedTexts = []) {
    const r = rng(seed);
    const ucd = agreedCodePoints();
    checkLists(ucd);
    const blocks = ucd.byBlock;
    const cjk = blocks.filter((b) => /CJK|Hiragana|Katakana|Hangul|Bopomofo|Halfwidth/.test(b.name));
    const marks = ucd.all.filter((c) => /^M/.test(ucd.gcOf.get(c)));
    const digits = ucd.all.filter((c) => /^N/.test(ucd.gcOf.get(c)));
    const fromBlock = (b, n) => {
        let s = "";
        for (let i = 0; i < n; i++) s += String.fromCodePoint(r.pick(b.cps));
        return s;
    };
    const anyChar = () => String.fromCodePoint(r.pick(ucd.all));
    const word = () => {
        let w = r.pick(WORDS);
        const c = r.int(6);
        if (c === 0) w = w.toUpperCase();
        else if (c === 1) w = w[0].toUpperCase() + w.slice(1);
        else if (c === 2) w = [...w].map((ch) => (r.chance(0.5) ? ch.toUpperCase() : ch)).join("");
        return w;
    };
    const specials = addedTexts.length ? addedTexts : ["<s>", "</s>"];
    const lookalike = () => {
        const s = r.pick(specials);
        const k = r.int(8);
        if (k === 0) return s;
        if (k === 1) return s.slice(0, Math.max(1, s.length - 1)); // truncated
        if (k === 2) return s.slice(1);
        if (k === 3) return s.toUpperCase();
        if (k === 4) return s + s; // adjacent
        if (k === 5) return " " + s + " ";
        if (k === 6) return s.replace(/[a-z]/, (c) => c + c);
        return "<0x" + r.int(256).toString(16).toUpperCase().padStart(2, "0") + ">";
    };
    // Each kind makes one fragment; strings are one or more fragments.
    const kinds = [
        () => r.pick(TEST_PROMPTS),
        () => { // words of random scripts
            let s = "";
            for (let i = r.range(1, 8); i > 0; i--)
                s += fromBlock(r.pick(blocks), r.range(1, 10)) + (r.chance(0.7) ? " " : r.pick(PUNCT));
            return s;
        },
        () => { let s = ""; for (let i = r.range(1, 30); i > 0; i--) s += anyChar(); return s; },
        () => { let s = ""; for (let i = r.range(1, 6); i > 0; i--) s += emoji(r) + (r.chance(0.5) ? " " : ""); return s; },
        () => { // CJK, with its punctuation and some Latin
            let s = "";
            for (let i = r.range(1, 6); i > 0; i--)
                s += fromBlock(r.pick(cjk), r.range(1, 12)) + (r.chance(0.3) ? r.pick(PUNCT) : "") +
                     (r.chance(0.2) ? word() : "");
            return s;
        },
        () => { // whitespace and newline runs
            let s = "";
            for (let i = r.range(1, 6); i > 0; i--) {
                const w = r.pick(SPACES);
                s += w.repeat(r.chance(0.3) ? r.range(2, 40) : 1) + (r.chance(0.6) ? word() : "");
            }
            return s;
        },
        () => { // digits
            const k = r.int(4);
            let s = "";
            if (k === 0) for (let i = r.range(1, 40); i > 0; i--) s += String(r.int(10));
            else if (k === 1) s = String(r.int(1e9)) + r.pick([".", ",", " ", ""]) + String(r.int(1e6));
            else if (k === 2) for (let i = r.range(1, 12); i > 0; i--) s += String.fromCodePoint(r.pick(digits));
            else s = `${r.int(100)}x${r.int(1000)} = ${r.int(1e7)}; v${r.int(10)}.${r.int(100)}`;
            return s;
        },
        () => r.pick(CODE),
        () => { // contractions, mixed case
            let s = "";
            for (let i = r.range(1, 6); i > 0; i--) s += word() + r.pick(CONTRACTIONS) + " ";
            return s;
        },
        () => { // prose
            let s = "";
            for (let i = r.range(2, 20); i > 0; i--) s += (r.chance(0.8) ? " " : "") + word() + (r.chance(0.15) ? r.pick(PUNCT) : "");
            return s;
        },
        () => { // combining marks: decomposed letters, stacked marks, marks first
            let s = "";
            for (let i = r.range(1, 8); i > 0; i--) {
                s += r.chance(0.8) ? r.pick(["e", "a", "o", "u", "n", "A", "\u1100", "\u3131"]) : "";
                for (let j = r.range(1, 3); j > 0; j--) s += String.fromCodePoint(r.pick(marks));
            }
            // Hangul jamo L V (T): NFC composes them into syllables
            if (r.chance(0.5)) s += String.fromCodePoint(0x1100 + r.int(19), 0x1161 + r.int(21)) +
                                     (r.chance(0.5) ? String.fromCodePoint(0x11a8 + r.int(27)) : "");
            return s;
        },
        () => { // special-token lookalikes in text
            let s = "";
            for (let i = r.range(1, 4); i > 0; i--)
                s += (r.chance(0.5) ? word() : "") + lookalike() + (r.chance(0.5) ? r.pick(SPACES) : "");
            return s;
        },
    ];
    const out = [...TEST_PROMPTS, ...specials.slice(0, 300)];
    while (out.length < count) {
        let s = "";
        const parts = r.chance(0.1) ? r.range(5, 40) : r.range(1, 3);
        for (let i = 0; i < parts; i++) s += r.pick(kinds)() + (r.chance(0.3) ? r.pick(SPACES) : "");
        out.push(s);
    }
    return out.slice(0, count);
}

// Ill-formed UTF-8: well-formed text with bytes broken in every way Unicode
// 3.9 (Table 3-7) names: stray continuation bytes, truncated sequences,
// overlong forms, surrogates, code points past U+10FFFF, C0/C1/F5..FF.
export function invalidStrings(seed, count) {
    const r = rng(seed);
    const base = validStrings(seed ^ 0x5bd1e995, count);
    const bad = [
        () => [0x80 + r.int(64)],                       // stray continuation
        () => [0xc2 + r.int(30)],                       // 2-byte lead, nothing after
        () => [0xe0 + r.int(16), 0x80 + r.int(32) + 0x20], // 3-byte lead + 1
        () => [0xf0 + r.int(5), 0x90, 0x80],            // 4-byte lead + 2
        () => [0xc0 + r.int(2), 0x80 + r.int(64)],      // overlong 2-byte
        () => [0xe0, 0x80 + r.int(32), 0x80 + r.int(64)], // overlong 3-byte
        () => [0xf0, 0x80 + r.int(16), 0x80, 0x80],     // overlong 4-byte
        () => [0xed, 0xa0 + r.int(32), 0x80 + r.int(64)], // surrogate
        () => [0xf4, 0x90 + r.int(48), 0x80, 0x80],     // > U+10FFFF
        () => [0xf5 + r.int(11)],                       // never valid
        () => { const n = r.range(1, 8); return Array.from({ length: n }, () => 0x80 + r.int(128)); },
    ];
    const out = [];
    for (let i = 0; i < count; i++) {
        let bytes = [...Buffer.from(base[i], "utf8")];
        const k = r.int(4);
        if (k === 0 && bytes.length > 1) { // cut a multi-byte character
            const cuts = bytes.map((b, j) => j).filter((j) => bytes[j] >= 0xc0);
            if (cuts.length) {
                const j = r.pick(cuts);
                bytes.splice(j + 1, 1);
            }
        }
        for (let n = r.range(1, 4); n > 0; n--) {
            const at = r.int(bytes.length + 1);
            bytes.splice(at, 0, ...r.pick(bad)());
        }
        out.push(Buffer.from(bytes));
    }
    return out;
}

// Well-formed UTF-8 per Unicode Table 3-7: returns the list of pieces,
// {text} for each maximal well-formed run and {byte} for each byte of an
// ill-formed sequence (the rule docs/tokenizers.md gives nibble).
export function splitIllFormed(buf) {
    const pieces = [];
    let start = 0, i = 0;
    const flush = (end) => { if (end > start) pieces.push({ text: buf.subarray(start, end).toString("utf8") }); };
    while (i < buf.length) {
        const n = wellFormedLength(buf, i);
        if (n) { i += n; continue; }
        flush(i);
        pieces.push({ byte: buf[i] });
        i++;
        start = i;
    }
    flush(i);
    return pieces;
}

// Length of the well-formed sequence at buf[i], or 0.
export function wellFormedLength(buf, i) {
    const b = buf[i], at = (k) => (i + k < buf.length ? buf[i + k] : -1);
    const cont = (x, lo = 0x80, hi = 0xbf) => x >= lo && x <= hi;
    if (b < 0x80) return 1;
    if (b >= 0xc2 && b <= 0xdf) return cont(at(1)) ? 2 : 0;
    if (b >= 0xe0 && b <= 0xef) {
        const lo = b === 0xe0 ? 0xa0 : 0x80, hi = b === 0xed ? 0x9f : 0xbf;
        return cont(at(1), lo, hi) && cont(at(2)) ? 3 : 0;
    }
    if (b >= 0xf0 && b <= 0xf4) {
        const lo = b === 0xf0 ? 0x90 : 0x80, hi = b === 0xf4 ? 0x8f : 0xbf;
        return cont(at(1), lo, hi) && cont(at(2)) && cont(at(3)) ? 4 : 0;
    }
    return 0;
}
