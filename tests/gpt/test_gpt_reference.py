#!/usr/bin/env python3
"""The GPT example against PyTorch: examples/gpt/gpt_tiny.msh (the model of
examples/gpt/model.msh at a test size) is built on its mesh Pod = [data: 2, model: 4]
and rebound to one device (`--mesh Pod=data:1,model:1`), both are trained for --steps
steps from the same initial parameters (a .safetensors file written here) on the same
token files, and every printed training and validation loss must match the PyTorch
float64 reference (tests/gpt/gpt_torch.py) to a relative 1e-4; the greedy sample must
be the reference's bytes wherever the reference's best logit is clear of the second by
1e-3 (the first near-tie ends the comparison). `meshc explain` of a training step must
show the layouts the example claims (ZeRO-3, sequence and vocabulary parallelism).

Usage: test_gpt_reference.py [--meshc build/meshc] [--work DIR] [--steps 100]
Exit status: 0 passed, 1 failed, 77 skipped (no PyTorch: Debian's python3-torch).
PyTorch is looked for in this interpreter, then in /usr/bin/python3 (Debian's package
serves that one; the script re-runs itself there)."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SKIP = 77

try:
    import numpy as np
    import torch
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") \
            and subprocess.call(["/usr/bin/python3", "-c", "import torch, numpy"], stderr=subprocess.DEVNULL) == 0:
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIP: PyTorch not found (apt-get install python3-torch)")
    sys.exit(SKIP)

sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import gpt_torch  # noqa: E402
from gpt_data import corpus  # noqa: E402
from e2e_lib import safetensors_bytes  # noqa: E402

# The sizes written in examples/gpt/gpt_tiny.msh.
L, V, S, D, H, F, B, NT, NV, GEN = 2, 256, 32, 64, 4, 256, 4, 20000, 4000, 16
K = D // H
PROMPT = b"the cat "
RTOL = 1e-4
BF16_RTOL = 0.02   # bf16 compute with f32 master weights: within 2% of the f32 losses


def initial(rng):
    n = lambda shape, s: (rng.standard_normal(shape) * s).astype(np.float32)  # noqa: E731
    return {"0.wte": n((V, D), 0.02), "0.wpe": n((S, D), 0.02),
            "0.wq": n((L, D, H, K), 0.02), "0.wk": n((L, D, H, K), 0.02), "0.wv": n((L, D, H, K), 0.02),
            "0.wo": n((L, H, K, D), 0.01), "0.w1": n((L, D, F), 0.02), "0.w2": n((L, F, D), 0.01),
            # gains and biases away from 1 and 0, so that their gradients matter
            "1.ln1_g": 1 + n((L, D), 0.1), "1.ln1_b": n((L, D), 0.1),
            "1.ln2_g": 1 + n((L, D), 0.1), "1.ln2_b": n((L, D), 0.1),
            "1.b1": n((L, F), 0.1), "1.b2": n((L, D), 0.1),
            "1.lnf_g": 1 + n(D, 0.1), "1.lnf_b": n(D, 0.1)}


LINE = re.compile(r"^(val step|step) (\d+) loss (\S+)$")

# The layouts, checked in `meshc explain` of a training step (value_and_grad(loss)):
# (description, regular expression, must it occur)
LAYOUT_CHECKS = [
    ("ZeRO-3: a weight all-gathered over data where used",
     r"all_gather over \(data\) dim 0 of f32 \[64, 4, 16\]", True),
    ("ZeRO-3: its gradient reduce-scattered over data",
     r"reduce_scatter sum over \(data\) dim 0 of f32 \[64, 4, 16\].*\[backward\]", True),
    ("sequence parallel: the normalised stream all-gathered over model",
     r"all_gather over \(model\) dim 1 of f32 \[4, 32, 64\]", True),
    ("sequence parallel: a block's output reduce-scattered over model",
     r"reduce_scatter sum over \(model\) dim 1 of f32 \[4, 32, 64\]", True),
    ("vocabulary parallel: the row maxima of the split logits",
     r"all_reduce max over \(model\) of f32 \[128, 1\]", True),
    ("no all_reduce of the residual stream (Megatron without sequence parallelism)",
     r"all_reduce sum over \(model\) of f32 \[4, 32, 64\]", False),
    ("no gathered logits", r"all_gather over \(model\) dim \d of f32 \[(4, 32|128), 256\]", False),
]


def parse(out):
    losses, sample = {}, None
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            losses[(m.group(1), int(m.group(2)))] = float(m.group(3))
        elif line.startswith("sample:"):
            sample = [int(t) for t in re.findall(r"-?\d+", line[len("sample:"):])]
    return losses, sample


def resume_check(exe, argv, work, steps, full_out):
    """Stop after half the steps, resume from that checkpoint: the resumed run's step
    lines and final checkpoint must be bitwise those of the uninterrupted run."""
    half = steps // 2
    a = subprocess.run([exe] + argv + ["--stop=%d" % half, "--ckpt=half.safetensors"], cwd=work,
                       capture_output=True, text=True, timeout=600)
    b = subprocess.run([exe] + argv + ["--first=%d" % half, "--resume=half.safetensors",
                                        "--ckpt=resumed.safetensors"], cwd=work,
                       capture_output=True, text=True, timeout=600)
    if a.returncode != 0 or b.returncode != 0:
        return ["resume: exit status %d, %d:\n%s" % (a.returncode, b.returncode, (a.stderr + b.stderr)[-2000:])]
    def steps_from(out, first):
        return [l for l in out.splitlines() if l.startswith("step ") and int(l.split()[1]) >= first]
    out = []
    if steps_from(b.stdout, half) != steps_from(full_out, half):
        out.append("resume: the step lines after step %d differ from the uninterrupted run's" % half)
    with open(os.path.join(work, "gpt_ckpt.safetensors"), "rb") as f1, \
            open(os.path.join(work, "resumed.safetensors"), "rb") as f2:
        if f1.read() != f2.read():
            out.append("resume: the resumed run's checkpoint is not bitwise the uninterrupted run's")
    if not out:
        print("resume: stopped after %d steps and resumed: bitwise the uninterrupted run" % half)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", default=os.environ.get("MESHC", os.path.join(ROOT, "build", "meshc")))
    ap.add_argument("--work", default=None)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="meshc-gpt-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(13)
    tokens = corpus(NT + NV, rng)
    init = initial(rng)
    np.save(os.path.join(work, "train.npy"), tokens[:NT])
    np.save(os.path.join(work, "val.npy"), tokens[NT:])
    prompt = np.full((2, S), 32, np.int64)
    prompt[:, :len(PROMPT)] = np.frombuffer(PROMPT, np.uint8)
    np.save(os.path.join(work, "prompt.npy"), prompt)
    with open(os.path.join(work, "init.safetensors"), "wb") as f:
        f.write(safetensors_bytes(init))
    argv = ["--steps=%d" % args.steps, "--val-every=10", "--lr=0.003", "--warmup=10", "--wd=0.1",
            "--clip=1.0", "--seed=0", "--prompt-len=%d" % len(PROMPT)]

    t0 = time.time()
    torch.set_num_threads(1)
    p, ref_lines = gpt_torch.train(init, tokens[:NT], tokens[NT:], B, args.steps, seed=0, peak=3e-3,
                                     warmup=10, wd=0.1, clip=1.0, val_every=10)
    ref = {(" ".join(l[:-3]), l[-3]): l[-1] for l in ref_lines}   # ("step", n) / ("val step", n)
    ref_sample, margins = gpt_torch.generate(p, list(PROMPT), GEN), []
    with torch.no_grad():   # the reference's top-2 margins along its own sample
        ctx = list(PROMPT) + ref_sample
        for i in range(GEN):
            z = gpt_torch.logits(p, torch.tensor([ctx[:len(PROMPT) + i] + [32] * (S - len(PROMPT) - i)]))
            top = torch.topk(z[0, len(PROMPT) + i - 1], 2).values
            margins.append(float(top[0] - top[1]))
    print("reference: %d steps in %.1f s; losses %.4f .. %.4f" % (args.steps, time.time() - t0,
                                                                ref[("step", 0)], ref[("step", args.steps - 1)]))
    if not ref[("step", args.steps - 1)] < ref[("step", 0)] - 0.5:
        print("FAIL: the reference does not learn (a broken test)")
        return 1

    failures = []
    src = os.path.join(ROOT, "examples", "gpt", "gpt_tiny.msh")
    e = subprocess.run([args.meshc, "explain", src], capture_output=True, text=True)
    step = e.stdout.split("fn value_and_grad(loss[", 1)[-1].split("\nfn ", 1)[0]
    if e.returncode != 0 or "fn value_and_grad(loss[" not in e.stdout:
        failures.append("meshc explain failed:\n%s" % (e.stdout + e.stderr)[-3000:])
    else:
        for what, pattern, wanted in LAYOUT_CHECKS:
            if bool(re.search(pattern, step)) != wanted:
                failures.append("explain of a training step: %s: `%s` %s" % (
                    what, pattern, "missing" if wanted else "present"))
        print("explain: %d layout checks" % len(LAYOUT_CHECKS))
    # The same model with every parameter layout written `auto` (model.msh's Mats and Vecs
    # fields): the layouts meshc chooses must train as the hand layout does.
    auto_dir = os.path.join(work, "auto")
    os.makedirs(auto_dir)
    shutil.copy(src, auto_dir)
    with open(os.path.join(ROOT, "examples", "gpt", "model.msh")) as f:
        model_text = f.read()
    for name in ("struct Mats", "struct Vecs"):
        i = model_text.index(name)
        j = model_text.index("}\n", i)
        block = re.sub(r"on M with \{[^}]*\},", "on M with auto,", model_text[i:j])
        model_text = model_text[:i] + re.sub(r"on M,", "on M with auto,", block) + model_text[j:]
    with open(os.path.join(auto_dir, "model.msh"), "w") as f:
        f.write(model_text)
    # Mixed precision: the same model with bf16 compute (the attention scale written bf16
    # makes model.train's T bf16: every layer's weights are cast to bf16 where they are
    # used) and f32 master weights, gradients and AdamW state (docs/training.md).
    bf16_dir = os.path.join(work, "bf16")
    os.makedirs(bf16_dir)
    shutil.copy(os.path.join(ROOT, "examples", "gpt", "model.msh"), bf16_dir)
    with open(src) as f:
        tiny = f.read()
    assert "    let scale = 0.25;" in tiny
    with open(os.path.join(bf16_dir, "gpt_tiny.msh"), "w") as f:
        f.write(tiny.replace("    let scale = 0.25;", "    let scale: bf16 = 0.25;"))
    hand_losses = {}
    for label, flags, source in (("2x4", [], src), ("one device", ["--mesh", "Pod=data:1,model:1"], src),
                                 ("2x4 with auto layouts", [], os.path.join(auto_dir, "gpt_tiny.msh")),
                                 ("2x4 bf16 compute", [], os.path.join(bf16_dir, "gpt_tiny.msh"))):
        exe = os.path.join(work, "gpt_tiny_" + label.replace(" ", "_"))
        t0 = time.time()
        b = subprocess.run([args.meshc, "build", source, "-o", exe] + flags, capture_output=True, text=True)
        if b.returncode != 0:
            failures.append("%s: build failed:\n%s" % (label, (b.stdout + b.stderr)[-3000:]))
            continue
        t1 = time.time()
        r = subprocess.run([exe] + argv, cwd=work, capture_output=True, text=True, timeout=600)
        t2 = time.time()
        if r.returncode != 0:
            failures.append("%s: exit status %d:\n%s" % (label, r.returncode, (r.stdout + r.stderr)[-3000:]))
            continue
        got, sample = parse(r.stdout)
        if set(got) != set(ref):
            failures.append("%s: printed losses %s, want %s" % (label, sorted(got), sorted(ref)))
            continue
        # bf16 compute: every loss within 2% of the float64 reference's (the sample is not
        # compared: bf16 logits tie where f64 ones do not).
        bf16 = label.endswith("bf16 compute")
        rtol = BF16_RTOL if bf16 else RTOL
        bad = [(k, got[k], ref[k]) for k in sorted(ref, key=lambda k: (k[1], k[0]))
               if not abs(got[k] - ref[k]) <= rtol * abs(ref[k])]
        worst = max(abs(got[k] - ref[k]) / abs(ref[k]) for k in ref)
        for k, g, w in bad[:10]:
            failures.append("%s: %s %d loss %r, reference %r" % (label, k[0], k[1], g, w))
        clear = 0 if bf16 else next((i for i, m in enumerate(margins) if m < 1e-3), GEN)
        if bf16 and worst < 1e-4:
            failures.append("%s: the losses equal the f32 run's to %.2g: the model did not compute in bf16" % (label, worst))
        if sample is None or sample[:clear] != ref_sample[:clear]:
            failures.append("%s: sample %s, reference %s (compared: the first %d)" % (label, sample, ref_sample, clear))
        print("%s: build %.1f s, %d steps and the sample in %.1f s; losses %.4f .. %.4f, worst relative "
              "difference %.2g; sample %r (%d bytes compared)" % (
                  label, t1 - t0, args.steps, t2 - t1, got[("step", 0)], got[("step", args.steps - 1)],
                  worst, bytes(sample or []).decode("latin-1"), clear))
        if label == "2x4":
            failures += resume_check(exe, argv, work, args.steps, r.stdout)
            hand_losses = got
        if label.endswith("auto layouts") and hand_losses:
            # The first ten training losses equal the hand layout's to 1e-5 (relative).
            first = [("step", n) for n in range(10)]
            off = [(k[1], got[k], hand_losses[k]) for k in first if not abs(got[k] - hand_losses[k]) <= 1e-5 * abs(hand_losses[k])]
            for n, g, h in off:
                failures.append("%s: step %d loss %r, the hand layout's %r" % (label, n, g, h))
            print("%s: the first 10 losses within 1e-5 of the hand layout's: %s" % (label, "yes" if not off else "no"))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        print("(work directory: %s)" % work)
        return 1
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
