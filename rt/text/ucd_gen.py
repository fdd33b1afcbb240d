#!/usr/bin/env python3
"""Generate nibble's Unicode tables (rt/text/ucd.h) from Debian's unicode-data.

Usage: ucd_gen.py [--dir /usr/share/unicode] -o OUT.c

Reads UnicodeData.txt (general category, canonical combining class,
canonical decompositions), PropList.txt (White_Space),
DerivedCoreProperties.txt (Alphabetic, for \\w) and
DerivedNormalizationProps.txt (Full_Composition_Exclusion; its first line
names the Unicode version). Writes two-stage lookup tables: each code point's
block index in stage 1, the block's values in stage 2, identical blocks
shared; the block sizes are those rt/text/ucd.h names (checked at
compile time). Hangul
syllables are left out of the decomposition and composition data: their
(de)composition is arithmetic (rt/text/nfc.c).
"""
import argparse
import os
import re
import sys

NCP = 0x110000
GC_NAMES = ['Cn', 'Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd',
            'Ps', 'Pe', 'Pi', 'Pf', 'Po', 'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf',
            'Cs', 'Co']
PROP_WHITE_SPACE = 0x20
PROP_ALPHABETIC = 0x40
PROP_COMP_SECOND = 0x80  # second code point of some primary composite
HANGUL_S_BASE, HANGUL_S_COUNT = 0xAC00, 11172


def die(msg):
    sys.stderr.write('ucd_gen.py: %s\n' % msg)
    sys.exit(1)


def data_lines(path):
    """(fields, ...) of each non-comment line of a UCD file."""
    with open(path, encoding='utf-8') as f:
        for line in f:
            line = line.split('#', 1)[0].strip()
            if line:
                yield [x.strip() for x in line.split(';')]


def cp_range(field):
    if '..' in field:
        a, b = field.split('..')
        return int(a, 16), int(b, 16)
    return int(field, 16), int(field, 16)


def read_unicode_data(path):
    gc = [0] * NCP
    ccc = [0] * NCP
    decomp = {}
    first = None
    for f in data_lines(path):
        cp = int(f[0], 16)
        name, cat, cls = f[1], f[2], int(f[3])
        if cat not in GC_NAMES:
            die('%s: unknown general category %s' % (path, cat))
        if name.endswith(', First>'):
            first = cp
            continue
        lo = cp
        if name.endswith(', Last>'):
            if first is None:
                die('%s: %s without a First line' % (path, f[0]))
            lo, first = first, None
        for c in range(lo, cp + 1):
            gc[c] = GC_NAMES.index(cat)
            ccc[c] = cls
        if f[5] and not f[5].startswith('<'):
            decomp[cp] = [int(x, 16) for x in f[5].split()]
    return gc, ccc, decomp


def read_property(path, name):
    out = set()
    for f in data_lines(path):
        if len(f) >= 2 and f[1] == name:
            lo, hi = cp_range(f[0])
            out.update(range(lo, hi + 1))
    if not out:
        die('%s: no %s lines' % (path, name))
    return out


def full_decomposition(cp, decomp):
    if cp not in decomp:
        return [cp]
    out = []
    for c in decomp[cp]:
        out.extend(full_decomposition(c, decomp))
    return out


def two_stage(values, shift):
    """(stage1, stage2) for a list of NCP values with blocks of 1 << shift."""
    bs = 1 << shift
    blocks, stage1, stage2 = {}, [], []
    for b in range(0, NCP, bs):
        key = tuple(values[b:b + bs])
        if key not in blocks:
            blocks[key] = len(blocks)
            stage2.extend(key)
        stage1.append(blocks[key])
    if len(blocks) > 65535:
        die('too many distinct blocks')
    return stage1, stage2


def c_array(ctype, name, values, per_line=16, fmt='%d'):
    lines = ['const %s %s[%d] = {' % (ctype, name, len(values))]
    for i in range(0, len(values), per_line):
        lines.append('    ' + ', '.join(fmt % v for v in values[i:i + per_line]) + ',')
    lines.append('};')
    return '\n'.join(lines)


