#!/usr/bin/env python3
"""The `with auto` solver on examples/gpt: every layout of the parameter structs
(`Mats`, `Vecs` in model.msh) written `auto`, solved by `meshc shard` with the memory
budget set to the hand layout's peak, against the hand layout under the same cost model
(`meshc explain`'s program cost), on several meshes and depths.

For each (mesh, layers): the hand layout's modelled step time and peak, the solved plan's
(explain of the program `meshc shard -o` writes, so the figure is the written program's),
their ratio, the solve's wall time, the candidate programs checked, the 0-1 program's
size, its gap and whether the certificate is exact.

    python3 tests/bench/shard_bench.py --meshc build/meshc
    python3 tests/bench/shard_bench.py --meshc build/meshc --layers 4,8,16 --meshes data:2,model:4
    python3 tests/bench/shard_bench.py --meshc build/meshc --smoke      # one small case
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def auto_model(text):
    """model.msh with every layout of the Mats and Vecs fields written `auto`."""
    def fields(block):
        block = re.sub(r"on M with \{[^}]*\},", "on M with auto,", block)
        return re.sub(r"on M,", "on M with auto,", block)
    for name in ("struct Mats", "struct Vecs"):
        i = text.index(name)
        j = text.index("}\n", i)
        text = text[:i] + fields(text[i:j]) + text[j:]
    return text


def with_layers(text, layers, mesh):
    # gpt.msh samples from a prompt batch of 2 rows split over `data`: on a larger `data`
    # axis the batch is the axis's size (the file is not read: explain costs only).
    data = int(dict(a.split(":") for a in mesh.split(","))["data"])
    if data > 2:
        text = text.replace("[2, 128]", f"[{data}, 128]")
    text = text.replace("model.Mats[Pod, 4, ", f"model.Mats[Pod, {layers}, ")
    return text.replace("model.Vecs[Pod, 4, ", f"model.Vecs[Pod, {layers}, ")


def explain(meshc, path, mesh):
    p = subprocess.run([meshc, "explain", "--format=json", "--mesh", mesh, str(path)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"shard_bench: explain {path} failed:\n{p.stderr}")
    return json.loads(p.stdout)["program"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", required=True)
    ap.add_argument("--layers", default="4,8,16,48")
    ap.add_argument("--meshes", default="data:2,model:4;data:8,model:1;data:4,model:2")
    ap.add_argument("--time-limit", type=float, default=600)
    ap.add_argument("--smoke", action="store_true", help="4 layers on [data: 2, model: 4] only")
    args = ap.parse_args()
    meshc = os.path.abspath(args.meshc)
    layers = [4] if args.smoke else [int(x) for x in args.layers.split(",")]
    meshes = ["data:2,model:4"] if args.smoke else args.meshes.split(";")
    work = pathlib.Path(tempfile.mkdtemp(prefix="meshc-shard-bench-"))
    try:
        src = ROOT / "examples" / "gpt"
        hand_model = (src / "model.msh").read_text()
        gpt = (src / "gpt.msh").read_text()
        (work / "hand").mkdir()
        (work / "auto").mkdir()
        (work / "hand" / "model.msh").write_text(hand_model)
        (work / "auto" / "model.msh").write_text(auto_model(hand_model))
        print(f"{'mesh':<18} {'layers':>6} {'hand ms':>9} {'solved ms':>10} {'ratio':>7} {'hand MB':>8} "
              f"{'solved MB':>9} {'solve s':>8} {'checks':>6} {'vars':>5} {'rows':>5} {'gap':>6} exact")
        worst = 0.0
        for mesh in meshes:
            for n in layers:
                for kind in ("hand", "auto"):
                    (work / kind / "gpt.msh").write_text(with_layers(gpt, n, mesh))
                rebind = "Pod=" + mesh
                hand = explain(meshc, work / "hand" / "gpt.msh", rebind)
                out = work / "auto" / "solved_model.msh"
                start = time.perf_counter()
                p = subprocess.run([meshc, "shard", "--format=json", "--mesh", rebind,
                                    f"--memory={hand['peak_bytes']}", f"--auto-time-limit={args.time_limit}",
                                    "-o", str(out), str(work / "auto" / "gpt.msh")],
                                   capture_output=True, text=True)
                wall = time.perf_counter() - start
                if p.returncode != 0:
                    sys.exit(f"shard_bench: shard failed on {mesh}, {n} layers:\n{p.stderr}")
                r = json.loads(p.stdout)
                # The written program, explained: the plan as the user keeps it.
                solved_dir = work / "solved"
                solved_dir.mkdir(exist_ok=True)
                shutil.copy(out, solved_dir / "model.msh")
                (solved_dir / "gpt.msh").write_text(with_layers(gpt, n, mesh))
                solved = explain(meshc, solved_dir / "gpt.msh", rebind)
                ratio = solved["cost_s"] / hand["cost_s"]
                worst = max(worst, ratio)
                s = r["solver"]
                print(f"{mesh:<18} {n:>6} {hand['cost_s'] * 1e3:>9.3f} {solved['cost_s'] * 1e3:>10.3f} {ratio:>7.4f} "
                      f"{hand['peak_bytes'] / 1e6:>8.2f} {solved['peak_bytes'] / 1e6:>9.2f} {wall:>8.2f} "
                      f"{s['evaluations']:>6} {s['variables']:>5} {s['rows']:>5} {s['gap'] * 100:>5.2f}% {s['exact']}",
                      flush=True)
                if solved["peak_bytes"] > hand["peak_bytes"]:
                    sys.exit(f"shard_bench: the solved plan peaks at {solved['peak_bytes']}, over the budget")
                if abs(solved["cost_s"] - r["plan"]["cost_s"]) > 1e-9 * solved["cost_s"]:
                    sys.exit("shard_bench: the written program's cost differs from the plan shard reported")
        print(f"worst ratio solved / hand: {worst:.4f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
