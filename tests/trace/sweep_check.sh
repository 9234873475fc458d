#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tools/trace/sweep.py on a small grid: it must print the speed-up table and
# the break-even lines, and write sweep.json (a row per point, every system's
# speed-up > 0, gpu_only's exactly 1) and the SVG plot; --vary adds one-factor
# rows (a replay option, and a generated context trace) and their plot, and a
# malformed --vary is refused.
set -eu
PY=$1 SWEEP=$2 SPECKV=$3 TRACE=$4 WORK=$5
rm -rf "$WORK"
mkdir -p "$WORK"
"$PY" "$SWEEP" --speckv "$SPECKV" --trace "$TRACE" --max-requests 20 --devices 1,4 --hbm-kv-gb 20 \
    --vary link-latency-ns=250,20000 --vary context=2048 --context-requests 3 --out "$WORK" > "$WORK/out.txt"
if "$PY" "$SWEEP" --speckv "$SPECKV" --trace "$TRACE" --vary time-scale --out "$WORK/bad" 2> "$WORK/bad.txt"; then
    echo "--vary without values was accepted"; exit 1
fi
grep -q "AXIS=V1,V2" "$WORK/bad.txt" || { echo "no usage message for a bad --vary"; cat "$WORK/bad.txt"; exit 1; }
grep -q "speed-up over gpu_only / over host_offload" "$WORK/out.txt" || { echo "no table"; cat "$WORK/out.txt"; exit 1; }
grep -q "cxl_speckv    over host_offload" "$WORK/out.txt" || { echo "no break-even lines"; cat "$WORK/out.txt"; exit 1; }
grep -q "<polyline" "$WORK/speedup_vs_link.svg" || { echo "no plot"; exit 1; }
grep -q "against context" "$WORK/speedup_vs_factors.svg" || { echo "no factor plot"; exit 1; }
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
v = d["vary"]["rows"]
assert [(r["axis"], r["value"]) for r in v] == [("link-latency-ns", "250"), ("link-latency-ns", "20000"), ("context", "2048")], v
for r in v:
    assert "error" not in r, r
    assert r["speedup_vs_gpu_only"]["gpu_only"] == 1.0, r
    assert all(x > 0 for x in r["tps"].values()), r
assert v[2]["requests"] == 3, v[2]  # the generated context trace, not --trace
print("sweep: ok,", len(rows), "points")
PYEOF
