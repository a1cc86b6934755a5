#!/usr/bin/env bash
# The main job on an example, from a fresh clone: install packages, build meshc, and
# check the draft's Megatron MLP (syntax and names today; types, `build` and `run` arrive
# with the checker and back end). Prints the program's AST as meshc reads it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -G Ninja >/dev/null
cmake --build build -j"$(nproc)" --target meshc
build/meshc check examples/mlp.msh
echo "meshc check examples/mlp.msh: ok"
build/meshc check --emit=ast examples/mlp.msh | sed -n '1,20p'
