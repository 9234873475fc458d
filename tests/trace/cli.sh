#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# speckv trace: exit codes and messages of the real binary.
set -u
BIN=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
fail=0
check() {  # name expected-rc pattern cmd...
    name=$1 want=$2 pat=$3
    shift 3
    "$@" >"$WORK/out" 2>"$WORK/err"
    rc=$?
    if [ "$rc" != "$want" ] || { [ -n "$pat" ] && ! grep -q -- "$pat" "$WORK/out" "$WORK/err"; }; then
        echo "FAIL $name: rc $rc (want $want), no \"$pat\" in:"; cat "$WORK/out" "$WORK/err"; fail=1
    else
        echo "ok   $name"
    fi
}
printf '{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [0, 1]}\n{"timestamp": 1, "input_length": 600, "output_length": 4, "hash_ids": [0]}\n' >"$WORK/bad.jsonl"
check bad-line 1 "speckv: error: .*bad.jsonl: line 2: hash_ids has 1 ids, input_length 600 needs 2" \
    "$BIN" trace replay "$WORK/bad.jsonl" --model llama-3-8b --gpu a100-80g --link cxl-direct
check skip-bad 0 "skipped 1 bad" "$BIN" trace replay "$WORK/bad.jsonl" --model llama-3-8b --skip-bad
check unknown-model 2 "unknown model" "$BIN" trace replay "$WORK/bad.jsonl" --model gpt-9
check gen 0 "" "$BIN" trace gen --workload code --rate 20 --count 200 --seed 3 --prefix-share 0.5 -o "$WORK/code.trace"
"$BIN" trace gen --workload code --rate 20 --count 200 --seed 3 --prefix-share 0.5 -o "$WORK/code2.trace"
cmp -s "$WORK/code.trace" "$WORK/code2.trace" && echo "ok   gen-deterministic" || { echo "FAIL gen-deterministic"; fail=1; }
check json 0 '"cxl_speckv": {"throughput_tps"' "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --gpu a100-40g --json
check layer-groups 0 '"layer_groups": 4' "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --system cxl_speckv --layer-groups 4 --json
grep -q '"lib_prefetch_hit_rate"' "$WORK/out" && echo "ok   layer-groups-lib-rates" || { echo "FAIL layer-groups-lib-rates"; fail=1; }
check pace-needs-groups 2 "pace needs --layer-groups" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --pace 0.1
check pace-wait-bad 2 "unknown --pace-wait" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --layer-groups 4 --pace 0.1 --pace-wait nap
check paced 0 '"pace_wait_s"' "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --system cxl_speckv --layer-groups 4 --max-requests 20 --pace 0.01 --json
grep -q '"pace": 0.01, "pace_wait": "yield"' "$WORK/out" && echo "ok   paced-options" || { echo "FAIL paced-options"; fail=1; }
# Unpaced output carries no wall-clock keys (it stays deterministic).
"$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --system cxl_speckv --layer-groups 4 --max-requests 20 --json >"$WORK/out" 2>&1
! grep -q 'pace\|wall_s' "$WORK/out" && echo "ok   unpaced-no-wall-keys" || { echo "FAIL unpaced-no-wall-keys"; fail=1; }
grep -q '"prefetch_clock": "virtual"' "$WORK/out" && echo "ok   virtual-clock-default" || { echo "FAIL virtual-clock-default"; fail=1; }
# On the virtual clock the library's prefetcher is deterministic: the same JSON twice.
cp "$WORK/out" "$WORK/virtual1"
"$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --system cxl_speckv --layer-groups 4 --max-requests 20 --json >"$WORK/out" 2>&1
cmp -s "$WORK/out" "$WORK/virtual1" && echo "ok   virtual-clock-deterministic" || { echo "FAIL virtual-clock-deterministic"; fail=1; }
check wall-clock 0 '"prefetch_clock": "wall"' "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --system cxl_speckv --layer-groups 4 --max-requests 20 --prefetch-clock wall --json
check prefetch-clock-bad 2 "unknown --prefetch-clock \"lunar\" (virtual, wall)" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --prefetch-clock lunar
check prefetch-depth-bad 2 "prefetch-depth must be 0 (learned) or 1..64" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --prefetch-depth 65
check prefetch-depth 0 '"prefetch_depth": 16' "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --system cxl_speckv --layer-groups 4 --max-requests 20 --prefetch-depth 16 --json
check link-latency-bad 2 "link-latency-ns must be in 0..1e9" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --link-latency-ns 2e9
check link-latency 0 '"link_latency_ns": 5000,' "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --system cxl_nospec --max-requests 5 --link-latency-ns 5000 --json
check pace-virtual 2 "pace runs the library's prefetch thread on the wall clock" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --layer-groups 4 --pace 0.1 --prefetch-clock virtual
check layer-groups-bad 2 "layer-groups must be" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --layer-groups 41
check pnm-budget-bad 2 "pnm-budget must be" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --pnm-budget 0
check pnm-json 0 '"cxl_pnm": {"throughput_tps"' "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --system cxl_pnm --max-requests 50 --json
grep -q '"pnm_steps": ' "$WORK/out" && grep -q '"pnm_budget": 0.125' "$WORK/out" && echo "ok   pnm-keys" || { echo "FAIL pnm-keys"; fail=1; }
check system-adds-oracle 0 '"oracle"' "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --system cxl_nospec --json
check csv 0 "" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --csv "$WORK/t.csv" --plot "$WORK/plots"
grep -q '^cxl_speckv,' "$WORK/t.csv" && echo "ok   csv-rows" || { echo "FAIL csv-rows"; fail=1; }
for f in throughput throughput_vs_batch latency_breakdown hit_rate_vs_depth; do
    grep -q '</svg>' "$WORK/plots/$f.svg" && echo "ok   plot $f" || { echo "FAIL plot $f"; fail=1; }
