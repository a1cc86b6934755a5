#!/usr/bin/env python3
"""`meshc predict` of examples/gpt scaled to a GPT-2-medium-sized model (L 24, D 1024,
16 heads of 64, F 4096, S 1024, V 50304, batch 512) on a mesh nobody here has:
Pod = [data: 64, model: 8] (512 H100s: `model` within a node on NVLink, `data` across
nodes), the H100 device model. docs/gpt.md, "A step on 512 GPUs, predicted", is its
output next to a hand calculation.

    python3 tests/bench/predict_gpt.py --meshc build/meshc [--trace step.json] [--format json]
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
L, V, S, D, H, K, F, B = 24, 50304, 1024, 1024, 16, 64, 4096, 512
MESH = "Pod=data:64,model:8"
LINKS = ["Pod.model=latency:2e-6,bandwidth:4.5e11",   # NVLink 4: 450 GB/s per direction
         "Pod.data=latency:1e-5,bandwidth:5e10"]      # 400 Gb/s InfiniBand per GPU


def scaled_gpt():
    s = (ROOT / "examples" / "gpt" / "gpt.msh").read_text()
    for old, new in [
        ("model.Mats[Pod, 4, 256, 128, 256, 4, 64, 1024], model.Vecs[Pod, 4, 256, 1024]",
         f"model.Mats[Pod, {L}, {V}, {S}, {D}, {H}, {K}, {F}], model.Vecs[Pod, {L}, {D}, {F}]"),
        ("Tensor i64 [16, 128] on Pod with {0: data} = iota([16, 128]",
         f"Tensor i64 [{B}, {S}] on Pod with {{0: data}} = iota([{B}, {S}]"),
        ("iota([128, 128], axis: 0) >= iota([128, 128], axis: 1)",
         f"iota([{S}, {S}], axis: 0) >= iota([{S}, {S}], axis: 1)"),
        # The sample's prompt batch: one row per `data` group (explain reads no file).
        ("Tensor i64 [2, 128] on Pod with {0: data}", f"Tensor i64 [64, {S}] on Pod with {{0: data}}"),
    ]:
        if old not in s:
            sys.exit(f"predict_gpt: examples/gpt/gpt.msh changed: `{old}` not found")
        s = s.replace(old, new)
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", required=True)
    ap.add_argument("--trace")
    ap.add_argument("--format", default="text", choices=["text", "json"])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="meshc-predict-gpt-") as tmp:
        d = pathlib.Path(tmp)
        (d / "model.msh").write_text((ROOT / "examples" / "gpt" / "model.msh").read_text())
        (d / "gpt.msh").write_text(scaled_gpt())
        cmd = [args.meshc, "predict", "--mesh", MESH, "--device-model", "h100", f"--format={args.format}"]
        for link in LINKS:
            cmd += ["--link", link]
        if args.trace:
            cmd += ["--trace", str(pathlib.Path(args.trace).resolve())]
        return subprocess.run(cmd + [str(d / "gpt.msh")]).returncode


if __name__ == "__main__":
    sys.exit(main())
