"""Reference for train_ckpt.msh: momentum SGD of a small MLP over windows of a dataset,
its .safetensors checkpoint (names by field path), a run resumed from a checkpoint
(bitwise the uninterrupted run), and bad checkpoints (a missing name, a wrong dtype or
shape, a truncated file, a bad header)."""
import numpy as np
from e2e_lib import F32, BadCase, safetensors_bytes

COMM = ["inserted all_reduce sum over model"]
ARGV = ["--steps=8"]
# Two halves: steps 0..4 saved to half.safetensors, then 4..8 resumed from it.
RESUME = [["--steps=4", "--out=half.safetensors"], ["--first=4", "--steps=8", "--init=half.safetensors"]]
RESUME_SAME = ["ckpt.safetensors", "weights.safetensors", "periodic.safetensors"]
RNG = np.random.default_rng(21)
X = RNG.standard_normal((48, 8)).astype(np.float32)
Y = RNG.standard_normal((48, 4)).astype(np.float32)
INIT = {"p.w1": (RNG.standard_normal((8, 16)) * 0.4).astype(np.float32),
        "p.b1": (RNG.standard_normal(16) * 0.1).astype(np.float32),
        "p.w2": (RNG.standard_normal((16, 4)) * 0.4).astype(np.float32),
        "m.w1": np.zeros((8, 16), np.float32),
        "m.b1": np.zeros(16, np.float32),
        "m.w2": np.zeros((16, 4), np.float32)}


def inputs():
    return {"x.npy": X, "y.npy": Y, "init.safetensors": safetensors_bytes(INIT)}


def train(steps, lr=0.1):
    s = {k: v.astype(np.float64) for k, v in INIT.items()}
    x, y = X.astype(np.float64), Y.astype(np.float64)
    lines = []
    for step in range(steps):
        a = (step * 8) % 48
        xb, yb = x[a:a + 8], y[a:a + 8]
        z = xb @ s["p.w1"] + s["p.b1"]
        h = np.maximum(z, 0)
        d = h @ s["p.w2"] - yb
        lines.append(["step", step, "loss", (d * d).mean()])
        gd = 2 * d / d.size
        g = {"w2": h.T @ gd}
        gz = (gd @ s["p.w2"].T) * (z > 0)
        g["w1"], g["b1"] = xb.T @ gz, gz.sum(0)
        for k in ("w1", "b1", "w2"):
            s["m." + k] = 0.9 * s["m." + k] + g[k]
            s["p." + k] = s["p." + k] - lr * s["m." + k]
    return s, lines


def expected(inp):
    s, lines = train(8)
    tol = dict(rtol=1e-3, atol=1e-4)
    names = ["p.w1", "p.b1", "p.w2", "m.w1", "m.b1", "m.w2"]
    return {"ckpt.safetensors": {k: F32(s[k], **tol) for k in names},
            "periodic.safetensors": {k: F32(s[k], **tol) for k in names},  # after step 7 (every 2)
            "weights.safetensors": {"0": F32(s["p.w1"], **tol), "1": F32(s["p.w2"], **tol)},
            "stdout": lines}


def bad(name, stderr, **kw):
    return BadCase(name, {"x.npy": X, "y.npy": Y, "init.safetensors": safetensors_bytes(**kw)},
                   ["init.safetensors"] + stderr)


MISSING = {k: v for k, v in INIT.items() if k != "m.b1"}
BAD_CASES = [
    bad("missing name", ["no tensor 'm.b1'"], tensors=MISSING),
    bad("wrong dtype", ["tensor 'p.w1': expected f32[8, 16], found f64[8, 16]"],
        tensors=dict(INIT, **{"p.w1": INIT["p.w1"].astype(np.float64)})),
    bad("wrong shape", ["tensor 'p.w2': expected f32[16, 4], found f32[4, 16]"],
        tensors=dict(INIT, **{"p.w2": INIT["p.w2"].T.copy()})),
    bad("truncated", ["truncated"], tensors=INIT, truncate=len(safetensors_bytes(INIT)) - 10),
    bad("bad header", ["bad header"], tensors=INIT, header='{"p.w1": {"dtype": "F32", "shape": [8, 16]'),
    BadCase("not a checkpoint", {"x.npy": X, "y.npy": Y, "init.safetensors": b"abc"}, ["init.safetensors", "not a .safetensors file"]),
]
