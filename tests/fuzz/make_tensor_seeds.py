#!/usr/bin/env python3
"""Seeds of the tensor_file fuzz target (fuzz_tensor_file.c): each is one
byte choosing the io record, then a file. Valid files of each format for
the records they match, and a few near misses.

    python3 tests/fuzz/make_tensor_seeds.py tests/fuzz/corpus/tensor_file
"""
import os
import struct
import sys
import zlib


def npy(descr, shape, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ', '.join(map(str, shape)) + (',' if len(shape) == 1 else ''))
    h += ' ' * ((64 - (10 + len(h) + 1) % 64) % 64) + '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + data


def png(w, h, colour_type, channels, depth=8):
    def chunk(kind, body):
        return (struct.pack('>I', len(body)) + kind + body +
                struct.pack('>I', zlib.crc32(kind + body) & 0xffffffff))
    row = bytes((x * 37 + c * 11) & 255 for x in range(w) for c in range(channels * depth // 8))
    raw = b''.join(b'\x00' + row for _ in range(h))
    return (b'\x89PNG\r\n\x1a\n' +
            chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, depth, colour_type, 0, 0, 0)) +
            chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))


V2 = b"{'descr':'<f4','fortran_order':False,'shape':(3,5)}\n\n"


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    px = bytes(range(60))
    seeds = {
        # record 0: u8 1x3x4x5; 1: f32 1x3x4x5; 2: f32 1x1x3x2; 4: f32 3x5; 5: u8 7
        'npy-f32': b'\x04' + npy('<f4', [3, 5], struct.pack('<15f', *range(15))),
        'npy-u8': b'\x05' + npy('|u1', [7], bytes(7)),
        'npy-v2': b'\x04' + b'\x93NUMPY\x02\x00' + struct.pack('<I', len(V2)) + V2 + bytes(60),
        'raw': b'\x05' + bytes(7),
        'ppm': b'\x00' + b'P6\n# c\n5 4\n255\n' + px,
        'ppm-f32-bgr': b'\x11' + b'P6 5 4 255\n' + px,
        'pgm': b'\x02' + b'P5\n2 3\n255\n' + bytes(6),
        'pgm-to-rgb': b'\x01' + b'P5\n5 4\n255\n' + bytes(20),
        'ppm-maxval': b'\x00' + b'P6\n5 4\n65535\n' + px + px,
        'png-rgb': b'\x00' + png(5, 4, 2, 3),
        'png-rgba': b'\x01' + png(5, 4, 6, 4),
        'png-gray': b'\x02' + png(2, 3, 0, 1),
        'png-gray-alpha': b'\x03' + png(3, 2, 4, 2),
        'png-16': b'\x01' + png(5, 4, 2, 3, 16),
        'png-big': b'\x07' + png(64, 48, 2, 3),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)
    print(f'{len(seeds)} seeds in {out}')


if __name__ == '__main__':
    main()
