#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# server_test.sh SERVER MODEL.gguf TMPDIR SPECKV_CLI: drives examples/llamacpp's server with curl.
# Two workers on one pool (distinct ports): worker 1 serves from speckv the prompt
# worker 0 computed; concurrent requests batch together with the same outputs;
# after a restart the prompt is still served from the pool; outputs always equal
# those of a server without the cache; a bad request is a 400; stopped workers
# close the pool cleanly, `speckv pool inspect` shows their published blocks and
# `speckv pool check` finds it clean. With --codec (and a --config) split blocks restore exactly;
# a bad --config is refused with a clear error.
set -u
server=$1 model=$2 tmp=$3 cli=$4
mkdir -p "$tmp"
rm -f "$tmp/server.pool"
pool="file:$tmp/server.pool?size=64M"
port=$((21000 + $$ % 20000))
spid=
fail() { echo "FAIL: $*"; [ -n "$spid" ] && kill -TERM "$spid" 2>/dev/null && wait "$spid"; exit 1; }
start() {  # start [extra args]
  "$server" --model "$model" --pool "$pool" --port $port --workers 2 --distinct-ports --slots 2 "$@" &
  spid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && curl -sf "http://127.0.0.1:$((port + 1))/health" >/dev/null && return 0
    sleep 0.2
  done
  fail "server did not come up on ports $port, $((port + 1))"
}
stop() { kill -TERM "$spid"; wait "$spid"; spid=; }
post() {  # post PORT PROMPT -> response body
  curl -sf -X POST -H 'Content-Type: application/json' \
    -d "{\"prompt\": \"$2\", \"max_tokens\": 24}" "http://127.0.0.1:$1/v1/completions"
}
text() { sed -n 's/.*"text":"\(.*\)","finish_reason".*/\1/p'; }
restored() { sed -n 's/.*"restored_tokens":\([0-9]*\).*/\1/p'; }

P1="Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her mom and dad. Every morning she would wake up early"
P2="Once upon a time, there was a little boy named Tom. He had a big red ball and a small dog. One day the dog ran away into the forest and Tom"

start --no-cache
base1=$(post $port "$P1" | text); base2=$(post $((port + 1)) "$P2" | text)
stop
[ -n "$base1" ] && [ -n "$base2" ] || fail "no text from the server without cache"
echo "without cache: \"$base1\""

start
r=$(post $port "$P1") || fail "POST to worker 0"
echo "worker 0 (cold): $r"
[ "$(echo "$r" | restored)" = 0 ] || fail "cold request restored tokens"
[ "$(echo "$r" | text)" = "$base1" ] || fail "cold output differs"
r=$(post $((port + 1)) "$P1") || fail "POST to worker 1"
echo "worker 1 (prefix computed by worker 0): $r"
[ "$(echo "$r" | restored)" -gt 0 ] || fail "worker 1 did not restore worker 0's prefix"
[ "$(echo "$r" | text)" = "$base1" ] || fail "worker 1's output differs"
# concurrent requests: continuous batches in both workers
for i in 1 2 3; do
  post $port "$P1" > "$tmp/c$i.a" & post $port "$P2" > "$tmp/c$i.b" &
  post $((port + 1)) "$P2" > "$tmp/c$i.c" &
done
wait $(jobs -p | grep -v "^$spid$") 2>/dev/null
for i in 1 2 3; do
  [ "$(text < "$tmp/c$i.a")" = "$base1" ] || fail "concurrent P1 output differs: $(cat "$tmp/c$i.a")"
  [ "$(text < "$tmp/c$i.b")" = "$base2" ] || fail "concurrent P2 output differs: $(cat "$tmp/c$i.b")"
  [ "$(text < "$tmp/c$i.c")" = "$base2" ] || fail "concurrent P2 output differs: $(cat "$tmp/c$i.c")"
done
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"max_tokens": 3}' "http://127.0.0.1:$port/v1/completions")
[ "$code" = 400 ] || fail "a request without prompt got HTTP $code"
curl -sf "http://127.0.0.1:$port/stats"; echo
stop

start  # a restart: the pool file keeps the blocks
r=$(post $port "$P2") || fail "POST after restart"
echo "after restart: $r"
[ "$(echo "$r" | restored)" -gt 0 ] || fail "nothing restored after the restart"
[ "$(echo "$r" | text)" = "$base2" ] || fail "output after restart differs"
stop
"$cli" pool inspect "file:$tmp/server.pool" > "$tmp/inspect.txt" || fail "pool inspect"
grep -E "^(shared|attached)" "$tmp/inspect.txt"
grep -qE "^shared +[1-9][0-9]* published blocks" "$tmp/inspect.txt" || fail "no published blocks in the pool"
grep -qE "^attached +0 processes" "$tmp/inspect.txt" || fail "workers did not detach cleanly"
"$cli" pool check --quiet "file:$tmp/server.pool" || fail "pool check"

# --codec with --config: K and V stored as typed blocks (codec presets raw: exact), another worker
# restores them with the same output.
rm -f "$tmp/server.pool"
printf '[codec]\nkey_mode = "raw"\nvalue_mode = "raw"\n' > "$tmp/codec.toml"
start --codec --config "$tmp/codec.toml"
r=$(post $port "$P1") || fail "POST with --codec"
[ "$(echo "$r" | text)" = "$base1" ] || fail "cold output with --codec differs"
r=$(post $((port + 1)) "$P1") || fail "POST to worker 1 with --codec"
echo "worker 1 with --codec: $r"
[ "$(echo "$r" | restored)" -gt 0 ] || fail "worker 1 did not restore the split blocks"
[ "$(echo "$r" | text)" = "$base1" ] || fail "output restored from split blocks differs"
stop
"$cli" pool check --quiet "file:$tmp/server.pool" || fail "pool check after --codec"
printf '[codec]\nkey_mode = "nonsense"\n' > "$tmp/bad.toml"
timeout 60 "$server" --model "$model" --pool "$pool" --port $port --workers 1 --config "$tmp/bad.toml" \
  > "$tmp/bad.out" 2>&1 && fail "a bad --config was accepted"
grep -q "speckv config" "$tmp/bad.out" || fail "no clear error for a bad --config: $(cat "$tmp/bad.out")"
echo "PASS"
