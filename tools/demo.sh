#!/usr/bin/env bash
# The main job on an example, from a fresh clone: install packages, build meshc and its
# runtime, show the communication the checker chose for the Megatron MLP of docs/language.md, then
# build it to a native executable and run it on the simulated 2x4 mesh (8 device
# threads), and once more rebound to a 1x1 mesh: the two runs print the same sum.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j"$(nproc)" --target meshc meshrt
tools/demo-run.sh build
