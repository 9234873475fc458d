#!/bin/bash
# README command 1: install dependencies, build (release), and run the main job
# on the embedded default pool (file:default): store KV blocks, read them back,
# print `speckv pool inspect`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake --preset release
cmake --build --preset release
./build/release/cli/speckv demo file:default
