#!/usr/bin/python3
"""nibhost.py's picture reader (PPM/PGM and PNG, standard library only)
against nib's own (tools/util/tensor_file, libpng), on files ImageMagick
writes: for every file both take, the input bytes nibhost.py would send
(f32 and u8, RGB and BGR planes, gray into three planes) equal tensor_dump's
byte for byte. The files nibhost.py refuses by design (transparency,
16 bits, interlacing, a gamma other than sRGB's) are refused with a message
saying why; a wrong size or a colour picture for a gray input likewise.
Then random mutations of valid files (CRCs fixed up for half of them):
nibhost.py raises only NibError, and whenever it accepts a file that
tensor_dump also accepts, the bytes are equal.

    /usr/bin/python3 test_nibhost_image.py TENSOR_DUMP NIBHOST_DIR
Exit 77 (skip, saying why) without ImageMagick's convert.
"""
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

W, H = 37, 23


def npy_data(path):
    raw = open(path, 'rb').read()
    n = struct.unpack_from('<H', raw, 8)[0]
    return raw[10 + n:]


def c_load(dump, path, d, dtype, c, bgr):
    out = os.path.join(d, 'c.npy')
    args = [dump, path, out, dtype, str(c), str(H), str(W)] + (['bgr'] if bgr else [])
    r = subprocess.run(args, capture_output=True, text=True)
    return npy_data(out) if r.returncode == 0 else None


