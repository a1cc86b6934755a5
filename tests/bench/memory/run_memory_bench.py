#!/usr/bin/env python3
"""Memory of training steps.

1. Flat over steps: an SGD loop `p = p - lr * g` (data parallel, 4 devices) run for 100
   and for 1,000 steps; the process's peak resident memory must not grow with the steps
   (each update reuses freed buffers: codegen frees a value after its last use and the
   runtime's per-device cache hands the block to the next allocation of that size).
2. @checkpoint: a stack of L residual MLP blocks differentiated with and without
   `@checkpoint` on the block; `meshc explain` reports the peak bytes of live tensors per
   device, and the run's peak resident memory is measured.

    python3 tests/bench/memory/run_memory_bench.py --meshc build/meshc [--smoke]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

TRAIN = """
mesh Pod = [data: 4];

struct Mlp[M: Mesh, D, H] {{
    w1: Tensor f32 [D, H] on M,
    w2: Tensor f32 [H, D] on M,
}}

fn loss[M: Mesh](p: Mlp[M, D, H], x: Tensor f32 [B, D] on M with {{B: data}}) -> f32 {{
    let e = tanh(x @ p.w1) @ p.w2 - x;
    mean(e * e)
}}

fn main() {{
    let x: Tensor f32 [{b}, {d}] on Pod with {{0: data}} = random_normal(1, [{b}, {d}]);
    var p = Mlp {{ w1: random_normal(2, [{d}, {h}]) * 0.05, w2: random_normal(3, [{h}, {d}]) * 0.05 }};
    var last = 0.0;
    for step in 0..{steps} {{
        let (l, g) = value_and_grad(loss)(p, x);
        p = Mlp {{ w1: p.w1 - 0.01 * g.w1, w2: p.w2 - 0.01 * g.w2 }};
        last = l;
    }}
    print("loss", last);
}}
"""

STACK = """
mesh Pod = [data: 2];

struct Block[M: Mesh, D, H] {{
    w1: Tensor f32 [D, H] on M,
    w2: Tensor f32 [H, D] on M,
}}

{attr}
fn block[M: Mesh](p: Block[M, D, H], x: Tensor f32 [B, D] on M with {{B: data}}) -> Tensor f32 [B, D] on M with {{B: data}} {{
    gelu(x @ p.w1) @ p.w2 * 0.5 + x
}}

fn loss[M: Mesh](p: Block[M, D, H], x: Tensor f32 [B, D] on M with {{B: data}}) -> f32 {{
    var h = x;
    for i in 0..{layers} {{
        h = block(p, h);
    }}
    mean(h * h)
}}

fn main() {{
    let x: Tensor f32 [{b}, {d}] on Pod with {{0: data}} = random_normal(1, [{b}, {d}]);
    let p = Block {{ w1: random_normal(2, [{d}, {h}]) * 0.05, w2: random_normal(3, [{h}, {d}]) * 0.05 }};
    let g = grad(loss)(p, x);
    print("g", sum(g.w1));
}}
"""


def peak_rss_kib(cmd, cwd):
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, _, rusage = os.wait4(proc.pid, 0)
    out = proc.stdout.read().decode()
    return rusage.ru_maxrss, out


def build(meshc, src_text, work, name):
    src = os.path.join(work, name + ".msh")
    with open(src, "w") as fh:
        fh.write(src_text)
    exe = os.path.join(work, name)
    subprocess.run([meshc, "build", src, "-o", exe], check=True)
    explain = json.loads(subprocess.run([meshc, "explain", "--format=json", src], check=True,
                                        capture_output=True, text=True).stdout)
    return exe, explain


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", required=True)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    meshc = os.path.abspath(args.meshc)
    work = tempfile.mkdtemp(prefix="mem-bench-")
    b, d, h = (64, 32, 64) if args.smoke else (1024, 256, 1024)
    steps = (10, 100) if args.smoke else (100, 1000)
    print(f"1. SGD loop, batch {b}, D {d}, H {h}, 4 devices (parameters {2 * d * h * 4 / 2**20:.1f} MiB per device)")
    print(f"{'steps':>8} {'peak RSS MiB':>14} {'explain peak (per device) MiB':>30}")
    rss = []
    for s in steps:
        exe, ex = build(meshc, TRAIN.format(b=b, d=d, h=h, steps=s), work, f"train{s}")
        kib, out = peak_rss_kib([exe, "--mesh-threads=2"], work)
        rss.append(kib)
        print(f"{s:>8} {kib / 1024:>14.1f} {ex['program']['peak_bytes'] / 2**20:>30.2f}")
    print(f"   ratio {steps[1]} / {steps[0]} steps: {rss[1] / rss[0]:.3f}")
    layers = 4 if args.smoke else 8
    bb, dd, hh = (64, 32, 128) if args.smoke else (2048, 256, 1024)
    print(f"\n2. grad through {layers} residual GELU blocks, batch {bb}, D {dd}, H {hh}, 2 devices")
    print(f"{'':>14} {'peak RSS MiB':>14} {'explain peak (per device) MiB':>30}")
    for label, attr in (("saved", ""), ("@checkpoint", "@checkpoint")):
        exe, ex = build(meshc, STACK.format(attr=attr, layers=layers, b=bb, d=dd, h=hh), work, "stack" + label.strip("@"))
        kib, out = peak_rss_kib([exe, "--mesh-threads=2"], work)
        print(f"{label:>14} {kib / 1024:>14.1f} {ex['program']['peak_bytes'] / 2**20:>30.2f}   {out.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
