#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a command against a fresh 3-node Redis Cluster on 127.0.0.1:
#   cluster.sh COMMAND [ARGS...]
# Ports are probed free (each node also needs port + 10000 for the cluster
# bus), data lives in a temporary directory, and the nodes are killed and the
# directory removed when the command ends, fails or is interrupted. The command
# sees SPECKV_TEST_REDIS_URI (redis://host:port,...), SPECKV_TEST_REDIS_PORTS
# and SPECKV_TEST_REDIS_PIDS (space-separated, in the same order).
# Exits 77 (skipped) when redis-server or redis-cli is missing.
set -u
for tool in redis-server redis-cli; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool not found (Debian: apt-get install redis-server redis-tools)"
    exit 77
  fi
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/speckv-redis.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_nodes() {
  local base=$1
  ports=()
  for i in 0 1 2; do
    local p=$((base + i))
    if port_busy "$p" || port_busy $((p + 10000)); then return 1; fi
    ports+=("$p")
  done
  pids=()
  for p in "${ports[@]}"; do
    mkdir -p "$dir/$p"
    redis-server --port "$p" --bind 127.0.0.1 --protected-mode no --cluster-enabled yes \
      --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 1000 \
      --cluster-require-full-coverage no --dir "$dir/$p" --save "" --appendonly no \
      --logfile "$dir/$p/redis.log" --daemonize no >/dev/null 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 50); do
    local up=0
    for p in "${ports[@]}"; do
      [ "$(redis-cli -p "$p" ping 2>/dev/null)" = PONG ] && up=$((up + 1))
    done
    [ "$up" = 3 ] && return 0
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  return 1
}

ok=0
for attempt in 1 2 3 4 5; do
  base=$((20000 + (($$ * 7 + attempt * 131 + RANDOM) % 9000)))
  if start_nodes "$base"; then ok=1; break; fi
done
if [ "$ok" != 1 ]; then
  echo "FAIL: could not start 3 redis-server nodes"; tail -5 "$dir"/*/redis.log 2>/dev/null; exit 1
fi

if ! redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1; then
  echo "FAIL: redis-cli --cluster create"; cat "$dir/create.log"; exit 1
fi
for _ in $(seq 100); do
  n=0
  for p in "${ports[@]}"; do
    redis-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && n=$((n + 1))
  done
  [ "$n" = 3 ] && break
  sleep 0.1
done

uri="redis://"
for p in "${ports[@]}"; do uri+="127.0.0.1:$p,"; done
export SPECKV_TEST_REDIS_URI=${uri%,}
export SPECKV_TEST_REDIS_PORTS="${ports[*]}"
export SPECKV_TEST_REDIS_PIDS="${pids[*]}"
"$@"
