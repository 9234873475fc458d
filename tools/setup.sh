#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# README command 1: install dependencies, build (release), and run the main job
# on the embedded default pool (file:default): tinyllm, a tiny LLM serving a
# continuous batch whose K/V cache lives in the pool, read through the
# prefetcher (small L1, so L2 matters), checked token for token against the
# plain forward pass; then `speckv pool inspect`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake --preset release
cmake --build --preset release
./build/release/examples/tinyllm --uri file:default --batch 8 --steps 256 --l1-bytes 262144 --l2-bytes 1048576 --check
./build/release/cli/speckv pool inspect file:default
