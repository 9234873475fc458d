#!/usr/bin/env python3
"""The cross-language scenario (cross_lang.sh), Python's turn:
    scenario.py POOL_PATH HANDLES_FILE SEED
Same steps as scenario.c; needs bindings/python on PYTHONPATH."""
import sys

import speckv

LANG = "python"
SIZES = (1000, 5000, 9000)


def pattern(seed, index, n):
    return bytes((seed * 31 + index * 17 + j * 7 + (j >> 8)) & 0xFF for j in range(n))


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
    if len(sys.argv) != 4:
        print("usage: scenario.py POOL_PATH HANDLES_FILE SEED", file=sys.stderr)
        return 2
    path, listing, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
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

    with open(listing, "a") as f:
        for i, h in enumerate(handles):
            f.write("%s %d %#018x %d %d %s\n" % (LANG, i, h, SIZES[i], seed, "freed" if i == 1 else "live"))
    print("%s scenario: ok (verified %d blocks of earlier languages)" % (LANG, checked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
