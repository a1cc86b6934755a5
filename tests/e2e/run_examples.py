#!/usr/bin/env python3
"""The examples (examples/*.msh) as programs: each must check, build and run three ways,
and the three runs must print the same thing:

  1. built on its declared meshes, run on the simulated mesh;
  2. rebound to all-1 meshes (`--mesh NAME=axis:1,...`), the unsharded program;
  3. built with `meshc build --gpu`, run with --device=gpu-emulator (the GPU kernels).

Printed lines are compared token by token: words exactly, numbers within rtol 1e-4 /
atol 1e-5 (sharding changes the order of floating-point sums). Saved .npy files are
compared the same way. Usage: run_examples.py [--meshc build/meshc] [--gpu]
(--gpu adds run 3; ctest `examples` passes it when CUDA's libdevice is installed)."""
import argparse
import glob
import os
import re
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_e2e import all_ones_flags, declared_meshes, run_cmd  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^[-+]?(inf|nan)$")


def same_text(a, b):
    """None when the printed outputs agree, else why not."""
    la, lb = a.splitlines(), b.splitlines()
    if len(la) != len(lb):
        return "%d lines vs %d" % (len(la), len(lb))
    for i, (x, y) in enumerate(zip(la, lb)):
        tx, ty = re.findall(r"[^\s,\[\]()]+", x), re.findall(r"[^\s,\[\]()]+", y)
        if len(tx) != len(ty):
            return "line %d: %r vs %r" % (i + 1, x, y)
        for u, v in zip(tx, ty):
            if NUMBER.match(u) and NUMBER.match(v):
                if not np.isclose(float(u), float(v), rtol=1e-4, atol=1e-5, equal_nan=True):
                    return "line %d: %s vs %s" % (i + 1, u, v)
            elif u != v:
                return "line %d: %r vs %r" % (i + 1, x, y)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", default=os.path.join(ROOT, "build", "meshc"))
    ap.add_argument("--gpu", action="store_true", help="also build with --gpu and run on the gpu-emulator")
    args = ap.parse_args()
    meshc = os.path.abspath(args.meshc)
    failures = []
    work = tempfile.mkdtemp(prefix="meshc-examples-")
    try:
        for src in sorted(glob.glob(os.path.join(ROOT, "examples", "*.msh"))):
            name = os.path.splitext(os.path.basename(src))[0]
            runs = [("declared", [], []), ("all-1", all_ones_flags(declared_meshes(src)), [])]
            if args.gpu:
                runs.append(("gpu-emulator", ["--gpu"], ["--device=gpu-emulator"]))
            results = {}
            for label, build_flags, run_flags in runs:
                d = os.path.join(work, name, label)
                os.makedirs(d)
                exe = os.path.join(d, name)
                rc, out, err, _ = run_cmd([meshc, "build", src, "-o", exe] + build_flags, timeout=300)
                if rc != 0:
                    failures.append("%s [%s]: build failed: %s" % (name, label, (out + err)[-1500:]))
                    continue
                rc, out, err, _ = run_cmd([exe] + run_flags, cwd=d, timeout=300)
                if rc != 0:
                    failures.append("%s [%s]: exit status %s: %s" % (name, label, rc, err[-1500:]))
                    continue
                files = {f: np.load(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".npy")}
                results[label] = (out, files)
            if "declared" not in results:
                continue
            ref_out, ref_files = results["declared"]
            for label, (out, files) in results.items():
                why = same_text(ref_out, out)
                if why:
                    failures.append("%s: %s prints differently from declared: %s" % (name, label, why))
                if sorted(files) != sorted(ref_files):
                    failures.append("%s: %s saved %s, declared %s" % (name, label, sorted(files), sorted(ref_files)))
                    continue
                for f, v in files.items():
                    r = ref_files[f]
                    if v.dtype != r.dtype or v.shape != r.shape or not np.allclose(
                            v.astype(np.float64), r.astype(np.float64), rtol=1e-4, atol=1e-5, equal_nan=True):
                        failures.append("%s: %s's %s differs from declared" % (name, label, f))
            print("%s %s (%s)" % ("FAIL" if any(x.startswith(name) for x in failures) else "PASS", name,
                                  ", ".join(results)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
