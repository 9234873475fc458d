#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Metrics where operators look (issue 19 §4): `speckv pool stats --format
# prometheus` and `speckv exporter`, scraped over loopback HTTP with curl and
# checked with `promtool check metrics` (Debian package prometheus).
# Usage: run.sh SPECKV_BINARY LIBSPECKV_SO WORK_DIR. Exit 77 (skipped) without curl or promtool.
set -u
bin=$(realpath "$1") lib=$(realpath "$2") work=$(realpath -m "$3")
for t in curl promtool; do
    command -v "$t" >/dev/null || { echo "SKIP: $t not installed (tools/install-deps.sh installs it)"; exit 77; }
done
rm -rf "$work" && mkdir -p "$work"
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
A="file:$work/a.pool" B="file:$work/b.pool"
"$bin" pool create "$A" --size 8M -q && "$bin" pool create "$B" --size 8M -q || { echo "FAIL pool create"; exit 1; }

# promtool prints nothing and exits 0 for text without problems.
lint() {  # lint NAME FILE
    if promtool check metrics <"$2" >"$work/$1.lint" 2>&1 && [ ! -s "$work/$1.lint" ]; then ok "$1: promtool check metrics"
    else bad "$1: promtool check metrics"; cat "$work/$1.lint"; fi
}
# The sum of a metric's samples for one pool.
sum() {  # sum FILE METRIC URI
    awk -v m="$2" -v p="pool=\"$3\"" 'index($1, m "{") == 1 && index($1, p) { s += $2 } END { printf "%d\n", s }' "$1"
}

# 1. pool stats --format prometheus
if "$bin" pool stats --format prometheus "$A" >"$work/stats.prom" 2>"$work/stats.err"; then
    ok "pool stats --format prometheus"
else bad "pool stats --format prometheus"; cat "$work/stats.err"; fi
lint stats "$work/stats.prom"
grep -q "^speckv_pool_up{pool=\"$A\"} 1$" "$work/stats.prom" && ok "stats: speckv_pool_up 1" || bad "stats: speckv_pool_up 1"
grep -q '^# TYPE speckv_reads_total counter$' "$work/stats.prom" && ok "stats: TYPE line" || bad "stats: TYPE line"
if "$bin" pool stats --format prometheus "file:$work/none.pool" >/dev/null 2>"$work/none.err"; then bad "stats of a missing pool fails"
else ok "stats of a missing pool fails: $(cat "$work/none.err")"; fi

# A process attached now: its counters carry process="<pid>" and attach_id.
python3 - "$lib" "$A" "$bin" "$work/attached.prom" <<'PY' || bad "stats with a process attached"
import ctypes, os, subprocess, sys
lib = ctypes.CDLL(sys.argv[1])
pool = ctypes.c_void_p()
assert lib.speckv_pool_open(sys.argv[2].encode(), None, ctypes.byref(pool)) == 0
buf = ctypes.create_string_buffer(1 << 16)
assert lib.speckv_stats_json(pool, buf, len(buf), None) == 0  # publishes this process's counters
with open(sys.argv[4], "w") as f:
    subprocess.run([sys.argv[3], "pool", "stats", "--format", "prometheus", sys.argv[2]], stdout=f, check=True)
print(os.getpid())
lib.speckv_pool_close(pool)
PY
lint attached "$work/attached.prom"
grep -q "^speckv_process_alive{pool=\"$A\",process=\"[0-9]*\",attach_id=\"[0-9]*\"} 1$" "$work/attached.prom" &&
    ok "stats: the attached process has its own series" || bad "stats: the attached process has its own series"

# 2. The exporter, on a free loopback port (port 0: it prints the one it got).
"$bin" exporter --listen 127.0.0.1:0 "$A" "$B" "$A" >"$work/exporter.out" 2>"$work/exporter.err" &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
url=
for _ in $(seq 100); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/metrics' "$work/exporter.out")
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "$url" ] || { echo "FAIL exporter did not start"; cat "$work/exporter.err"; exit 1; }
ok "exporter listens at $url"
base=${url%/metrics}
get() { curl -sS --max-time 5 -o "$2" -w '%{http_code}' "$1"; }  # get URL FILE -> status

[ "$(get "$url" "$work/s1.prom")" = 200 ] && ok "GET /metrics 200" || bad "GET /metrics 200"
lint scrape1 "$work/s1.prom"
for u in "$A" "$B"; do
    grep -q "^speckv_pool_up{pool=\"$u\"} 1$" "$work/s1.prom" && ok "scrape: pool $u up" || bad "scrape: pool $u up"
done
ct=$(curl -sS --max-time 5 -o /dev/null -w '%{content_type}' "$url")
[[ $ct == text/plain*version=0.0.4* ]] && ok "Content-Type $ct" || bad "Content-Type $ct"
[ "$(get "$base/" "$work/root.txt")" = 200 ] && grep -q '/metrics' "$work/root.txt" && ok "GET / names /metrics" || bad "GET / names /metrics"
[ "$(get "$base/nothing" "$work/404.txt")" = 404 ] && ok "GET /nothing 404" || bad "GET /nothing 404"

# 3. Work on pool A (a process attaches, writes, reads, closes): the next
# scrape reads the pool afresh and A's read counter has grown; B's has not.
r1=$(sum "$work/s1.prom" speckv_reads_total "$A")
b1=$(sum "$work/s1.prom" speckv_reads_total "$B")
"$bin" demo "$A" --layers 2 --tokens 16 -q || bad "demo on pool A"
[ "$(get "$url" "$work/s2.prom")" = 200 ] || bad "second scrape"
lint scrape2 "$work/s2.prom"
r2=$(sum "$work/s2.prom" speckv_reads_total "$A")
b2=$(sum "$work/s2.prom" speckv_reads_total "$B")
[ "$r2" -gt "$r1" ] && ok "speckv_reads_total of A: $r1 -> $r2" || bad "speckv_reads_total of A: $r1 -> $r2"
[ "$b2" = "$b1" ] && ok "speckv_reads_total of B unchanged ($b2)" || bad "speckv_reads_total of B: $b1 -> $b2"

# 4. A second exporter on the same port: a clear error, exit 1.
port=${base##*:}
if timeout 10 "$bin" exporter --listen "127.0.0.1:$port" "$A" >/dev/null 2>"$work/taken.err"; then bad "port taken refused"
elif grep -q "cannot listen on 127.0.0.1:$port" "$work/taken.err"; then ok "port taken: $(cat "$work/taken.err")"
else bad "port taken: $(cat "$work/taken.err")"; fi
# A pool that cannot be read at start is an error, not a pool that is down.
if timeout 10 "$bin" exporter --listen 127.0.0.1:0 "file:$work/none.pool" >/dev/null 2>"$work/nopool.err"; then
    bad "exporter refuses a missing pool"
else ok "exporter refuses a missing pool: $(cat "$work/nopool.err")"; fi

# 5. SIGTERM stops it cleanly (exit 0), within 10 s.
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then bad "exporter stops on SIGTERM"; kill -KILL "$pid"
else wait "$pid"; rc=$?; [ "$rc" = 0 ] && ok "exporter stops on SIGTERM (exit 0)" || bad "exporter exit $rc on SIGTERM"; fi
trap - EXIT
echo "$fails failed"
[ "$fails" = 0 ]
