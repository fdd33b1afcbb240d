#!/usr/bin/env python3
"""Copy a blob with one byte of its last quarter (weights) flipped: its
header stays intact, its CRC32C no longer matches, so the appliance refuses
to boot at step 1."""
import sys

src, dst = sys.argv[1], sys.argv[2]
data = bytearray(open(src, "rb").read())
if len(data) < 4096:
    sys.exit(f"corrupt_blob: {src} is only {len(data)} bytes")
data[len(data) * 3 // 4] ^= 0x5A
open(dst, "wb").write(data)
