// The independent reference: @huggingface/tokenizers (pure JS), loaded from
// NIB_NPM_DIR, on a real tokenizer.json. Three views of one file:
//
//   special   the file as is: control tokens written in the text map to
//             their ids (nib tokenize --special);
//   plain     the file with its special added tokens removed from
//             added_tokens, so the reference reads "<|eot_id|>" as text
//             (nib tokenize, the default: control tokens never come from
//             plain text); non-special added tokens stay, as in nibble;
//   bytes     ill-formed UTF-8 (no JS string can hold it): each byte of an
//             ill-formed sequence stands in the text as a private-use
//             character (no regex class, untouched by the normalizers),
//             and the model is given the pieces between such characters
//             while each character becomes its byte's token: the rule of
//             docs/tokenizers.md, modelled on the reference.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

export function npmDir(repoRoot) {
    return process.env.NIB_NPM_DIR || path.join(repoRoot, "tests", "npm", "node_modules");
}

// null when the packages are missing (the caller skips, saying why).
export async function loadTokenizersLib(dir) {
    const f = path.join(dir, "@huggingface", "tokenizers", "dist", "tokenizers.mjs");
    if (!fs.existsSync(f)) return null;
    return import(pathToFileURL(f).href);
}

// GPT-2's byte-level alphabet (printable Latin-1 stands for itself; every
// other byte is U+0100 + k in byte order).
export function bytesToUnicode() {
    const map = new Array(256);
    let k = 0;
    for (let b = 0; b < 256; b++) {
        const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        map[b] = String.fromCodePoint(printable ? b : 0x100 + k++);
    }
    return map;
}

const PLACEHOLDER = 0xe000; // U+E000 + byte: stands for one ill-formed byte

export class Reference {
    constructor(lib, json, config) {
        this.json = json;
        this.special = new lib.Tokenizer(json, config);
        const plainJson = { ...json, added_tokens: json.added_tokens.filter((t) => !t.special) };
        this.plain = new lib.Tokenizer(plainJson, config);
        this.quirkFixed = fixNormalizedQuirk(this.special) + fixNormalizedQuirk(this.plain);
        this.byteLevel = usesByteLevel(json);
        const b2u = bytesToUnicode();
        this.byteToken = new Array(256);
        this.placeholderForm = new Map(); // how a placeholder looks once pre-tokenized
        for (let b = 0; b < 256; b++) {
            const ph = String.fromCodePoint(PLACEHOLDER + b);
            if (this.byteLevel) {
                this.byteToken[b] = b2u[b];
                this.placeholderForm.set([...Buffer.from(ph, "utf8")].map((x) => b2u[x]).join(""), b);
            } else {
                this.byteToken[b] = "<0x" + b.toString(16).toUpperCase().padStart(2, "0") + ">";
                this.placeholderForm.set(ph, b);
            }
        }
        const bosIds = this.special.encode("", { add_special_tokens: true }).ids;
        this.bos = bosIds.length ? bosIds : [];
        this.specialTexts = json.added_tokens.filter((t) => t.special).map((t) => t.content);
        this.addedTexts = json.added_tokens.map((t) => t.content);
        this.installByteRule(this.plain);
        this.installByteRule(this.special);
    }

    // ids the way nib tokenize prints them (BOS by the post-processor)
    encode(text, { special = false, bos = true } = {}) {
        const t = special ? this.special : this.plain;
        const ids = t.encode(text, { add_special_tokens: false }).ids;
        return bos ? [...this.bos, ...ids] : ids;
    }

    // pieces from splitIllFormed(): [{text} | {byte}]
    encodePieces(pieces, opts) {
        const text = pieces.map((p) => (p.text !== undefined ? p.text : String.fromCodePoint(PLACEHOLDER + p.byte))).join("");
        return this.encode(text, opts);
    }

    decode(ids) {
        if (!ids.length) return "";
        return this.special.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
    }

    // 1 when byte b has a token of its own (else it becomes unk)
    hasByteToken(b) {
        return this.special.token_to_id(this.byteToken[b]) !== undefined;
    }

    piece(id) {
        const t = this.special.id_to_token(id);
        return t === undefined ? `#${id}` : t;
    }

    // The model step splits each word at placeholders; each placeholder is
    // its byte's token, never merged with a neighbour.
    installByteRule(tok) {
        const model = tok.model;
        const encodeWords = model.encode.bind(model);
        const forms = this.placeholderForm, byteToken = this.byteToken;
        const phLen = this.byteLevel ? 3 : 1; // chars of one placeholder form
        const hasPlaceholder = this.byteLevel ? (w) => w.includes("\u00ee") : (w) => /[\ue000-\ue0ff]/u.test(w);
        model.encode = (words) => {
            const out = [];
            for (const w of words) {
                if (!hasPlaceholder(w)) {
                    out.push(...encodeWords([w]));
                    continue;
                }
                const chars = Array.from(w);
                let run = "";
                for (let i = 0; i < chars.length; ) {
                    const form = chars.slice(i, i + phLen).join("");
                    if (forms.has(form)) {
                        if (run) out.push(...encodeWords([run]));
                        run = "";
                        out.push(byteToken[forms.get(form)]);
                        i += phLen;
                    } else run += chars[i++];
                }
                if (run) out.push(...encodeWords([run]));
            }
            return out;
        };
    }
}

// One quirk of tokenizers.js, corrected to Hugging Face's Rust tokenizers
// (the canonical implementation, whose semantics nibble follows): an added
// token marked "normalized" is matched in the normalized text by its
// normalized content ("▁<unk>" after a Prepend normalizer), but
// tokenizers.js also takes any text piece between matches that equals its
// RAW content for the token. Rust never does: the raw content of a
// normalized token is text. Returns how many tokens it touched.
function fixNormalizedQuirk(tok) {
    let n = 0;
    if (!tok.normalizer) return 0;
    for (const t of tok.added_tokens) {
        if (!t.normalized || tok.normalizer(t.content) === t.content) continue;
        if (tok.added_tokens_map.get(t.content) === t) {
            tok.added_tokens_map.delete(t.content);
            n++;
        }
    }
    return n;
}

function usesByteLevel(json) {
    const steps = (p) => (!p ? [] : p.type === "Sequence" ? p.pretokenizers.flatMap(steps) : [p]);
    return steps(json.pre_tokenizer).some((p) => p.type === "ByteLevel");
}

export function loadReference(lib, tokenizerJsonPath) {
    const json = JSON.parse(fs.readFileSync(tokenizerJsonPath, "utf8"));
    const cfgPath = path.join(path.dirname(tokenizerJsonPath), "tokenizer_config.json");
    const config = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
    return new Reference(lib, json, config);
}
