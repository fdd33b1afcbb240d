#!/usr/bin/python3
"""The rendered test set through tools/util/tensor_file: each PNG that
make_set.py writes, loaded by nib's reader (tensor_dump) as f32 BGR planes
and normalised as PaddleOCR does, equals the .npy input make_set.py made
from the same pixels with numpy; loaded as u8, it equals the f32 load
x 255; loaded for another model's size, it is refused naming that size.

    /usr/bin/python3 test_tensor_set.py TENSOR_DUMP
Exit 77 (skip, saying why) without numpy, ImageMagick or the DejaVu font.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf'


def main():
    dump = sys.argv[1]
    try:
        import numpy as np
    except ImportError:
        print('SKIP: numpy not importable (Debian package python3-numpy)')
        return 77
    if not shutil.which('convert'):
        print('SKIP: ImageMagick convert not found (Debian package imagemagick)')
        return 77
    if not os.path.isfile(FONT):
        print(f'SKIP: {FONT} not found (Debian package fonts-dejavu-core)')
        return 77
    mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
    std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, os.path.join(HERE, 'data', 'make_set.py'), d,
                        '--cls', '2', '--rec', '2', '--det', '1'], check=True)
        items = json.load(open(os.path.join(d, 'manifest.json')))['items']
        for it in items:
            _, c, h, w = it['dims']
            png, out = os.path.join(d, it['image']), os.path.join(d, 'x.npy')
            r = subprocess.run([dump, png, out, 'f32', str(c), str(h), str(w), 'bgr'],
                               capture_output=True, text=True)
            if r.returncode:
                print(f'FAIL {it["id"]}: tensor_dump exited {r.returncode}: {r.stderr}')
                failed += 1
                continue
            x = np.load(out)[0]
            y = (x - mean) / std if it['model'] == 'det' else (x - 0.5) / 0.5
            want = np.load(os.path.join(d, it['input']))[0]
            diff = float(np.abs(y - want).max())
            ok = x.shape == (c, h, w) and diff <= 1e-5 and float(x.max()) <= 1.0
            print(f'{"ok  " if ok else "FAIL"} {it["id"]}: PNG through tensor_file, normalised, '
                  f'max|diff| {diff:.2e} against make_set.py\'s input')
            failed += not ok
            r = subprocess.run([dump, png, out, 'u8', str(c), str(h), str(w)],
                               capture_output=True, text=True)
            u = np.load(out)[0] if r.returncode == 0 else None
            ok = u is not None and u.dtype == np.uint8 and np.array_equal(
                u.astype(np.float32), np.round(x[::-1] * 255))
            print(f'{"ok  " if ok else "FAIL"} {it["id"]}: as u8 (RGB) the same pixels')
            failed += not ok
        cls = next(it for it in items if it['model'] == 'cls')
        r = subprocess.run([dump, os.path.join(d, cls['image']), os.path.join(d, 'x.npy'), 'f32',
                            '3', '48', '320'], capture_output=True, text=True)
        ok = r.returncode == 1 and 'wants exactly 320x48' in r.stderr and cls['image'] in r.stderr
        print(f'{"ok  " if ok else "FAIL"} a 192x48 line for a 320x48 input is refused: '
              f'{r.stderr.strip()}')
        failed += not ok
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
