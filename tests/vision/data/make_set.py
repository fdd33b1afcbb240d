#!/usr/bin/python3
"""The rendered text-image test set of the vision accuracy harness.

    /usr/bin/python3 make_set.py OUTDIR [--cls N] [--rec N] [--det N]

Renders, with ImageMagick's `convert` and DejaVu Sans (fonts-dejavu-core),
text lines drawn from the fixed word list below by a fixed generator, so the
same Debian packages give the same pixels:

  cls-NN  48x192 lines for ch_ppocr_mobile_v2.0_cls; every second one turned
          180 degrees (label 1, PaddleOCR's '180');
  rec-NN  48x320 lines for ch_PP-OCRv4_rec (label: the text);
  det-NN  640x640 pages of several lines for ch_PP-OCRv4_det (labels: each
          line's ink box, and a mask: 2 on ink, 1 within 12 px of ink, 0
          elsewhere).

Each image is written as PNG (what `nib run --input` takes) and as the
model's float32 input, preprocessed as PaddleOCR does (docs/vision.md):
channels in BGR order (PaddleOCR reads images with OpenCV), then
cls and rec: (x / 255 - 0.5) / 0.5; det: (x / 255 - mean) / std with
mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225) taken in that
(B, G, R) order, as PaddleOCR's NormalizeImage applies them. manifest.json
lists every item. Needs numpy (Debian's python3-numpy).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf'

WORDS = ('apple river stone light paper green house water small number table window '
         'garden market silver yellow orange purple winter summer spring autumn friend '
         'letter travel ticket office bridge museum doctor camera coffee station flower '
         'planet rocket forest island bottle pencil moment castle dragon engine harbor '
         'jacket kitchen lemon mirror needle ocean pillow rabbit saddle tiger violin '
         'wagon basket candle dinner Monday Friday London Paris Berlin Tokyo Quick Brown '
         'Zero North South East West Model Input Output Total Price Order').split()

# (foreground, background) colours: mostly dark on light, a few inverted.
COLOURS = [('black', 'white'), ('black', 'white'), ('#202020', '#f4f4f4'),
           ('navy', '#fff8dc'), ('#5a1010', '#eaeaea'), ('white', '#303030'),
           ('darkgreen', 'white'), ('black', '#dcdcff')]

DET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
DET_STD = np.array([0.229, 0.224, 0.225], np.float32)


class Lcg:
    """A fixed 64-bit LCG: the set must not depend on Python's random."""

    def __init__(self, seed):
        self.s = seed & (2**64 - 1)

    def below(self, n):
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
        return (self.s >> 33) % n


def line_text(rng, max_chars):
    words = []
    while True:
        w = WORDS[rng.below(len(WORDS))] if rng.below(5) else str(rng.below(1000))
        cand = ' '.join(words + [w])
        if len(cand) > max_chars:
            break
        words.append(w)
        if len(words) >= 1 + rng.below(3) + 1:
            break
    return ' '.join(words) if words else WORDS[0]


def read_ppm(path):
    with open(path, 'rb') as f:
        data = f.read()
    fields, pos = [], 0
    while len(fields) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        start = pos
        while not data[pos:pos + 1].isspace():
            pos += 1
        fields.append(data[start:pos])
    if fields[0] != b'P6' or fields[3] != b'255':
        raise SystemExit(f'make_set: {path}: convert did not write an 8-bit P6')
    w, h = int(fields[1]), int(fields[2])
    return np.frombuffer(data[pos + 1:], np.uint8).reshape(h, w, 3)


def render(out, stem, w, h, draws, rotate=False):
    """draws: (text, x, y, pointsize, fg) on a background given first."""
    bg, items = draws
    cmd = ['convert', '-size', f'{w}x{h}', f'xc:{bg}', '-font', FONT]
    for text, x, y, size, fg in items:
        cmd += ['-pointsize', str(size), '-fill', fg, '-annotate', f'+{x}+{y}', text]
    if rotate:
        cmd += ['-rotate', '180']
    png, ppm = os.path.join(out, stem + '.png'), os.path.join(out, stem + '.ppm')
    cmd += ['-write', 'PNG24:' + png, ppm]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f'make_set: convert failed ({r.returncode}): {r.stderr.strip()}')
    img = read_ppm(ppm)
    os.unlink(ppm)
    if img.shape != (h, w, 3):
        raise SystemExit(f'make_set: {stem}: convert made {img.shape}, not {(h, w, 3)}')
    return img


