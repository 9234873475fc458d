#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Architecture guard (docs/architecture.md "Sizes"): no source file in lib/ over
# 800 lines, and Pool's header plus pool.cc within 600. Prints the offenders.
#   tools/check_sizes.py REPO_ROOT
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
bad = []
for f in sorted((root / "lib").rglob("*")):
    if f.suffix in (".cc", ".h", ".c") and f.is_file():
        n = sum(1 for _ in f.open(encoding="utf-8", errors="replace"))
        if n > 800:
            bad.append(f"{f.relative_to(root)}: {n} lines (limit 800)")
pool = sum(sum(1 for _ in (root / "lib/pool" / n).open()) for n in ("pool.h", "pool.cc"))
if pool > 600:
    bad.append(f"lib/pool/pool.h + pool.cc: {pool} lines (limit 600)")
for b in bad:
    print(b)
print(f"{'FAIL' if bad else 'ok'}: lib/ sizes (pool.h + pool.cc {pool} lines)")
sys.exit(1 if bad else 0)
