"""Reference for functions.msh: generic functions, structs, tuples, std.nn."""
import numpy as np
from e2e_lib import F32, log_softmax

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_gather over data", "inserted local_slice over model",
        "inserted all_reduce sum over data, model", "inserted all_reduce max over data"]


def inputs():
    rng = np.random.default_rng(41)
    return {
        "x.npy": rng.normal(size=(8, 12)).astype(np.float32),
        "w.npy": (rng.normal(size=(12, 16)) * 0.3).astype(np.float32),
        "b.npy": rng.normal(size=(16,)).astype(np.float32),
        "x2.npy": rng.normal(size=(4, 6)).astype(np.float32),
        "seq.npy": (rng.normal(size=(2, 4, 12)) * 2.0 + 0.5).astype(np.float32),
        "g.npy": rng.uniform(0.5, 1.5, size=(12,)).astype(np.float32),
        "logits.npy": rng.normal(size=(8, 16)).astype(np.float32),
        "labels.npy": np.array([0, 15, 3, 3, 7, 9, 12, 1], dtype=np.int64),
    }


def expected(inp):
    x, w, b, x2, seq, g, logits = (inp[k].astype(np.float64) for k in
                                   ("x.npy", "w.npy", "b.npy", "x2.npy", "seq.npy", "g.npy", "logits.npy"))
    labels = inp["labels.npy"]
    mu = x.mean(axis=1)
    var = (x * x).mean(axis=1) - mu * mu
    m = seq.mean(axis=2, keepdims=True)
    xc = seq - m
    ln = xc / np.sqrt((xc * xc).mean(axis=2, keepdims=True) + 1e-5) * g + (g * 0.5 - 1.0)
    ce = -log_softmax(logits, axis=1)[np.arange(8), labels].mean()
    return {
        "apply.npy": F32(x @ w + b),
        "apply_scaled.npy": F32(x @ (w * 0.125) + (b + 1.5)),
        "p_b.npy": F32(b + 1.5),
        "mu.npy": F32(mu),
        "var.npy": F32(var, atol=3e-5),
        "mu2.npy": F32(x2.mean(axis=1)),
        "sq.npy": F32(x2 ** 4),
        "back.npy": F32(x2, rtol=0, atol=0),
        "layernorm.npy": F32(ln),
        "linear.npy": F32(x @ w + b),
        "stdout": [
            ["tuple", 6, 2.5, x.max(), -16],
            ["cross entropy", ce, ce],
        ],
    }
