#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tools/trace/sweep.py on a small grid: it must print the speed-up table and
# the break-even lines, and write sweep.json (a row per point, every system's
# speed-up > 0, gpu_only's exactly 1) and the SVG plot.
set -eu
PY=$1 SWEEP=$2 SPECKV=$3 TRACE=$4 WORK=$5
rm -rf "$WORK"
mkdir -p "$WORK"
"$PY" "$SWEEP" --speckv "$SPECKV" --trace "$TRACE" --max-requests 20 --devices 1,4 --hbm-kv-gb 20 --out "$WORK" > "$WORK/out.txt"
grep -q "speed-up over gpu_only / over host_offload" "$WORK/out.txt" || { echo "no table"; cat "$WORK/out.txt"; exit 1; }
grep -q "cxl_speckv    over host_offload" "$WORK/out.txt" || { echo "no break-even lines"; cat "$WORK/out.txt"; exit 1; }
grep -q "<polyline" "$WORK/speedup_vs_link.svg" || { echo "no plot"; exit 1; }
"$PY" - "$WORK/sweep.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert len(rows) == 2, rows
assert [r["link_gbps"] for r in rows] == [36.0, 144.0], [r["link_gbps"] for r in rows]
for r in rows:
    assert r["speedup_vs_gpu_only"]["gpu_only"] == 1.0
    assert all(v > 0 for v in r["speedup_vs_gpu_only"].values()), r
    assert all(v > 0 for v in r["tps"].values()), r
assert len(d["break_even"]) == 11, len(d["break_even"])
print("sweep: ok,", len(rows), "points")
PYEOF
