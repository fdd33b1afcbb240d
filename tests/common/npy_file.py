"""Version 1 .npy files for the vision tests, with the standard library
alone (nib run and nibhost.py read them; numpy need not be installed)."""
import struct


def npy(descr, dims, data):
    """A version 1 .npy file's bytes (C order)."""
    shape = "(" + "".join("%d, " % d for d in dims).rstrip(" ") + ")"
    head = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    pad = (64 - (10 + len(head) + 1) % 64) % 64
    head = head + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + data


def npy_data(raw):
    """(header text, data bytes) of a version 1 .npy file (nib's writer's),
    or None when raw is not one."""
    if raw[:6] != b"\x93NUMPY" or raw[6] != 1:
        return None
    hlen = struct.unpack_from("<H", raw, 8)[0]
    return raw[10:10 + hlen].decode(), raw[10 + hlen:]