def ink_of(img):
    """Pixels far from the background (the image's most common colour)."""
    colours, counts = np.unique(img.reshape(-1, 3), axis=0, return_counts=True)
    bg = colours[counts.argmax()].astype(np.int16)
    return np.abs(img.astype(np.int16) - bg).max(axis=2) > 48


def to_input(img, kind):
    x = img[:, :, ::-1].astype(np.float32) / 255.0  # RGB -> BGR, as cv2.imread gives
    x = (x - DET_MEAN) / DET_STD if kind == 'det' else (x - 0.5) / 0.5
    return np.ascontiguousarray(x.transpose(2, 0, 1)[None]).astype(np.float32)


def line_item(out, rng, kind, k, w, h, size, max_chars, rotate):
    """One line, retried shorter until its ink stays off the last 4 columns."""
    fg, bg = COLOURS[rng.below(len(COLOURS))]
    text = line_text(rng, max_chars)
    while True:
        stem = f'{kind}-{k:02d}'
        # -annotate's y is the baseline from the top: centre a cap height of ~0.73 em.
        y = (h + int(size * 0.73)) // 2
        img = render(out, stem, w, h, (bg, [(text, 6, y, size, fg)]), rotate)
        ink = ink_of(img)
        if not ink[:, -4:].any() and not ink[:, :2].any() or ' ' not in text:
            break
        text = text.rsplit(' ', 1)[0]
    np.save(os.path.join(out, stem + '.npy'), to_input(img, kind))
    return {'model': kind, 'id': stem, 'image': stem + '.png', 'input': stem + '.npy',
            'dims': [1, 3, h, w], 'text': text, 'rotated': int(rotate)}


def page_item(out, rng, k):
    w = h = 640
    fg, bg = COLOURS[rng.below(len(COLOURS))]
    items, y = [], 40
    while True:
        size = 18 + rng.below(20)
        y += int(size * 1.1) + 8 + rng.below(40)
        if y > h - 20:
            break
        x = 10 + rng.below(200)
        text = line_text(rng, max(4, int((w - x - 20) / (size * 0.62))))
        items.append((text, x, y, size, fg))
    stem = f'det-{k:02d}'
    img = render(out, stem, w, h, (bg, items))
    ink = ink_of(img)
    near = ink.copy()  # ink dilated by 12 px (a square), by shifted ORs
    for _ in range(12):
        grown = near.copy()
        grown[1:] |= near[:-1]
        grown[:-1] |= near[1:]
        grown[:, 1:] |= near[:, :-1]
        grown[:, :-1] |= near[:, 1:]
        near = grown
    mask = np.where(ink, 2, np.where(near, 1, 0)).astype(np.uint8)[None, None]
    boxes = []  # each line's ink box [x0, y0, x1, y1), in its band of rows around the baseline
    for text, x, y, size, _ in items:
        band = np.zeros_like(ink)
        band[max(0, y - int(0.95 * size)):y + int(0.3 * size)] = True
        ys, xs = np.nonzero(ink & band)
        boxes.append([int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1])
    np.save(os.path.join(out, stem + '-mask.npy'), mask)
    np.save(os.path.join(out, stem + '.npy'), to_input(img, 'det'))
    return {'model': 'det', 'id': stem, 'image': stem + '.png', 'input': stem + '.npy',
            'dims': [1, 3, h, w], 'mask': stem + '-mask.npy', 'lines': [t[0] for t in items], 'boxes': boxes}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('out')
    ap.add_argument('--cls', type=int, default=16)
    ap.add_argument('--rec', type=int, default=12)
    ap.add_argument('--det', type=int, default=2)
    # Another seed renders other lines and pages: a calibration set that
    # never holds the evaluated images (the default set is seed 15).
    ap.add_argument('--seed', type=int, default=15)
    a = ap.parse_args()
    if not os.path.isfile(FONT):
        print(f'make_set: {FONT} not found (Debian package fonts-dejavu-core)', file=sys.stderr)
        return 3
    os.makedirs(a.out, exist_ok=True)
    items = []
    rng = Lcg(a.seed)
    for k in range(a.cls):
        items.append(line_item(a.out, rng, 'cls', k, 192, 48, 24 + rng.below(5), 14, k % 2 == 1))
    for k in range(a.rec):
        items.append(line_item(a.out, rng, 'rec', k, 320, 48, 24 + rng.below(6), 22, False))
    for k in range(a.det):
        items.append(page_item(a.out, rng, k))
    with open(os.path.join(a.out, 'manifest.json'), 'w') as f:
        json.dump({'font': FONT, 'items': items}, f, indent=1)
    print(f'make_set: {len(items)} images in {a.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
