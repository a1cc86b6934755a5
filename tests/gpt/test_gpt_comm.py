#!/usr/bin/env python3
"""Communication and peak memory of a GPT training step, counted by hand, against
`meshc explain`.

For the GPT of examples/gpt/model.msh in three layouts (docs/gpt.md, "Communication per
step, by hand"):

  dp        examples/gpt/layouts/dp/       every weight replicated, batch over `data`
                                           (mesh [data: 2, model: 1])
  megatron  examples/gpt/layouts/megatron/ heads, MLP hidden and vocabulary over `model`,
                                           batch over `data` (mesh [data: 2, model: 4])
  zero3     examples/gpt/                  the example itself: Megatron + sequence
                                           parallel + ZeRO-3 over `data` (same mesh)

and both configurations (gpt_tiny.msh and gpt.msh), the collectives of one training
step (the instance `value_and_grad(loss)`: kind, reduction, axes, per-device buffer b,
forward or backward, how many) and their totals (collectives, backward ones, bytes each
device sends) are computed here from the sizes, by the derivation written in
docs/gpt.md, and must equal what `meshc explain --format=json` lists. So must the peak
of live tensors per device of the step (docs/gpt.md, "Peak memory per device").

The layout variants must differ from examples/gpt/model.msh only in their type
annotations (`with {...}`, `partial {...}`, effect rows `! comm(...)`) and comments.

explain's peak once counted every tensor's bytes times its element size again (fixed
with this test's help); the test still reports that figure when it sees it.

    python3 tests/gpt/test_gpt_comm.py --meshc build/meshc [-v]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GPT = os.path.join(ROOT, "examples", "gpt")
F32, I64, BOOL = 4, 8, 1

# The sizes written in examples/gpt/gpt_tiny.msh and gpt.msh.
CONFIGS = {
    "gpt_tiny": dict(L=2, V=256, S=32, D=64, H=4, F=256, B=4),
    "gpt": dict(L=4, V=256, S=128, D=256, H=4, F=1024, B=16),
}
# Layout -> (folder of its entry points, mesh sizes (data, model)).
LAYOUTS = {
    "dp": (os.path.join(GPT, "layouts", "dp"), 2, 1),
    "megatron": (os.path.join(GPT, "layouts", "megatron"), 2, 4),
    "zero3": (GPT, 2, 4),
}


def sent(kind, n, b):
    """Bytes one device sends (docs/language.md, the coercion table)."""
    if n == 1:
        return Fraction(0)
    if kind == "all_reduce":
        return Fraction(2 * (n - 1), n) * b
    return Fraction(n - 1, n) * b


class Step:
    """The hand-counted collectives of one step: (pass, kind, op, axes, b) -> count."""

    def __init__(self, nd, nm):
        self.n = {"data": nd, "model": nm}
        self.items = collections.Counter()

    def add(self, pas, kind, axes, b, count=1, op="sum"):
        size = 1
        for a in axes:
            size *= self.n[a]
        if size == 1:
            return  # a collective over axes of size 1 moves nothing: explain omits it
        self.items[(pas, kind, None if kind in ("all_gather", "all_to_all") else op, axes, b)] += count

    def totals(self):
        c = sum(self.items.values())
        bw = sum(n for k, n in self.items.items() if k[0] == "backward")
        s = Fraction(0)
        for (pas, kind, op, axes, b), count in self.items.items():
            size = 1
            for a in axes:
                size *= self.n[a]
            s += count * sent(kind, size, b)
        return c, bw, s


def expected_collectives(layout, c, nd, nm):
    """docs/gpt.md, "Communication per step, by hand": one function per layout."""
    L, V, S, D, H, F, B = (c[k] for k in "LVSDHFB")
    Bl = B // nd                 # batch rows per device
    Nl = Bl * S                  # tokens per device (the cross-entropy's rows)
    A = Bl * S * D * F32         # one [B, S, D] activation, per device (whole over model)
    st = Step(nd, nm)
    FW, BW = "forward", "backward"
    DATA, MODEL, BOTH = ("data",), ("model",), ("data", "model")
    if layout == "dp":
        # Forward: the loss, a pending sum over (data, model), summed once.
        st.add(FW, "all_reduce", BOTH, F32)
        # Backward: every gradient is a pending sum over data, one combined all_reduce of
        # all 16 leaves: P parameters.
        P = V * D + S * D + L * (4 * D * D + 2 * D * F) + L * (4 * D + F + D) + 2 * D
        st.add(BW, "all_reduce", DATA, P * F32)
        return st
    # Megatron and ZeRO-3 share the tensor-parallel part and the vocabulary-parallel
    # cross-entropy.
    st.add(FW, "all_reduce", MODEL, Nl * F32, op="max")      # log_softmax: row maxima
    st.add(FW, "all_reduce", MODEL, Nl * F32)                # log_softmax: sums of exp
    st.add(BW, "reduce_scatter", MODEL, Nl * V * F32)        # adjoint of log(sum exp):
    # the pending [N, 1] sum flows through the broadcast to [N, V] and is completed there
    st.add(BW, "all_reduce", MODEL, Nl * F32)                # adjoint of the row maxima
    if layout == "megatron":
        st.add(FW, "all_reduce", MODEL, A, count=1 + 2 * L)  # embedding, attention, MLP
        st.add(FW, "all_reduce", BOTH, F32)                  # the loss
        st.add(BW, "all_reduce", MODEL, A, count=2 * L)      # before w2's and wo's adjoints
        st.add(BW, "reduce_scatter", MODEL, V * D * F32)     # wte's gradient onto {V: model}
        st.add(BW, "all_reduce", DATA, V // nm * D * F32)    # wte
        st.add(BW, "all_reduce", BOTH, S * D * F32)          # wpe
        st.add(BW, "all_reduce", DATA, L * (4 * D * D // nm + 2 * D * F // nm) * F32)  # wq..w2
        st.add(BW, "all_reduce", BOTH, 4 * L * D * F32)      # ln1_g, ln1_b, ln2_g, ln2_b
        st.add(BW, "all_reduce", DATA, L * F // nm * F32)    # b1
        st.add(BW, "all_reduce", BOTH, (L * D + 2 * D) * F32)  # b2, lnf_g, lnf_b
        return st
    assert layout == "zero3"
    # Forward, ZeRO-3: each matrix gathered over data where it is used.
    st.add(FW, "all_gather", DATA, V // nm * D * F32)         # wte (stays split over V)
    st.add(FW, "all_gather", DATA, S * D * F32)               # wpe
    st.add(FW, "all_gather", DATA, D * D // nm * F32, count=4 * L)   # wq, wk, wv, wo
    st.add(FW, "all_gather", DATA, D * F // nm * F32, count=2 * L)   # w1, w2
    # Forward, sequence parallel: the embedding's and every block's pending sum
    # reduce-scattered onto the positions; every layer norm's output all-gathered.
    st.add(FW, "reduce_scatter", MODEL, A, count=1 + 2 * L)
    st.add(FW, "all_gather", MODEL, A, count=2 * L + 1)
    # Backward: the transposes (all_gather <-> reduce_scatter), the matrices' gradients
    # reduce-scattered over data, the replicated vectors' gradients all-reduced.
    st.add(BW, "reduce_scatter", MODEL, A, count=2 * L + 1)
    st.add(BW, "all_gather", MODEL, A, count=1 + 2 * L)
    st.add(BW, "reduce_scatter", DATA, V // nm * D * F32)
    st.add(BW, "reduce_scatter", DATA, S * D * F32)
    st.add(BW, "reduce_scatter", DATA, D * D // nm * F32, count=4 * L)
    st.add(BW, "reduce_scatter", DATA, D * F // nm * F32, count=2 * L)
    st.add(BW, "all_reduce", BOTH, F32 + 4 * L * D * F32)    # loss + ln1_g..ln2_b
    st.add(BW, "all_reduce", DATA, (L * F // nm + L * D) * F32)  # b1, b2
    st.add(BW, "all_reduce", BOTH, 2 * D * F32)              # lnf_g, lnf_b
    return st


def expected_peak(layout, c, nd, nm):
    """docs/gpt.md, "Peak memory per device": the larger of two candidate peaks of the
    step, each counted as the elements live there by element type; returns the bytes
    (true, and with every element counted element-size squared as explain does now)."""
    L, V, S, D, H, F, B = (c[k] for k in "LVSDHFB")
    Bl, Nl = B // nd, B // nd * S
    Sl = S // nm if layout == "zero3" else S     # positions per device in the residual stream
    ln = 2 * Bl * Sl * D + 2 * Bl * Sl + Bl * S * D  # one layer norm's saved values
    att = 4 * Bl * S * D // nm + 3 * Bl * H // nm * S * S + 2 * Bl * H // nm * S
    wqkvo, w12 = 4 * D * D // nm, D * F // nm    # a layer's matrices as used
    hid = Bl * S * F // nm                       # one [B, S, F] MLP activation
    common_i64 = Bl * S + L                      # ids; each layer's slice start
    common_bool = S * S                          # the causal mask

    # P1: the start of the backward pass (the cross-entropy's adjoint): every layer's
    # saved values, the final layer norm's, and the cross-entropy's [N, V] values.
    p1 = (2 * L + 1) * ln + L * att + L * (wqkvo + 2 * w12) + L * 2 * hid
    p1 += L * 2 * D + D                          # ln1_g, ln2_g per layer; lnf_g
    p1 += 4 * Nl * V // nm + Nl * V + 2 * Nl     # logits, x - max, exp, log-probs; one-hot
    p1 += V // nm * D                            # wte as the output layer uses it
    p1 += 1                                      # scale
    if layout == "dp":
        p1 += 1                                  # the loss (pending until the step's end)
    # P2: inside the top layer's gelu adjoint, at 0.5 * (1 + tanh(..)): the final layer
    # norm's values, the top layer's w2 and gelu output and the cross-entropy are gone;
    # five [B, S, F] temporaries, the residual stream's cotangent and the first
    # gradients (w2 of the top layer, wte's output-layer part, lnf_g, lnf_b, b2) live.
    p2 = 2 * L * ln + L * att + L * (wqkvo + w12) + (L - 1) * w12 + (2 * L - 1) * hid
    p2 += 5 * hid + Bl * S * D
    p2 += w12 + V // nm * D + 2 * D + D
    p2 += L * 2 * D                              # ln1_g, ln2_g per layer
    p2 += 1 + 1 + 1                              # scale, the loss, the constant 0.5
    out = []
    for f32 in (p1, p2):
        out.append((f32 * F32 + common_i64 * I64 + common_bool * BOOL,
                    f32 * F32 * F32 + common_i64 * I64 * I64 + common_bool * BOOL * BOOL))
    return max(out)


def explain_step(meshc, path):
    r = subprocess.run([meshc, "explain", "--format=json", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: meshc explain {path}: exit {r.returncode}\n{r.stderr}")
    doc = json.loads(r.stdout)
    fns = [f for f in doc["functions"] if f["name"] == "loss" and f["derived"] == "value_and_grad"]
    if len(fns) != 1:
        raise SystemExit(f"FAIL: {path}: {len(fns)} instances of value_and_grad(loss), want 1")
    return fns[0]


def strip_annotations(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r" with \{[^}]*\}", "", text)
    text = re.sub(r" partial \{[^}]*\}", "", text)
    # Effect rows follow the layouts: `! comm(data)` in the data-parallel variant.
    text = re.sub(r" ! (nocomm|comm\([^)]*\))", "", text)
    return [line.rstrip() for line in text.split("\n") if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--meshc", default=os.environ.get("MESHC", os.path.join(ROOT, "build", "meshc")))
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    failures = []
    base = strip_annotations(open(os.path.join(GPT, "model.msh")).read())
    for layout in ("dp", "megatron"):
        other = strip_annotations(open(os.path.join(LAYOUTS[layout][0], "model.msh")).read())
        if other != base:
            failures.append(f"layouts/{layout}/model.msh differs from model.msh in more than annotations")
    for layout, (folder, nd, nm) in LAYOUTS.items():
        for config, sizes in CONFIGS.items():
            path = os.path.join(folder, config + ".msh")
            fn = explain_step(args.meshc, path)
            name = f"{layout} {config}"
            # explain's collectives: (pass, kind, op, axes, b) -> count
            got = collections.Counter()
            for c in fn["collectives"]:
                op = c.get("op") if c["kind"] not in ("all_gather", "all_to_all") else None
                got[(c["pass"], c["kind"], op, tuple(c["axes"]), c["bytes"])] += int(c["count"])
            st = expected_collectives(layout, sizes, nd, nm)
            want = st.items
            if got != want:
                for k in sorted(set(got) | set(want), key=str):
                    if got[k] != want[k]:
                        failures.append(f"{name}: {k}: explain {got[k]}, hand count {want[k]}")
            count, backward, sent_bytes = st.totals()
            per = fn["per_run"]
            if (per["collectives"], per["backward_collectives"]) != (count, backward) or \
                    abs(per["sent_bytes"] - float(sent_bytes)) > 1e-6 * max(1.0, float(sent_bytes)):
                failures.append(f"{name}: totals: explain {per['collectives']:.0f} collectives "
                                f"({per['backward_collectives']:.0f} backward), {per['sent_bytes']:.0f} bytes; "
                                f"hand count {count} ({backward}), {float(sent_bytes):.0f}")
            true, squared = expected_peak(layout, sizes, nd, nm)
            peak = fn["peak_bytes"]
            if peak != true:
                failures.append(f"{name}: peak: explain {peak} bytes per device, hand count {true} "
                                f"({squared} would be the element size counted twice)")
            if args.verbose:
                print(f"{name}: {count} collectives ({backward} backward), {float(sent_bytes):.0f} bytes sent "
                      f"per device; peak {true} bytes per device")
    if failures:
        print("\n".join("FAIL: " + f for f in failures))
        return 1
    print("PASS: explain's collectives, totals and peak match the hand count for "
          f"{len(LAYOUTS)} layouts x {len(CONFIGS)} configurations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