done
# Optimistic admission and preemption (docs/trace.md "Preemption").
check admission-bad 2 "unknown --admission" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --admission greedy
check preempt-bad 2 "unknown --preempt" "$BIN" trace replay "$WORK/code.trace" --model llama-2-13b --preempt kill
check optimistic 0 '"preemptions": ' "$BIN" trace replay "$WORK/code.trace" --model llama-3-8b --gpu a100-80g --hbm-kv-gb 2 \
    --system gpu_only --admission optimistic --json
grep -q '"admission": "optimistic", "preempt": "auto"' "$WORK/out" && ! grep -q '"gpu_only": {[^}]*"preemptions": 0,' "$WORK/out" &&
    echo "ok   optimistic-preempts" || { echo "FAIL optimistic-preempts"; fail=1; }
check optimistic-table 0 "preemptions (swapped)" "$BIN" trace replay "$WORK/code.trace" --model llama-3-8b --admission optimistic --preempt recompute
head -1 "$WORK/t.csv" | grep -q ',skipped,preemptions$' && echo "ok   csv-preemptions" || { echo "FAIL csv-preemptions"; fail=1; }
# Real K/V payloads.
check payload-needs-real 2 "needs --real-bytes" "$BIN" trace replay "$WORK/code.trace" --model stories260k --payload model --kv-model x
check payload-needs-model 2 "needs --kv-model" "$BIN" trace replay "$WORK/code.trace" --model stories260k --real-bytes --payload model
check payload-bad 2 "unknown --payload" "$BIN" trace replay "$WORK/code.trace" --model stories260k --real-bytes --payload noise
# Bad input (issue 22): each gets a clear error, or is accepted as documented.
M="--model llama-3-8b --system cxl_nospec"
printf 'ContextTokens,GeneratedTokens,TIMESTAMP,Extra\n100,5,2023-11-16 18:15:46.6805900,x\n300,9,2023-11-16 18:15:47.0000000,y\n' >"$WORK/reordered.csv"
check csv-reordered-by-name 0 '"input_tokens": 400' "$BIN" trace replay "$WORK/reordered.csv" $M --json
printf 'time,in,out\n2023-11-16 18:15:46.6805900,100,5\n' >"$WORK/othercols.csv"
check csv-other-columns 1 "line 1: CSV header \"time,in,out\" lacks column(s) TIMESTAMP, ContextTokens, GeneratedTokens" \
    "$BIN" trace replay "$WORK/othercols.csv" $M
printf '2023-11-16 18:15:46.6805900,100,5\n' >"$WORK/noheader.csv"
check csv-no-header 1 "line 1: CSV without a header" "$BIN" trace replay "$WORK/noheader.csv" $M
: >"$WORK/empty.jsonl"
check empty-file 1 "holds no requests (an empty file, or a header only)" "$BIN" trace replay "$WORK/empty.jsonl" $M
printf 'TIMESTAMP,ContextTokens,GeneratedTokens\r\n' >"$WORK/header-only.csv"
check header-only 1 "holds no requests" "$BIN" trace replay "$WORK/header-only.csv" $M
check directory 1 "is a directory, not a trace file" "$BIN" trace replay "$WORK" $M
printf '{"timestamp": 1e300, "input_length": 600, "output_length": 4, "hash_ids": [0, 1]}\n' >"$WORK/far.jsonl"
check timestamp-1e300 1 "line 1: timestamp 1e+300 ms is beyond" "$BIN" trace replay "$WORK/far.jsonl" $M
printf '\357\273\277{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [0, 1]}\n' >"$WORK/bom.jsonl"
check utf8-bom-accepted 0 '"requests": 1' "$BIN" trace replay "$WORK/bom.jsonl" $M --json
ids=$(seq 2 80 | paste -sd, -)  # 40,000 tokens: 79 blocks of 512
printf '{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [0, 1]}\n{"timestamp": 5, "input_length": 40000, "output_length": 4, "hash_ids": [%s]}\n' "$ids" >"$WORK/big.jsonl"
check skipped-for-size-warns 0 "warning: gpu_only skipped 1 request(s) larger than its KV capacity .*: line 2" \
    "$BIN" trace replay "$WORK/big.jsonl" --model llama-3-8b --system gpu_only --hbm-kv-gb 1
grep -q "left out 1 request(s) that some system could not fit" "$WORK/out" && echo "ok   like-with-like" || { echo "FAIL like-with-like"; fail=1; }
# --max-requests bounds the part of the trace replayed, also when the rerun
# leaves a request out: the first 2 lines less line 2, for every system (not
# line 1 and line 3, which gpu_only would then skip too).
printf '{"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [0, 1]}\n{"timestamp": 5, "input_length": 40000, "output_length": 4, "hash_ids": [%s]}\n{"timestamp": 9, "input_length": 40000, "output_length": 4, "hash_ids": [%s]}\n' "$ids" "$ids" >"$WORK/big3.jsonl"
check like-with-like-max-requests 0 '"requests": 1,' "$BIN" trace replay "$WORK/big3.jsonl" --model llama-3-8b --all --hbm-kv-gb 1 --max-requests 2 --json
if grep -q '"requests": 2,' "$WORK/out"; then echo "FAIL like-with-like-max-requests: a system served a request past --max-requests"; fail=1; fi
exit $fail
