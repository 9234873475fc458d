#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Installs everything speckv needs to build and test, from Debian 12 packages.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config git ca-certificates python3
  liburing-dev libnuma-dev libdaxctl-dev libzstd-dev
  libcli11-dev libtomlplusplus-dev doctest-dev
  libssl-dev                        # libcrypto: the block hash's SHA-256
  go-md2man                         # man pages speckv(1), speckv(3)
  libcpp-httplib-dev                # speckv exporter: the HTTP server
  prometheus curl                   # tests: promtool check metrics, scraping the exporter
  verilator iverilog yosys          # fpga/: RTL simulation and synthesis checks
  cargo rustc golang-go             # bindings/: Rust and Go (Python uses python3)
  python3-venv python3-setuptools python3-wheel   # pip install ./bindings/python, offline
  dpkg-dev file                     # cpack -G DEB: dpkg-shlibdeps finds the Depends
  python3-numpy                     # bench/llamacpp/random_gguf.py (gguf-py): the random-weight 1B GGUF
  libisal-dev                       # bench/bench_crc32c: ISA-L crc32_iscsi beside ours (bench only)
  redis-server redis-tools libhiredis-dev   # L5: the Redis Cluster tier and its tests (a real cluster)
  libzmq3-dev libmsgpack-dev        # KV events: vLLM's KVEventBatch over a ZeroMQ PUB socket
  python3-zmq python3-msgpack       # tests: a real KV-event subscriber
  nlohmann-json3-dev                # one JSON library for every JSON the library and CLI write
  libsimdjson-dev                   # the trace reader's JSONL parser
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# bindings/llama.cpp: tools/fetch-llama.sh gets llama.cpp from the npm registry (Debian's
# nodejs + npm, unless an npm is already installed, e.g. NodeSource's nodejs).
command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
