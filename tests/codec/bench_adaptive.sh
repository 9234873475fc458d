#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# bench_adaptive.sh SPECKV MODEL: `speckv codec bench --mode adaptive` with the
# fast set (the default) and the KL budget (the default) picks only fast
# presets, within the budget on its calibration text, and reports them; the
# attention-error budget does the same within --max-attn-err, and a tighter
# bound codes less; the dense set picks none of them; a set that is neither, or a text with no
# held-out window for the calibration, is refused (exit 2).
set -u -o pipefail
bin=$1 model=$2
[ -f "$model" ] || { echo "FAIL: model $model not found (the repository's data/, or SPECKV_DATA_DIR=DIR)"; exit 1; }
run() { "$bin" codec bench --model "$model" --mode adaptive --windows 1 --repeats 1 --json --no-progress "$@"; }
fast=$(run --max-kl 0.002) || { echo "FAIL: fast run exited $?"; exit 1; }
dense=$(run --adaptive-set dense --adaptive-budget rms) || { echo "FAIL: dense run exited $?"; exit 1; }
attn=$(run --adaptive-budget attn --max-attn-err 0.04) || { echo "FAIL: attn run exited $?"; exit 1; }
tight=$(run --adaptive-budget attn --max-attn-err 0.015) || { echo "FAIL: tight attn run exited $?"; exit 1; }
"$bin" codec bench --model "$model" --mode adaptive --adaptive-set rice --json >/dev/null 2>&1
rc=$?
[ $rc = 2 ] || { echo "FAIL: --adaptive-set rice exited $rc, not 2"; exit 1; }
# No held-out window left after the evaluated ones: refused, saying why.
err=$("$bin" codec bench --model "$model" --mode adaptive --windows 100000 --json 2>/dev/null)
rc=$?
[ $rc = 2 ] && grep -q 'held-out' <<<"$err" || { echo "FAIL: no held-out text: exit $rc, $err"; exit 1; }
python3 - "$fast" "$dense" "$attn" "$tight" <<'PY'
import json, sys
fast, dense, attn, tight = (json.loads(a) for a in sys.argv[1:5])
FK, FV = {"int8", "k3p", "k4p", "k5p"}, {"int8", "v3p", "v4p", "v5p"}
bad = []
p = fast["adaptive_policy"]
print("fast:", p, "ratio", fast["ratio"], "quality", fast["quality"])
if p["set"] != "fast" or p["budget"] != "kl" or p["calibration"] != "held-out": bad.append("fast: set/budget/calibration")
if not all(m in FK | {"raw"} for m in p["k"]) or not all(m in FV | {"raw"} for m in p["v"]):
    bad.append("fast: a preset outside the fast set")
if not any(m != "raw" for m in p["k"] + p["v"]): bad.append("fast: nothing coded")
if not (p["calibration_kl"] <= p["max_kl"] == 0.002): bad.append("fast: calibration KL over budget")
if fast["mode"] != "adaptive" or not fast["ratio"] > 1.5 or fast["quality"]["policy"] != "sealed":
    bad.append("fast: the adaptive row")
if fast["decode_gbps"] <= 0 or fast["quality"]["kl"] is None or fast["quality_all"]["kl"] is None:
    bad.append("fast: speed or quality missing")
a, t = attn["adaptive_policy"], tight["adaptive_policy"]
print("attn:", a, "ratio", attn["ratio"], "| tight:", t["k"], t["v"], "ratio", tight["ratio"])
if a["budget"] != "attn" or a["max_kl"] is not None or a["max_attn_err"] != 0.04: bad.append("attn: budget fields")
if not (0 < a["calibration_attn_err"] <= 0.04): bad.append("attn: calibration error over its bound")
if not (t["calibration_attn_err"] <= 0.015): bad.append("attn: tight calibration error over its bound")
if not any(m != "raw" for m in a["k"] + a["v"]): bad.append("attn: nothing coded")
if not all(m in FK | {"raw"} for m in a["k"]) or not all(m in FV | {"raw"} for m in a["v"]):
    bad.append("attn: a preset outside the fast set")
if not tight["ratio"] < attn["ratio"]: bad.append("attn: a tighter bound did not code less")
d = dense["adaptive_policy"]
print("dense:", d, "ratio", dense["ratio"])
if d["set"] != "dense" or d["budget"] != "rms" or d["max_err_k"] != 0.005: bad.append("dense: set/budget/default K budget")
if any(m in FK | FV for m in d["k"] + d["v"]): bad.append("dense: a fast preset")
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
