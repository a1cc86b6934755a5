#!/usr/bin/env bash
# The GPU checks, on a machine with an NVIDIA GPU, the CUDA 13 toolkit, cuBLAS and NCCL
# (CI has no GPU: it only builds and links the CUDA runtime). From the repository root:
#   tests/gpu/run.sh [--no-build] [--skip-e2e] [--skip-bench]
# 1. builds with -DMESHC_CUDA=ON into $MESHC_GPU_BUILD (default build-cuda);
# 2. meshrt-cuda-check: the CUDA kernels, cuBLAS contractions, random numbers and the
#    NCCL handler against the CPU runtime (runtime/tests/cuda_check.cpp);
# 3. examples/mlp.msh on the CPU, with --device=cuda, and with --device=cuda --comm=nccl
#    (on the declared 2x4 mesh with 8 GPUs, else rebound to 1 device), and built with
#    --gpu (its loops as PTX kernels) with --device=cuda: same sums, close y;
# 4. the e2e suite built with `meshc build --gpu` and run as `./prog --device=cuda`
#    (every loop a GPU kernel), each program's PTX also assembled by ptxas;
# 5. a 4096^3 f32 and bf16 matmul: the Mesh program (--device=cuda, timed by its trace)
#    against cuBLAS called directly (tests/gpu/matmul_ref.cu), TFLOP/s of both;
# 6. a fused element-wise chain over 256 Mi f32 as one GPU kernel: GB/s (its trace)
#    against the GPU's own device-to-device copy (tests/gpu/matmul_ref.cu copy).
# Within a device-time budget, run it in stages: --build-only, then --no-build
# --skip-bench, then --no-build --skip-e2e.
# Every step runs even when an earlier one failed; the summary at the end says which
# failed, and the exit status is 1 if any did.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${MESHC_GPU_BUILD:-build-cuda}
case $build in /*) ;; *) build=$root/$build ;; esac
do_build=1 do_e2e=1 do_bench=1 build_only=0
for arg in "$@"; do
  case $arg in
    --no-build) do_build=0 ;;
    --build-only) build_only=1 ;;
    --skip-e2e) do_e2e=0 ;;
    --skip-bench) do_bench=0 ;;
    *) echo "usage: tests/gpu/run.sh [--no-build | --build-only] [--skip-e2e] [--skip-bench]" >&2; exit 2 ;;
  esac
done
# The CUDA toolkit's tools, wherever PATH has them or not.
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
jobs=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=()
step() { echo; echo "== $*"; }
fail() { echo "FAILED: $*"; failed+=("$*"); }

step "GPUs"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader || true
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then   # what CUDA will see
  gpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
fi
echo "$gpus GPU(s)"

if [ "$do_build" = 1 ]; then
  step "build ($build, -DMESHC_CUDA=ON)"
  start=$SECONDS
  if ! { cmake -S . -B "$build" "${generator[@]}" -DMESHC_CUDA=ON &&
         cmake --build "$build" -j"$jobs" --target meshc meshrt meshrt-cuda-check; } \
       > "$tmp/build.log" 2>&1; then
    tail -40 "$tmp/build.log"
    echo "FAILED: the build (nothing else can run)"
    exit 1
  fi
  echo "built in $((SECONDS - start)) s"
fi
[ "$build_only" = 1 ] && { echo "== built (--build-only)"; exit 0; }
meshc=$build/meshc

step "meshrt-cuda-check"
"$build/runtime/meshrt-cuda-check" || fail "meshrt-cuda-check"

step "examples/mlp.msh: cpu, cuda, nccl"
mlp_ok=1
"$meshc" build examples/mlp.msh -o "$tmp/mlp" || mlp_ok=0
"$meshc" build examples/mlp.msh --mesh Pod=data:1,model:1 -o "$tmp/mlp1" || mlp_ok=0
"$meshc" build --gpu examples/mlp.msh -o "$tmp/mlpk" || mlp_ok=0
run_mlp() { # NAME EXE ARGS...: runs in its own directory, prints the sum line
  local name=$1 exe=$2; shift 2
  mkdir -p "$tmp/$name"
  (cd "$tmp/$name" && "$exe" "$@" > out.txt) && echo "$name: $(cat "$tmp/$name/out.txt")"
}
if [ "$mlp_ok" = 1 ]; then
  nccl_exe=$tmp/mlp1
  [ "$gpus" -ge 8 ] && nccl_exe=$tmp/mlp
  run_mlp cpu "$tmp/mlp" || mlp_ok=0
  run_mlp cuda "$tmp/mlp" --device=cuda || mlp_ok=0
  run_mlp nccl "$nccl_exe" --device=cuda --comm=nccl || mlp_ok=0
  run_mlp kernels "$tmp/mlpk" --device=cuda || mlp_ok=0
fi
if [ "$mlp_ok" = 1 ]; then
  python3 - "$tmp" <<'EOF' || mlp_ok=0
import sys, numpy as np
d = sys.argv[1]
ref = np.load(f"{d}/cpu/y.npy")
for name in ("cuda", "nccl", "kernels"):
    y = np.load(f"{d}/{name}/y.npy")
    err = float(np.max(np.abs(y - ref)))
    print(f"{name}: y.npy max |diff| from the CPU run {err:.3g}")
    if y.shape != ref.shape or not np.allclose(y, ref, rtol=1e-5, atol=1e-5):
        sys.exit(1)
EOF
fi
[ "$mlp_ok" = 1 ] || fail "examples/mlp.msh on the GPU"

if [ "$do_e2e" = 1 ]; then
  step "e2e with --device=cuda"
  if python3 tests/e2e/run_e2e.py --help | grep -q -- '--device'; then
    ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
    python3 tests/e2e/run_e2e.py --meshc "$meshc" -j 8 --run-timeout 120 --device cuda \
      --ptxas "$ptxas" || fail "e2e --device=cuda"
  else
    # A meshc that leaves each built executable as a script running the real one with
    # --device=cuda (run_e2e.py runs the file `meshc build -o` wrote).
    mkdir -p "$tmp/wrap"
    cat > "$tmp/wrap/meshc" <<EOF
#!/usr/bin/env bash
set -euo pipefail
out="" prev=""
for a in "\$@"; do [ "\$prev" = "-o" ] && out=\$a; prev=\$a; done
if [ "\${1:-}" != build ] || [ -z "\$out" ]; then exec "$meshc" "\$@"; fi
"$meshc" "\$@"
out=\$(cd "\$(dirname "\$out")" && pwd)/\$(basename "\$out")
mv "\$out" "\$out.bin"
printf '#!/bin/sh\nexec "%s.bin" --device=cuda "\$@"\n' "\$out" > "\$out"
chmod +x "\$out"
EOF
    chmod +x "$tmp/wrap/meshc"
    python3 tests/e2e/run_e2e.py --meshc "$tmp/wrap/meshc" -j 8 --run-timeout 120 ||
      fail "e2e --device=cuda"
  fi
fi

if [ "$do_bench" = 1 ]; then
  step "matmul 4096^3: the Mesh program (--device=cuda) vs cuBLAS"
  n=4096 iters=10
  if nvcc -O2 -std=c++17 -arch=sm_90 tests/gpu/matmul_ref.cu -lcublas -o "$tmp/matmul_ref"; then
    for dt in f32 bf16; do
      cat > "$tmp/mm_$dt.msh" <<EOF
// tests/gpu/run.sh: ${n}^3 $dt matmul, $iters timed iterations after 2 warm-ups
mesh One = [d: 1];

fn main() {
    let a: Tensor $dt [$n, $n] on One = random_normal(1, [$n, $n]);
    let b: Tensor $dt [$n, $n] on One = random_normal(2, [$n, $n]) * 0.015625;
    var c = a;
    for i in 0..$((iters + 2)) {
        c = c @ b;
    }
    print("check", sum(c));
}
EOF
      if "$meshc" build -O2 "$tmp/mm_$dt.msh" -o "$tmp/mm_$dt" &&
         (cd "$tmp" && "./mm_$dt" --device=cuda --trace="$tmp/mm_$dt.json" > /dev/null) &&
         ref=$("$tmp/matmul_ref" "$dt" "$n" "$iters"); then
        python3 - "$tmp/mm_$dt.json" "$ref" "$dt" "$n" <<'EOF' || fail "matmul $dt"
import json, statistics, sys
trace, ref, dt, n = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
ev = [e for e in json.load(open(trace))["traceEvents"] if e.get("name") == "contract"]
if len(ev) < 3 or any(e.get("args", {}).get("on") != "gpu" for e in ev):
    sys.exit(f"{dt}: expected GPU contractions in the trace, found {[e.get('args') for e in ev]}")
mesh_s = statistics.median(e["dur"] * 1e-6 for e in ev[2:])
flops = 2.0 * n ** 3
m, r = flops / mesh_s * 1e-12, flops / ref["seconds"] * 1e-12
print(f"{dt:>4}: Mesh {m:7.1f} TFLOP/s   cuBLAS {r:7.1f} TFLOP/s   ratio {m / r:.2f}"
      f"   ({len(ev) - 2} timed calls)")
EOF
      else
        fail "matmul $dt"
      fi
    done
  else
    fail "compiling tests/gpu/matmul_ref.cu"
  fi
fi

if [ "$do_bench" = 1 ]; then
  step "fused element-wise kernel over 256 Mi f32 (--gpu, --device=cuda) vs device copy"
  cat > "$tmp/ew.msh" <<EOF
// tests/gpu/run.sh: an 8-op chain, one read and one write per element, 5 times
mesh One = [d: 1];

fn main() {
    var x: Tensor f32 [268435456] on One = random_uniform(3, [268435456]);
    for i in 0..5 {
        x = relu(x * 0.5 + 0.25) * 1.5 - 0.125 + abs(x) * 0.0;
    }
    print("check", sum(x));
}
EOF
  if "$meshc" build --gpu -O2 "$tmp/ew.msh" -o "$tmp/ew" &&
     (cd "$tmp" && ./ew --device=cuda --trace="$tmp/ew.json" > /dev/null) &&
     copy=$("$tmp/matmul_ref" copy 268435456 10); then
    python3 - "$tmp/ew.json" "$copy" <<'EOF' || fail "element-wise kernel"
import json, statistics, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"]
      if str(e.get("name", "")).startswith("elementwise")]
if len(ev) < 3:
    sys.exit(f"expected the element-wise loops in the trace, found {len(ev)}")
s = statistics.median(e["dur"] * 1e-6 for e in ev[1:])
gbs = 2 * 4 * 268435456 / s * 1e-9
ref = json.loads(sys.argv[2])["gbps"]
print(f"element-wise kernel {gbs:7.0f} GB/s   device copy {ref:7.0f} GB/s   ratio {gbs / ref:.2f}")
EOF
  else
    fail "element-wise kernel"
  fi
fi

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "== GPU checks: all passed"
else
  echo "== GPU checks: ${#failed[@]} failed: ${failed[*]}"
  exit 1
fi
