"""Reference for odd_meshes.msh: meshes of 3, 5, 6 devices."""
import numpy as np
from e2e_lib import F32, softmax, log_softmax

RTOL, ATOL = 2e-4, 2e-5
# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce max over model", "inserted reduce_scatter sum over data", "inserted make_partial over model"]


def inputs():
    rng = np.random.default_rng(35)
    f = lambda *sh: rng.normal(size=sh).astype(np.float32)
    return {"x.npy": f(9, 4), "w.npy": f(4, 5), "b.npy": f(5), "logits.npy": f(12, 7),
            "labels.npy": rng.integers(0, 7, size=12).astype(np.int64), "v.npy": f(10, 15)}


def expected(inp):
    x, w, b, lg, v = (inp[k].astype(np.float64) for k in ("x.npy", "w.npy", "b.npy", "logits.npy", "v.npy"))
    lab = inp["labels.npy"]
    ce = -log_softmax(lg, axis=1)[np.arange(12), lab].mean()
    q = x * 0.75 * 0.75
    nx, nl = (x * x).sum(), (lg * lg).sum()
    return {
        "linear.npy": F32(x @ w + b),
        "sgd.npy": F32(q),
        "pl.npy": F32(softmax(v, axis=1) + log_softmax(v * 0.5, axis=1)),
        "m.npy": F32(v.mean(axis=1) + v.max(axis=1)),
        "moved.npy": F32(v * 2.0),
        "hexa_scaled.npy": F32(lg * (nx * 0.01) - lg.mean(axis=0), rtol=1e-3),
        "tri_scaled.npy": F32(x * (nl * 0.01) - x.mean(axis=0), rtol=1e-3),
        "penta_scaled.npy": F32(v * (nx / nl)),
        "stdout": [["norms", nx, nl, "ce", ce]],
    }
