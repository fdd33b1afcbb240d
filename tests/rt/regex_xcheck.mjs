// Cross-check of nibble's regex engine (rt/text/regex.c) against
// @huggingface/tokenizers: for every pattern of rt/text/pretok_patterns.h
// (and a few extra constructs), thousands of random strings are split by
// the library's own Oniguruma-to-JavaScript translation (its Split
// pre-tokenizer's compiled RegExp, run with matchAll) and by the C engine
// (the regex_split test program, once as used and once with its memoized
// search alone); the match offsets must be equal.
//
// Random text uses only code points whose general category is the same in
// Debian's UnicodeData.txt (the Unicode version nibble's tables come from)
// and in node's \p{gc=...} (node's own, newer Unicode), decided here by
// reading /usr/share/unicode/UnicodeData.txt.
//
// usage: node regex_xcheck.mjs REGEX_SPLIT [STRINGS_PER_PATTERN]
// Exit 77 (skip, with a message) when @huggingface/tokenizers is missing.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const splitter = process.argv[2];
const perPattern = Number(process.argv[3] || 3000);
if (!splitter) {
  console.error('usage: node regex_xcheck.mjs REGEX_SPLIT [N]');
  process.exit(2);
}

const candidates = [
  process.env.NIB_NPM_DIR && path.join(process.env.NIB_NPM_DIR, 'node_modules'),
  path.join(here, '..', 'npm', 'node_modules'),
  '/tmp/npmtry/node_modules',
].filter(Boolean);
const pkgDir = candidates
  .map((d) => path.join(d, '@huggingface', 'tokenizers', 'dist', 'tokenizers.mjs'))
  .find((f) => existsSync(f));
if (!pkgDir) {
  console.log('SKIP: @huggingface/tokenizers not installed (looked in ' + candidates.join(', ') +
    '); run .ci/install-deps.sh');
  process.exit(77);
}
const ucdFile = '/usr/share/unicode/UnicodeData.txt';
if (!existsSync(ucdFile)) {
  console.log('SKIP: ' + ucdFile + ' missing: install unicode-data');
  process.exit(77);
}
const { SplitPreTokenizer } = await import(pkgDir);

// Deterministic PRNG (xorshift32).
let seed = 0x9e3779b9;
const rnd = () => {
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
};
const pick = (a) => a[Math.floor(rnd() * a.length)];

// Code points whose category agrees between Debian's data and node.
const gcOf = new Map();
{
  let first = null;
  for (const line of readFileSync(ucdFile, 'utf8').split('\n')) {
    if (!line) continue;
    const f = line.split(';');
    const cp = parseInt(f[0], 16);
    if (f[1].endsWith(', First>')) { first = cp; continue; }
    const lo = f[1].endsWith(', Last>') ? first : cp;
    for (let c = lo; c <= cp; c++) gcOf.set(c, f[2]);
  }
}
const byGc = new Map();
const agree = [];
for (const [cp, gc] of gcOf) {
  if (gc === 'Cs' || gc === 'Co') continue;
  if (cp >= 0xAC00 && cp <= 0xD7A3 && (cp & 15) !== 0) continue; // thin out Hangul
  if (cp >= 0x4E00 && cp <= 0x9FFF && (cp & 15) !== 0) continue; // and CJK
  if (cp >= 0x20000 && (cp & 63) !== 0) continue;
  if (!new RegExp(`^\\p{gc=${gc}}$`, 'u').test(String.fromCodePoint(cp))) continue;
  agree.push(cp);
  if (!byGc.has(gc)) byGc.set(gc, []);
  byGc.get(gc).push(cp);
}
const ascii = [];
for (let c = 0x20; c < 0x7f; c++) ascii.push(c);
const spaces = [0x20, 0x20, 0x20, 0x09, 0x0a, 0x0a, 0x0d, 0x0b, 0x0c, 0x85, 0xa0, 0x3000, 0x2028,
  0x2029, 0x2003, 0x200b, 0xfeff];
const words = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "'Re", 'IMGIMG', 'Z',
  '<sentinel:12>', '123', '4567', '.', '...', '?!', '//', '\r\n', '\n\n', '    ', '  '];
const cats = [...byGc.keys()];

