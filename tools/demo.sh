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
build/meshc explain --fn mlp examples/mlp.msh
mkdir -p build/demo
build/meshc build examples/mlp.msh -o build/demo/mlp
build/meshc build examples/mlp.msh --mesh Pod=data:1,model:1 -o build/demo/mlp-1x1
cd build/demo
echo "== ./mlp on Pod = [data: 2, model: 4] (8 devices)"
./mlp
echo "== ./mlp-1x1 on Pod = [data: 1, model: 1] (1 device)"
./mlp-1x1
python3 -c "import numpy; y = numpy.load('y.npy'); print('y.npy:', y.dtype, list(y.shape))"
