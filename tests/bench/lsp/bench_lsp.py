#!/usr/bin/env python3
"""Latency of `meshc lsp`: from a one-character edit of a 2,000-line file to the
published diagnostics of that version. Prints the median, 10th and 90th percentiles over
--repeat edits (alternately inserting and deleting one space, incremental sync), the
first check after didOpen, and `meshc check` on the same file for comparison.

    python3 tests/bench/lsp/bench_lsp.py --meshc build/meshc [--lines 2000] [--repeat 30]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "lsp"))
from lsp_client import LspClient, uri_of  # noqa: E402

LAYER = """\
/// Layer {i}: a tensor-parallel MLP block with a residual.
fn layer{i}(x:  Tensor f32 [8, 16] on Pod with {{0: data}},
          w1: Tensor f32 [16, 32] on Pod with {{1: model}},
          w2: Tensor f32 [32, 16] on Pod with {{0: model}})
    -> Tensor f32 [8, 16] on Pod with {{0: data}}
{{
    let h = relu(x @ w1);
    let g = h * 0.5 + h;
    x + g @ w2
}}

"""


def program(lines):
    head = "mesh Pod = [data: 2, model: 4];\n\n"
    layers = []
    n = 0
    body_lines = 6
    while len(head.splitlines()) + 11 * (n + 1) + body_lines + 3 * (n + 1) < lines:
        n += 1
    text = head + "".join(LAYER.format(i=i) for i in range(n))
    text += "fn main() {\n    var x = random_normal(1, [8, 16]);\n"
    for i in range(n):
        text += f"    let a{i} = random_normal({2 * i + 2}, [16, 32]) * 0.1;\n"
        text += f"    let b{i} = random_normal({2 * i + 3}, [32, 16]) * 0.1;\n"
        text += f"    x = layer{i}(x, a{i}, b{i});\n"
    text += '    print("sum", sum(x));\n}\n'
    while len(text.splitlines()) < lines:
        text += "// padding\n"
    return text, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", required=True)
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    text, layers = program(args.lines)
    work = pathlib.Path(tempfile.mkdtemp(prefix="meshc-lsp-bench-"))
    path = work / "big.msh"
    path.write_text(text)
    nlines = len(text.splitlines())

    t0 = time.perf_counter()
    r = subprocess.run([args.meshc, "check", str(path)], capture_output=True)
    check_s = time.perf_counter() - t0
    if r.returncode != 0:
        print(r.stderr.decode())
        return 1

    c = LspClient(args.meshc)
    c.initialize()
    uri = uri_of(path)
    t0 = time.perf_counter()
    c.open(uri, text, 1)
    diags = c.diagnostics(uri, 1, timeout=300)
    open_s = time.perf_counter() - t0
    if diags:
        print("unexpected diagnostics:", diags[:3])
        return 1
    # The edit: one space at the start of line 3 (the blank line after the mesh), inserted
    # then deleted.
    samples = []
    version = 1
    for i in range(args.repeat):
        version += 1
        if i % 2 == 0:
            c.change_range(uri, version, (1, 0), (1, 0), " ")
        else:
            c.change_range(uri, version, (1, 0), (1, 1), "")
        t0 = time.perf_counter()
        d = c.diagnostics(uri, version, timeout=300)
        samples.append(time.perf_counter() - t0)
        assert d == [], d
    c.close()
    samples.sort()
    shutil.rmtree(work, ignore_errors=True)
    q = statistics.quantiles(samples, n=10)
    print(f"file: {nlines} lines, {len(text)} bytes, {layers} layer functions + main")
    print(f"meshc check (process, whole file): {check_s * 1e3:.1f} ms")
    print(f"didOpen -> diagnostics: {open_s * 1e3:.1f} ms")
    print(f"edit -> diagnostics over {args.repeat} edits: median {statistics.median(samples) * 1e3:.1f} ms, "
          f"p10 {q[0] * 1e3:.1f} ms, p90 {q[-1] * 1e3:.1f} ms, min {samples[0] * 1e3:.1f} ms, max {samples[-1] * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
