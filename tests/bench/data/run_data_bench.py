#!/usr/bin/env python3
"""Dataset input: run-time windows of a dataset file whose rows are split over `data`
(each device reads only its rows, with positioned reads) against the same windows of the
dataset loaded replicated (each device reads the whole file).

Both programs load an [N, D] f32 .npy file on Pod = [data: 4] and run STEPS steps; each
step takes a window of B rows at a run-time start and reduces it (sum of squares, the
window split over `data`).

- whole:   `let xs: ... on Pod = load(...)`; `slice(xs, axis: 0, start: s, size: B)`.
- sharded: `let xs: ... on Pod with {0: data} = load(...)`; the window is taken in each
           device's own rows: reshape [N, D] -> [4, N/4, D] once before the loop (dim 0
           split over data), then per step slice dim 1 at the run-time start and reshape
           the window back to [B, D] split over data.
           No communication, 1/4 of the file per device.

Reported: wall time of the whole run (load + steps), the process's peak resident memory
(the simulated mesh runs the 4 devices as threads of one process, so per device is about
a quarter of it above the baseline), and the bytes each device reads.

    python3 tests/bench/data/run_data_bench.py --meshc build/meshc [--rows 131072] [--smoke]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

PROGRAM = """
mesh Pod = [data: 4];

fn main() {{
    let steps = arg("steps", 10);
    let xs: Tensor f32 [{n}, {d}] on Pod{layout} = load("data.npy");
{prologue}
    var total = 0.0;
    for step in 0..steps {{
        let s = (step * {b4}) % {m};
{window}
        total = total + sum(xb * xb);
    }}
    print("total", total);
}}
"""
WHOLE = "        let xb: Tensor f32 [{b}, {d}] on Pod with {{0: data}} = slice(xs, axis: 0, start: s * 4, size: {b});"
SHARDED_PROLOGUE = "    let r = reshape(xs, [4, {q}, {d}]);"
SHARDED = """        let w = slice(r, axis: 1, start: s, size: {b4});
        let xb: Tensor f32 [{b}, {d}] on Pod with {{0: data}} = reshape(w, [{b}, {d}]);"""


def run(exe, cwd, steps):
    """Wall seconds, peak RSS (MiB) and stdout of one run. The peak is measured by
    /usr/bin/time, whose small process starts the program: a child forked from this
    Python process would count the parent's pages in its peak (Linux keeps the high-water
    mark across exec)."""
    t0 = time.time()
    p = subprocess.run(["/usr/bin/time", "-f", "MAXRSS %M", exe, "--steps=%d" % steps], cwd=cwd,
                       capture_output=True, text=True)
    secs = time.time() - t0
    if p.returncode != 0:
        sys.exit("run failed: %s" % p.stderr)
    kib = int(p.stderr.strip().splitlines()[-1].split()[-1])
    return secs, kib / 1024.0, p.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", default="build/meshc")
    ap.add_argument("--rows", type=int, default=131072)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.rows, a.steps = 4096, 5
    n, d, b = a.rows, a.dim, a.batch
    q, b4 = n // 4, b // 4
    with tempfile.TemporaryDirectory() as tmp:
        data = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
        np.save(os.path.join(tmp, "data.npy"), data)
        mib = data.nbytes / 2**20
        del data
        print("dataset [%d, %d] f32 = %.1f MiB, B = %d, %d steps, Pod = [data: 4] (simulated)" % (n, d, mib, b, a.steps))
        for name, layout, prologue, window in (("whole", "", "", WHOLE),
                                               ("sharded", " with {0: data}", SHARDED_PROLOGUE, SHARDED)):
            src = PROGRAM.format(n=n, d=d, b=b, b4=b4, m=q - b4 + 1, layout=layout,
                                 prologue=prologue.format(q=q, d=d), window=window.format(b=b, b4=b4, d=d, q=q))
            path = os.path.join(tmp, name + ".msh")
            with open(path, "w") as f:
                f.write(src)
            exe = os.path.join(tmp, name)
            subprocess.run([a.meshc, "build", path, "-o", exe], check=True)
            base_secs, base_rss, _ = run(exe, tmp, 0)
            secs, rss, out = run(exe, tmp, a.steps)
            per_dev = mib if name == "whole" else mib / 4
            print("%-8s read/device %7.1f MiB  load-only %.3f s %7.1f MiB peak RSS  |  %d steps %.3f s %7.1f MiB peak RSS  (%s)"
                  % (name, per_dev, base_secs, base_rss, a.steps, secs, rss, out))


if __name__ == "__main__":
    main()
