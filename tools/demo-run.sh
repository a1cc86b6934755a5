#!/usr/bin/env bash
# The demo's main job, after the build (tools/demo.sh): show the communication the
# checker chose for the Megatron MLP of docs/language.md, build it to a native
# executable and run it on the simulated 2x4 mesh (8 device threads), and once more
# rebound to a 1x1 mesh: the two runs print the same sum. The README quotes what this
# prints, and tests/conformance/check_readme_demo.py checks that quote.
# Usage: tools/demo-run.sh [BUILD_DIR [WORK_DIR]]   (defaults: build, BUILD_DIR/demo)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
work=${2:-$build/demo}
"$build/meshc" explain --fn mlp examples/mlp.msh
mkdir -p "$work"
"$build/meshc" build examples/mlp.msh -o "$work/mlp"
"$build/meshc" build examples/mlp.msh --mesh Pod=data:1,model:1 -o "$work/mlp-1x1"
cd "$work"
echo "== ./mlp on Pod = [data: 2, model: 4] (8 devices)"
./mlp
echo "== ./mlp-1x1 on Pod = [data: 1, model: 1] (1 device)"
./mlp-1x1
python3 -c "import numpy; y = numpy.load('y.npy'); print('y.npy:', y.dtype, list(y.shape))"
