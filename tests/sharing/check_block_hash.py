#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Recomputes every line block_hash_vectors prints with an encoder written
from docs/sharing.md and Python's hashlib: two implementations, one answer."""
import hashlib
import struct
import subprocess
import sys


def cbor_head(major, v):
    if v < 24:
        return bytes([major << 5 | v])
    for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if v < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | info]) + struct.pack(fmt, v)
    raise ValueError(v)


def native(tenant, parent, tokens, extra):
    m = b"speckv-block-v1\0" + struct.pack("<Q", tenant)
    m += (b"\1" + parent) if parent is not None else b"\0"
    m += struct.pack("<Q", len(tokens)) + b"".join(struct.pack("<I", t) for t in tokens)
    extra = extra or b""
    m += struct.pack("<Q", len(extra)) + extra
    return hashlib.sha256(m).digest()


def vllm(parent, tokens, extra):
    m = cbor_head(4, 3)
    m += (cbor_head(2, len(parent)) + parent) if parent is not None else b"\xf6"
    m += cbor_head(4, len(tokens)) + b"".join(cbor_head(0, t) for t in tokens)
    m += extra if extra is not None else b"\xf6"
    return hashlib.sha256(m).digest()


def main():
    out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout.splitlines()
    if len(out) != 8:
        print("expected 8 vectors, got", len(out))
        return 1
    bad = 0
    for line in out:
        algo, tenant, parent, tokens, extra, got = line.split()
        parent = None if parent == "-" else bytes.fromhex(parent)
        tokens = [] if tokens == "-" else [int(t) for t in tokens.split(",")]
        extra = None if extra == "-" else bytes.fromhex(extra)
        want = native(int(tenant), parent, tokens, extra) if algo == "0" else vllm(parent, tokens, extra)
        if want.hex() != got:
            print("MISMATCH", line, "python:", want.hex())
            bad += 1
    print(f"{len(out)} block hashes checked against hashlib, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
