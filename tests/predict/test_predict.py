#!/usr/bin/env python3
"""`meshc predict` against figures computed here by hand (docs/cli.md, "meshc predict").

A data-parallel SGD loop whose step is `grad` of `sum((x @ w)^2)` with x `{B: data}`
and w replicated: one all_reduce of w's gradient per step, f32 [D, H]. The cost model
(docs/language.md, "Cost model") prices it at 2(n-1) alpha + 2(n-1)/n * 4DH / beta; the
test checks predict's communication per step against that formula, on the declared links
and on links and sizes rebound with --link and --mesh (up to 2^16 devices), that the
step is the loop with its trips, that the text and JSON agree, and that the trace is a
Chrome trace whose slices tile the step. Bad --link specs are E0705, not crashes.
"""
import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

PROGRAM = """
mesh Pod = [data: 4 {latency: 2e-5, bandwidth: 1e10}];

fn loss(w: Tensor f32 [D, H] on Pod, x: Tensor f32 [B, D] on Pod with {0: data}) -> f32 {
    let y = x @ w;
    sum(y * y)
}

fn main() {
    let x: Tensor f32 [B, D] on Pod with {0: data} = random_normal(1, [STEPSHAPE]);
    let w0: Tensor f32 [D, H] on Pod = random_normal(2, [WSHAPE]);
    var w = w0;
    for step in 0..TRIPS {
        let g = grad(loss)(w, x);
        w = w - 0.01 * g;
    }
    print(sum(w));
}
"""

B, D, H, TRIPS = 65536, 64, 32, 7


def ring_all_reduce(n, nbytes, alpha, beta):
    if n == 1:
        return 0.0, 0.0
    sent = 2 * (n - 1) / n * nbytes
    return 2 * (n - 1) * alpha + sent / beta, sent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", required=True)
    args = ap.parse_args()
    meshc = os.path.abspath(args.meshc)
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="meshc-predict-") as tmp:
        src = pathlib.Path(tmp) / "dp.msh"
        text = PROGRAM.replace("STEPSHAPE", f"{B}, {D}").replace("WSHAPE", f"{D}, {H}").replace("TRIPS", str(TRIPS))
        text = text.replace("[B, D]", f"[{B}, {D}]").replace("[D, H]", f"[{D}, {H}]")
        src.write_text(text)

        def predict(*extra):
            p = subprocess.run([meshc, "predict", "--format=json", str(src), *extra], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"meshc predict {' '.join(extra)} failed ({p.returncode}):\n{p.stderr}")
            return json.loads(p.stdout)

        cases = [
            ("declared links", [], 4, 2e-5, 1e10),
            ("--link rebinds both", ["--link", "Pod.data=latency:1e-6,bandwidth:4.5e11"], 4, 1e-6, 4.5e11),
            ("--link latency only", ["--link", "Pod.data=latency:3e-5"], 4, 3e-5, 1e10),
            ("--mesh 512 devices", ["--mesh", "Pod=data:512"], 512, 2e-5, 1e10),
            ("--mesh 2^16 devices, cross-node links",
             ["--mesh", "Pod=data:65536", "--link", "Pod.data=latency:1e-5,bandwidth:2.5e10"], 65536, 1e-5, 2.5e10),
            ("--mesh 1 device", ["--mesh", "Pod=data:1"], 1, 2e-5, 1e10),
        ]
        for name, extra, n, alpha, beta in cases:
            r = predict(*extra)
            want_s, want_sent = ring_all_reduce(n, 4 * D * H, alpha, beta)
            step = r["per_step"]
            check(r["devices"] == n, f"{name}: {n} devices (got {r['devices']})")
            check(r["step"]["loop"] and r["step"]["steps_per_run"] == TRIPS,
                  f"{name}: the step is the loop, {TRIPS} trips (got {r['step']})")
            check(math.isclose(step["communication_s"], want_s, rel_tol=1e-9, abs_tol=1e-15),
                  f"{name}: communication per step {step['communication_s']:.6e} s = 2(n-1)a + 2(n-1)/n*4DH/b "
                  f"= {want_s:.6e} s")
            sent = sum(a["bytes_sent"] for a in step["by_axes"].values())
            check(math.isclose(sent, want_sent, rel_tol=1e-9, abs_tol=1e-9),
                  f"{name}: {sent:.1f} bytes sent per device per step (by hand {want_sent:.1f})")
            check(step["collectives"] == (1 if n > 1 else 0), f"{name}: {step['collectives']} collectives per step")
            check(math.isclose(step["step_s"], step["compute_s"] + step["exposed_communication_s"], rel_tol=1e-12),
                  f"{name}: step = compute + exposed communication")
            # Compute: x @ w of this device's rows, 2 * (B/n) * D * H flops at least.
            check(step["flops"] >= 2 * (B / n) * D * H, f"{name}: flops cover the local contraction")

        # The trace: a Chrome trace, both tracks, slices within the step and tiling it.
        trace = pathlib.Path(tmp) / "step.json"
        p = subprocess.run([meshc, "predict", str(src), "--trace", str(trace)], capture_output=True, text=True)
        check(p.returncode == 0 and "per step and device" in p.stdout, "text report")
        events = json.loads(trace.read_text())["traceEvents"]
        slices = [e for e in events if e.get("ph") == "X"]
        r = predict()
        step_us = r["per_step"]["step_s"] * 1e6
        leaf = [e for e in slices if not e["name"].startswith("call ")]
        check({e["tid"] for e in leaf} == {0, 1}, "trace has compute and communication slices")
        check(all(e["ts"] >= -1e-9 and e["ts"] + e["dur"] <= step_us * (1 + 1e-9) + 1e-6 for e in slices),
              "every slice lies within the step")
        check(math.isclose(sum(e["dur"] for e in leaf), step_us, rel_tol=1e-9),
              f"leaf slices sum to the step ({step_us:.3f} us)")
        ar = [e for e in leaf if e["tid"] == 1]
        check(len(ar) == 1 and "all_reduce" in ar[0]["name"] and ar[0]["args"]["pass"] == "backward",
              "the one collective is the backward all_reduce")

        # Bad specs: diagnostics, not crashes.
        for bad in ["Pod.model=latency:1e-6", "Pod.data=latency:-1", "Pod.data=speed:3", "Nope.data=latency:1",
                    "Pod=latency:1", "Pod.data=bandwidth:0"]:
            p = subprocess.run([meshc, "predict", str(src), "--link", bad], capture_output=True, text=True)
            check(p.returncode == 1 and "E0705" in p.stderr, f"--link {bad}: E0705 (exit {p.returncode})")

    print(f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
