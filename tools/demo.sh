#!/usr/bin/env bash
# The main job on an example, from a fresh clone: install packages, build meshc, check the
# draft's Megatron MLP (syntax, names, types, shapes, shardings) and explain the
# communication the checker chose. (`meshc build`/`run` arrive with the back end.)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j"$(nproc)" --target meshc
build/meshc check examples/mlp.msh
echo "meshc check examples/mlp.msh: ok"
build/meshc explain --fn mlp examples/mlp.msh
