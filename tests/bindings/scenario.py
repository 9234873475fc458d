#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The cross-language scenario (cross_lang.sh), Python's turn:
    scenario.py POOL_PATH HANDLES_FILE SEED SHARED_FILE
Same steps as scenario.c, sharing part included; needs bindings/python on
PYTHONPATH. Python also recomputes every block hash with hashlib (an encoder
written from docs/sharing.md), so the languages agree with each other and
with the documented encoding."""
import hashlib
import struct
import sys

import speckv

LANG = "python"
SIZES = (1000, 5000, 9000)


def pattern(seed, index, n):
    return bytes((seed * 31 + index * 17 + j * 7 + (j >> 8)) & 0xFF for j in range(n))


# The sharing part's inputs, the same in every language.
TENANT = 7
WIDE = (0, 23, 24, 255, 256, 65535, 65536, 4294967295)
TOKENS = [(i * 2654435761) % 128256 if i < 56 else WIDE[i - 56] for i in range(64)]
EXTRA_NATIVE = b"speckv-test-model"
EXTRA_CBOR = bytes([0x82, 0x66]) + b"lora-7" + bytes([0x03])  # ["lora-7", 3]
SHARED_BYTES = 3000


def cbor_head(major, v):
    if v < 24:
        return bytes([major << 5 | v])
    for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if v < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | info]) + struct.pack(fmt, v)
    raise ValueError(v)


def reference_hash(algo, tenant, parent, tokens, extra):
    if algo == speckv.HASH_NATIVE:
        m = b"speckv-block-v1\0" + struct.pack("<Q", tenant)
        m += (b"\1" + parent) if parent is not None else b"\0"
        m += struct.pack("<Q", len(tokens)) + b"".join(struct.pack("<I", t) for t in tokens)
        e = extra or b""
        return hashlib.sha256(m + struct.pack("<Q", len(e)) + e).digest()
    m = cbor_head(4, 3) + ((cbor_head(2, len(parent)) + parent) if parent is not None else b"\xf6")
    m += cbor_head(4, len(tokens)) + b"".join(cbor_head(0, t) for t in tokens)
    return hashlib.sha256(m + (extra if extra is not None else b"\xf6")).digest()


def chains():
    """chains[algo][with_extra][block], printed as "hash ALGO EXTRA BLOCK HEX"."""
    out = []
    for a, algo in enumerate((speckv.HASH_NATIVE, speckv.HASH_VLLM_CBOR)):
        per = []
        for x in (0, 1):
            extra = None if not x else EXTRA_NATIVE if algo == speckv.HASH_NATIVE else EXTRA_CBOR
            parent, chain = None, []
            for b in range(4):
                block = TOKENS[16 * b:16 * b + 16]
                h = speckv.block_hash(block, parent, extra=extra, algo=algo, tenant=TENANT)
                if h != reference_hash(algo, TENANT, parent, block, extra):
                    fail("hash %d %d %d: %s differs from the hashlib encoding" % (a, x, b, h.hex()))
                print("hash %d %d %d %s" % (a, x, b, h.hex()))
                chain.append(h)
                parent = h
            per.append(chain)
        out.append(per)
    return out


def publish_new(pool, hash_, seed, index):
    """Allocs, fills and publishes a block: (handle, Published)."""
    h = pool.alloc(SHARED_BYTES, speckv.FP16, speckv.Hint(tenant=TENANT, token_count=16, content_hash=hash_))
    pool.write(h, 0, pattern(seed, index, SHARED_BYTES))
    return h, pool.publish(h, hash_)


def sharing(pool, seed, shared):
    """Returns the lines to append to the shared file."""
    c = chains()
    published, first = 0, None
    try:
        with open(shared) as f:
            for line in f:
                w = line.split()
                if not w:
                    continue
                who, index, hash_, handle, nbytes, s = w[0], int(w[1]), bytes.fromhex(w[2]), int(w[3], 0), \
                    int(w[4]), int(w[5])
                got = pool.lookup(TENANT, hash_)
                if got != handle:
                    fail("lookup of %s's block %d gave %r, want %#x" % (who, index, got, handle))
                verify(pool, who, index, handle, nbytes, s, True)
                if pool.lookup(TENANT + 1, hash_) is not None:
                    fail("tenant %d found %s's block" % (TENANT + 1, who))
                pool.free(handle)  # the lookup's reference
                if index == 4:
                    first = (handle, s)
                published += 1
    except FileNotFoundError:
        pass
    out = []
    mine = c[0][1][(seed + 3) % 4]  # a hash no other language uses
    h, r = publish_new(pool, mine, seed, 3)
    if r != (h, False):
        fail("publish under a fresh hash gave %r" % (r,))
    if pool.lookup(TENANT, mine) != h:
        fail("our own published block is not found")
    pool.free(h)
    out.append("%s 3 %s %#018x %d %d" % (LANG, mine.hex(), h, SHARED_BYTES, seed))
    published += 1
    common = c[1][0][3]  # the block every language computes: the first publisher wins
    h, r = publish_new(pool, common, seed, 4)
    if first is None:
        if r != (h, False):
            fail("publish of the common block gave %r" % (r,))
        out.append("%s 4 %s %#018x %d %d" % (LANG, common.hex(), h, SHARED_BYTES, seed))
        published += 1
    else:
        if r != (first[0], True):
            fail("the common block is %r, not the first publisher's %#x" % (r, first[0]))
        pool.free(h)  # our unpublished copy
        verify(pool, "first publisher's", 4, first[0], SHARED_BYTES, first[1], True)
        pool.free(first[0])
    st = pool.stats()
    if (st["blocks_published"], st["shared_bytes"]) != (published, published * SHARED_BYTES) \
            or st["lookup_hits"] < 1:
        fail("unexpected sharing stats %r (%d published)" % (st, published))
    return out


def fail(msg):
    print("%s scenario: FAIL: %s" % (LANG, msg), file=sys.stderr)
    sys.exit(1)


def verify(pool, who, index, h, nbytes, seed, live):
    buf = bytearray(nbytes)
    try:
        pool.access(h, 0, buf)
    except speckv.BadHandleError:
        if live:
            fail("%s block %d (%#x) is gone" % (who, index, h))
        return
    if not live:
        fail("freed %s block %d (%#x) is still readable" % (who, index, h))
    if bytes(buf) != pattern(seed, index, nbytes):
        fail("%s block %d (%#x) holds the wrong bytes" % (who, index, h))


def main():
    if len(sys.argv) != 5:
        print("usage: scenario.py POOL_PATH HANDLES_FILE SEED SHARED_FILE", file=sys.stderr)
        return 2
    path, listing, seed, shared = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    uri = "file:%s?size=16M" % path
    pool = speckv.Pool(uri)
    checked = 0
    try:
        with open(listing) as f:
            for line in f:
                w = line.split()
                if w:
                    verify(pool, w[0], int(w[1]), int(w[2], 0), int(w[3]), int(w[4]), w[5] == "live")
                    checked += 1
    except FileNotFoundError:
        pass

    handles = []
    for i, n in enumerate(SIZES):
        h = pool.alloc(n, speckv.FP16, speckv.Hint(tenant=7, request=seed, layer=i, token_pos=i * 16, token_count=16))
        pool.write(h, 0, pattern(seed, i, n))
        handles.append(h)
    pool.prefetch(speckv.Hint(tenant=7, request=seed, layer=0, token_pos=0, token_count=16))
    for i, h in enumerate(handles):
        verify(pool, LANG, i, h, SIZES[i], seed, True)
    st = pool.stats()
    if (st["allocs"], st["frees"], st["prefetch_hints"], st["bytes_written"]) != (3, 0, 1, sum(SIZES)) \
            or st["blocks_live"] < 3:
        fail("unexpected stats %r" % st)
    pool.free(handles[1])
    try:
        pool.free(handles[1])
        fail("a double free was not refused")
    except speckv.BadHandleError:
        pass
    if pool.stats()["frees"] != 1:
        fail("stats.frees is not 1")
    pool.close()

    with speckv.Pool(uri) as pool:
        for i, h in enumerate(handles):
            verify(pool, LANG, i, h, SIZES[i], seed, i != 1)
        shared_lines = sharing(pool, seed, shared)

    with open(listing, "a") as f:
        for i, h in enumerate(handles):
            f.write("%s %d %#018x %d %d %s\n" % (LANG, i, h, SIZES[i], seed, "freed" if i == 1 else "live"))
    with open(shared, "a") as f:
        for line in shared_lines:
            f.write(line + "\n")
    print("%s scenario: ok (verified %d blocks of earlier languages)" % (LANG, checked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