function randomString() {
  const n = Math.floor(rnd() * 40);
  let s = '';
  for (let i = 0; i < n; i++) {
    const r = rnd();
    if (r < 0.35) s += String.fromCodePoint(pick(ascii));
    else if (r < 0.5) s += String.fromCodePoint(pick(spaces));
    else if (r < 0.6) s += pick(words);
    else if (r < 0.8) s += String.fromCodePoint(pick(byGc.get(pick(cats))));
    else s += String.fromCodePoint(pick(agree));
  }
  return s;
}

// Byte offset of each UTF-16 index of s.
function byteOffsets(s) {
  const off = new Array(s.length + 1);
  let b = 0;
  for (let i = 0; i < s.length;) {
    const cp = s.codePointAt(i);
    const units = cp > 0xffff ? 2 : 1;
    off[i] = b;
    if (units === 2) off[i + 1] = b;
    b += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    i += units;
  }
  off[s.length] = b;
  return off;
}

function jsSplit(re, s) {
  const off = byteOffsets(s);
  const out = [];
  for (const m of s.matchAll(re)) {
    if (m[0].length === 0) continue;
    out.push(`${off[m.index]}-${off[m.index + m[0].length]}`);
  }
  return out.join(' ');
}

const listed = spawnSync(splitter, ['-l'], { encoding: 'utf8' });
if (listed.status !== 0) {
  console.error('regex_split -l failed: ' + listed.stderr);
  process.exit(1);
}
const patterns = new Map(); // text -> names
for (const line of listed.stdout.split('\n')) {
  if (!line) continue;
  const [name, idx, hex] = line.split(' ');
  const text = Buffer.from(hex, 'hex').toString('utf8');
  if (!patterns.has(text)) patterns.set(text, []);
  patterns.get(text).push(`${name}[${idx}]`);
}
// Constructs the table does not use but the engine supports.
for (const extra of ['(?i:[a-c]x|hello)+', '\\w+|\\W', '\\d{2,4}?x|\\D', '^\\s*\\S+$|.',
  '(?=\\p{Lu})\\p{L}+|[^\\p{L}]+?', ' ?[^(\\s|[.,!?…。，、।۔،])]+', '[a[bc]x-z]+|[\\[\\]]', 'a{2}+|b*?c|[\\x{400}-\\x{4FF}\\h]+', '\\bfoo\\B|\\A.|.\\z|.\\Z']) {
  patterns.set(extra, ['extra']);
}

let failures = 0;
let total = 0;
for (const [text, names] of patterns) {
  let re;
  try {
    re = new SplitPreTokenizer({ type: 'Split', pattern: { Regex: text }, behavior: 'Isolated',
      invert: false }).pattern;
  } catch (e) {
    console.log(`FAIL ${names.join(',')}: the JS library cannot translate it: ${e.message}`);
    failures++;
    continue;
  }
  const strings = [];
  for (let i = 0; i < perPattern; i++) strings.push(randomString());
  const input = strings.map((s) => Buffer.from(s, 'utf8').toString('hex')).join('\n') + '\n';
  const want = strings.map((s) => jsSplit(re, s));
  // both the engine as used (nib_re_find) and its memoized search alone (-m)
  for (const mode of [[], ['-m']]) {
    const r = spawnSync(splitter, [...mode, '-x', Buffer.from(text, 'utf8').toString('hex')],
      { input, encoding: 'utf8', maxBuffer: 1 << 28 });
    const label = `${names.join(',').slice(0, 60)}${mode.length ? ' (memo)' : ''}`;
    if (r.status !== 0 || r.stdout.startsWith('ERROR')) {
      console.log(`FAIL ${label}: regex_split: ${r.stdout.slice(0, 200)}${r.stderr}`);
      failures++;
      continue;
    }
    const got = r.stdout.split('\n');
    let bad = 0;
    for (let i = 0; i < strings.length; i++) {
      total++;
      if (got[i] !== want[i]) {
        if (bad < 3) {
          console.log(`FAIL ${label}: ${JSON.stringify(strings[i])}\n  js: ${want[i]}\n  c:  ${got[i]}`);
        }
        bad++;
      }
    }
    console.log(`${bad ? 'FAIL' : 'ok  '} ${label}: ${strings.length - bad}/${strings.length}`);
    if (bad) failures++;
  }
}
console.log(`${patterns.size} patterns, ${total} strings, ${failures} failing patterns; ` +
  `${agree.length} code points where the two Unicode versions agree`);
process.exit(failures ? 1 : 0);