def emit_two_stage(out, name, macro, shift, values, ctype):
    s1, s2 = two_stage(values, shift)
    out.append('/* stage 1 by cp >> %d, stage 2 by block * %d + (cp & %d) */' %
               (shift, 1 << shift, (1 << shift) - 1))
    out.append('_Static_assert(%s == %d, "rt/text/ucd.h and ucd_gen.py disagree");' %
               (macro, shift))
    out.append(c_array('uint16_t', name + '_stage1', s1))
    out.append(c_array(ctype, name + '_stage2', s2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--dir', default='/usr/share/unicode')
    ap.add_argument('-o', dest='out', required=True)
    a = ap.parse_args()
    need = ['UnicodeData.txt', 'PropList.txt', 'DerivedCoreProperties.txt',
            'DerivedNormalizationProps.txt']
    for n in need:
        if not os.path.isfile(os.path.join(a.dir, n)):
            die('%s not found: install unicode-data (apt-get install unicode-data, or '
                '.ci/install-deps.sh)' % os.path.join(a.dir, n))
    path = lambda n: os.path.join(a.dir, n)

    with open(path('DerivedNormalizationProps.txt'), encoding='utf-8') as f:
        m = re.match(r'# DerivedNormalizationProps-(\d+\.\d+\.\d+)\.txt', f.readline())
    if not m:
        die('%s: no version on its first line' % path('DerivedNormalizationProps.txt'))
    version = m.group(1)

    gc, ccc, decomp = read_unicode_data(path('UnicodeData.txt'))
    white = read_property(path('PropList.txt'), 'White_Space')
    alpha = read_property(path('DerivedCoreProperties.txt'), 'Alphabetic')
    excluded = read_property(path('DerivedNormalizationProps.txt'), 'Full_Composition_Exclusion')

    # Primary composites: two-code-point canonical decompositions not excluded.
    pairs = []
    for cp, d in decomp.items():
        if len(d) == 2 and cp not in excluded:
            pairs.append((d[0], d[1], cp))
    pairs.sort()
    seconds = {p[1] for p in pairs}
    # Hangul vowels and trailing consonants compose arithmetically (LV, LVT).
    seconds.update(range(0x1161, 0x1176))
    seconds.update(range(0x11A8, 0x11C3))

    props = [0] * NCP
    for c in range(NCP):
        v = gc[c]
        if c in white:
            v |= PROP_WHITE_SPACE
        if c in alpha:
            v |= PROP_ALPHABETIC
        if c in seconds:
            v |= PROP_COMP_SECOND
        props[c] = v

    # Full canonical decompositions: [length, cp...] runs in one array; index 0
    # is unused so that 0 means "none".
    dseq = [0]
    dindex = [0] * NCP
    maxlen = 0
    for cp in sorted(decomp):
        full = full_decomposition(cp, decomp)
        maxlen = max(maxlen, len(full))
        dindex[cp] = len(dseq)
        dseq.append(len(full))
        dseq.extend(full)
    if len(dseq) >= 65536:
        die('decomposition data too large for 16-bit indices')

    out = ['/* Generated by rt/text/ucd_gen.py from %s (Unicode %s). Do not edit. */' %
           (a.dir, version),
           '#include <stdint.h>', '', '#include "rt/text/ucd.h"', '',
           'const char nib_ucd_version[] = "%s";' % version, '']
    emit_two_stage(out, 'nib_ucd_props', 'NIB_UCD_PROPS_SHIFT', 7, props, 'uint8_t')
    out.append('')
    emit_two_stage(out, 'nib_ucd_ccc', 'NIB_UCD_CCC_SHIFT', 8, ccc, 'uint8_t')
    out.append('')
    emit_two_stage(out, 'nib_ucd_decomp', 'NIB_UCD_DECOMP_SHIFT', 8, dindex, 'uint16_t')
    out.append('')
    out.append('/* Full canonical decompositions: length, then the code points (at most %d). */'
               % maxlen)
    out.append('_Static_assert(NIB_UCD_MAX_DECOMP >= %d, "rt/text/ucd.h: NIB_UCD_MAX_DECOMP");'
               % maxlen)
    out.append(c_array('uint32_t', 'nib_ucd_decomp_seq', dseq, 12, '0x%X'))
    out.append('')
    out.append('/* Primary composites, sorted by (first << 21 | second). */')
    out.append('const unsigned nib_ucd_ncomp = %d;' % len(pairs))
    out.append(c_array('uint64_t', 'nib_ucd_comp_key', [(p[0] << 21) | p[1] for p in pairs], 6,
                       '0x%XULL'))
    out.append(c_array('uint32_t', 'nib_ucd_comp_value', [p[2] for p in pairs], 12, '0x%X'))
    with open(a.out, 'w', encoding='ascii') as f:
        f.write('\n'.join(out) + '\n')


if __name__ == '__main__':
    main()
