"""Reference for mesh_odd.msh: a [r: 3, c: 2] mesh."""
import numpy as np
from e2e_lib import F32, I64, random_normal, softmax

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted reduce_scatter sum over r", "inserted reduce_scatter sum over c", "inserted all_to_all over r",
        "inserted all_gather over r", "inserted all_gather over c", "inserted all_reduce max over r"]


def inputs():
    rng = np.random.default_rng(61)
    return {"a.npy": rng.normal(size=(6, 12)).astype(np.float32),
            "b.npy": rng.normal(size=(12, 6)).astype(np.float32),
            "x.npy": (np.arange(72).reshape(6, 12) * 0.05 + rng.normal(size=(6, 12)) * 0.01).astype(np.float32)}


def expected(inp):
    a, b, x = (inp[k].astype(np.float64) for k in ("a.npy", "b.npy", "x.npy"))
    rn = random_normal(99, [6, 12])
    i = np.arange(6)[:, None] * 100 + np.arange(12)[None, :]
    return {
        "rn.npy": F32(rn, rtol=1e-6, atol=1e-7),
        "scatter.npy": F32(a @ b),
        "swap.npy": F32(x, rtol=0, atol=0),
        "softmax.npy": F32(softmax(x, axis=0)),
        "cat.npy": F32(np.concatenate([x, rn], axis=0), rtol=1e-6, atol=1e-7),
        "slice.npy": F32(a[:, 5:9], rtol=0, atol=0),
        "sum0.npy": F32(a.sum(axis=1)),
        "iota.npy": I64(i),
        "stdout": [["sums", F32(x.sum(), atol=1e-4), rn.max(), "rows", I64(i.sum(axis=1))]],
    }