def make_sources(d, rng):
    """A colour and a gray picture with smooth areas, edges and noise."""
    rgb = bytearray()
    for y in range(H):
        for x in range(W):
            edge = 200 if (x // 6 + y // 5) % 2 else 30
            rgb += bytes(((x * 7 + rng.randrange(8)) & 255, (y * 11) & 255, edge))
    gray = bytes(rgb[i] // 2 + rgb[i + 2] // 2 for i in range(0, len(rgb), 3))
    with open(os.path.join(d, 'src.ppm'), 'wb') as f:
        f.write(b'P6\n# a comment\n%d %d\n255\n' % (W, H) + bytes(rgb))
    with open(os.path.join(d, 'src.pgm'), 'wb') as f:
        f.write(b'P5 %d\t%d 255\n' % (W, H) + gray)


def png_chunk(typ, data):
    return struct.pack('>I', len(data)) + typ + data + struct.pack('>I', zlib.crc32(typ + data))


def palette_trns_png(d):
    """A 4-colour palette PNG whose first entry is transparent (tRNS)."""
    rows = b''.join(b'\0' + bytes((x + y) % 4 for x in range(W)) for y in range(H))
    raw = (b'\x89PNG\r\n\x1a\n' + png_chunk(b'IHDR', struct.pack('>IIBBBBB', W, H, 8, 3, 0, 0, 0)) +
           png_chunk(b'PLTE', bytes(range(12))) + png_chunk(b'tRNS', b'\0') +
           png_chunk(b'IDAT', zlib.compress(rows)) + png_chunk(b'IEND', b''))
    path = os.path.join(d, 'trns.png')
    open(path, 'wb').write(raw)
    return path


def convert(d, name, *args):
    """convert ARGS... FMT:d/name, the last arg being the output format prefix."""
    path = os.path.join(d, name)
    subprocess.run(['convert'] + list(args[:-1]) + [args[-1] + path], check=True,
                   capture_output=True)
    return path


def main():
    dump, hostdir = sys.argv[1], sys.argv[2]
    if not shutil.which('convert'):
        print('SKIP: ImageMagick convert not found (Debian package imagemagick)')
        return 77
    sys.path.insert(0, hostdir)
    import nibhost
    rng = random.Random(7)
    failed = 0

    def check(cond, what):
        nonlocal failed
        print(('ok   ' if cond else 'FAIL ') + what)
        failed += 0 if cond else 1

    with tempfile.TemporaryDirectory() as d:
        make_sources(d, rng)
        ppm, pgm = os.path.join(d, 'src.ppm'), os.path.join(d, 'src.pgm')
        good = {'ppm': ppm, 'pgm': pgm,
                'rgb8': convert(d, 'rgb8.png', ppm, 'PNG24:'),
                'palette': convert(d, 'pal.png', ppm, '-colors', '13', 'PNG8:'),
                'gray8': convert(d, 'gray8.png', pgm, '-depth', '8', '-define',
                                 'png:color-type=0', 'PNG:'),
                'gray1': convert(d, 'gray1.png', pgm, '-threshold', '50%', '-depth', '1',
                                 '-define', 'png:color-type=0', '-define', 'png:bit-depth=1',
                                 'PNG:'),
                'gray4': convert(d, 'gray4.png', pgm, '-depth', '4', '-define',
                                 'png:color-type=0', '-define', 'png:bit-depth=4', 'PNG:'),
                'rgba-opaque': convert(d, 'rgba.png', ppm, '-alpha', 'opaque', 'PNG32:')}
        for q in range(0, 6):  # the ones digit of -quality: PNG filter 0..4, 5 adaptive
            good['filter%d' % q] = convert(d, 'f%d.png' % q, ppm, '-quality', '9%d' % q, 'PNG24:')
        for name, path in good.items():
            raw = open(path, 'rb').read()
            colour = name not in ('pgm', 'gray8', 'gray1', 'gray4')
            for dtype in ('f32', 'u8'):
                for c, bgr in ((3, False), (3, True), (1, False)):
                    t = {'name': 'x', 'dtype': dtype, 'dims': [1, c, H, W]}
                    want = c_load(dump, path, d, dtype, c, bgr)
                    try:
                        got = nibhost.image_input(raw, t, bgr)
                    except nibhost.NibError as e:
                        got = 'refused: %s' % e
                    what = '%s as %s C=%d%s' % (name, dtype, c, ' bgr' if bgr else '')
                    if colour and c == 1:
                        check(want is None and isinstance(got, str) and 'colour image' in got,
                              what + ': a colour picture for a gray input refused by both')
                    else:
                        check(want is not None and got == want,
                              what + ': nibhost.py equals nib\'s reader byte for byte')
        refused = {
            'transparent': (convert(d, 'trans.png', ppm, '-alpha', 'set', '-channel', 'A',
                                    '-evaluate', 'set', '50%', '+channel', 'PNG32:'),
                            'transparent'),
            'trns': (palette_trns_png(d), 'tRNS'),
            '16-bit': (convert(d, 'rgb16.png', ppm, 'PNG48:'), '16-bit'),
            'interlaced': (convert(d, 'inter.png', ppm, '-interlace', 'PNG', 'PNG24:'),
                           'interlaced'),
            'gamma': (convert(d, 'gamma.png', ppm, '-set', 'gamma', '0.8', 'PNG24:'), 'gamma'),
        }
        for name, (path, word) in refused.items():
            t = {'name': 'x', 'dtype': 'f32', 'dims': [1, 3, H, W]}
            try:
                nibhost.image_input(open(path, 'rb').read(), t)
                msg = None
            except nibhost.NibError as e:
                msg = str(e)
            check(msg is not None and word in msg, '%s PNG refused: %s' % (name, msg))
            c_reads = c_load(dump, path, d, 'f32', 3, False) is not None
            if name == '16-bit':  # neither reader takes 16 bits
                check(not c_reads, '16-bit PNG: nib run refuses it too')
            else:
                check(c_reads, '%s PNG: nib run reads it (the refusal points there)' % name)
        for name in ('rgb8', 'ppm'):
            t = {'name': 'x', 'dtype': 'f32', 'dims': [1, 3, H + 1, W]}
            try:
                nibhost.image_input(open(good[name], 'rb').read(), t)
                msg = None
            except nibhost.NibError as e:
                msg = str(e)
            check(msg is not None and 'wants exactly %dx%d' % (W, H + 1) in msg,
                  '%s of the wrong size refused: %s' % (name, msg))
        t = {'name': 'x', 'dtype': 'f32', 'dims': [1, 3 * H * W]}
        try:
            nibhost.image_input(open(ppm, 'rb').read(), t)
            msg = None
        except nibhost.NibError as e:
            msg = str(e)
        check(msg is not None and 'not an image' in msg, 'a picture for a non-image input refused')

        # mutations: only NibError, and equal bytes whenever both readers take a file
        bad_exc, both, n = 0, 0, 1500
        for i in range(n):
            name = rng.choice(sorted(good))
            raw = bytearray(open(good[name], 'rb').read())
            for _ in range(rng.randrange(1, 4)):
                k = rng.randrange(len(raw))
                raw[k] = rng.randrange(256) if rng.randrange(2) else raw[k] ^ (1 << rng.randrange(8))
            if rng.randrange(3) == 0:
                raw = raw[:rng.randrange(len(raw))]
            if raw[:8] == nibhost.PNG_SIGNATURE and i % 2 == 0:  # fix CRCs: reach the decoder
                pos = 8
                while pos + 12 <= len(raw):
                    ln = struct.unpack_from('>I', raw, pos)[0]
                    if pos + 12 + ln > len(raw):
                        break
                    struct.pack_into('>I', raw, pos + 8 + ln,
                                     zlib.crc32(bytes(raw[pos + 4:pos + 8 + ln])))
                    pos += 12 + ln
            t = {'name': 'x', 'dtype': 'u8', 'dims': [1, 3, H, W]}
            try:
                got = nibhost.image_input(bytes(raw), t)
            except nibhost.NibError:
                continue
            except Exception as e:  # anything else is a reader bug
                bad_exc += 1
                print('mutation %d of %s: %r' % (i, name, e))
                continue
            path = os.path.join(d, 'mut.bin')
            open(path, 'wb').write(raw)
            want = c_load(dump, path, d, 'u8', 3, False)
            if want is not None:
                both += 1
                if want != got:
                    bad_exc += 1
                    print('mutation %d of %s: accepted by both, different bytes' % (i, name))
        check(bad_exc == 0, '%d mutations: only NibError, equal bytes on the %d both accept' %
              (n, both))
    print('%d failed' % failed)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
