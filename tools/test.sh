#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs the Debian packages, builds, runs
# every test (unit, runtime, lit, grammar conformance, diagnostic coverage, e2e on the
# simulated mesh and under mpirun, the benchmark driver's smoke run), then a CUDA + NCCL
# build that must compile and link (no GPU needed), then an ASan+UBSan build with
# clang-19 that runs the same tests and the checker fuzzer for a bounded time.
#   tools/test.sh            everything (what CI runs)
#   tools/test.sh --quick    the normal build and its tests only
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)
fuzz_seconds=${MESHC_FUZZ_SECONDS:-60}

tools/setup.sh

# ccache: the CUDA build below compiles the compiler again with the same flags (only the
# runtime and the link line differ), so its objects come from the cache; with the base
# folder set, a later clone elsewhere hits the same cache too.
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

echo "== build (gcc, warnings are errors)"
cmake -S . -B build -G Ninja -DMESHC_WERROR=ON "${launcher[@]}" >/dev/null
cmake --build build -j"$jobs"
echo "== tests"
ctest --test-dir build --output-on-failure -j"$jobs"

if [ "$quick" = 1 ]; then exit 0; fi

# The CUDA runtime and the NCCL handler compile and link here (no GPU needed); they
# run on a GPU machine with tests/gpu/run.sh.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$nvcc" ]; then
  echo "== build with CUDA and NCCL (-DMESHC_CUDA=ON: compiles and links; no GPU needed)"
  cmake -S . -B build-cuda -G Ninja -DMESHC_WERROR=ON -DMESHC_CUDA=ON "${launcher[@]}" \
        -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null
  cmake --build build-cuda -j"$jobs" --target meshrt meshc meshrt-tests meshrt-cuda-check
  build-cuda/runtime/meshrt-tests "[startup]"     # the CUDA runtime's option handling
  build-cuda/meshc build examples/mlp.msh -o build-cuda/mlp-cuda
  (cd build-cuda && ./mlp-cuda >/dev/null)        # a CUDA-linked program still runs on the CPU
else
  echo "== no nvcc: CUDA build skipped"
fi

echo "== build (clang-19, ASan+UBSan, fuzzers)"
CC=clang-19 CXX=clang++-19 cmake -S . -B build-asan -G Ninja -DMESHC_WERROR=ON "${launcher[@]}" \
  -DMESHC_SANITIZE=address,undefined -DMESHC_FUZZ=ON >/dev/null
cmake --build build-asan -j"$jobs"
echo "== tests under ASan+UBSan"
# The sanitizers run every test of the compiler and the runtime except those that repeat,
# at several times the cost under ASan, what the gcc build's run above has already
# covered with the same code: the e2e programs again through the GPU emulator and under
# mpirun (the plain e2e run, the MPI runtime checks and the simulated-mesh handler stay),
# the two-host network namespaces, the benchmark drivers' smoke runs, and the checks of
# docs, install and build warnings (no compiler code of their own), the grammar
# conformance run (the two parsers over the corpus: the fuzzer below runs the same
# parser under the sanitizers on that corpus and more) and the exhaustive plan search
# over generated programs (the checker's code on small programs the other unit and lit
# tests cover; 100 s here, several times that under ASan).
asan_skip='^(e2e-gpu-emulator|e2e-mpi|multihost|bench-.*|release-warnings|install-relocate|docs-links|readme-demo|lsp-nvim|grammar-conformance|unit[.]the checker.s plan is the cheapest on small straight-line programs)$'
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -E "$asan_skip"

echo "== fuzz the checker (lexer to GIR verifier) for ${fuzz_seconds}s"
scratch=$(mktemp -d)
seeds=$(mktemp -d)
trap 'rm -rf "$scratch" "$seeds"' EXIT
# Seeds beyond the checked-in corpus: typed random programs (every construct the
# generator covers, on 2- and 3-axis meshes) and programs at the checker's limits.
python3 tests/e2e/random_programs.py --count 60 --seed "${MESHC_FUZZ_SEED:-1}" --corpus "$seeds/random" >/dev/null
python3 tests/fuzz/limit_inputs.py "$seeds/limits" >/dev/null
build-asan/tests/fuzz/meshc-fuzz-parser -max_total_time="$fuzz_seconds" -max_len=4096 \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -dict=tests/fuzz/mesh.dict "$scratch" tests/fuzz/corpus "$seeds/random" "$seeds/limits" 2>&1 |
  grep -E "^(#|stat::|Done|INFO: Seed)" | tail -8
echo "fuzz: no crash"
