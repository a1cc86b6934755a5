"""Reference for cube3.msh: a 3-axis mesh, multi-axis splits and group collectives."""
import numpy as np
from e2e_lib import F32

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted reduce_scatter sum over b", "inserted reduce_scatter sum over c",
        "inserted all_reduce sum over b, c", "inserted all_gather over a", "inserted all_gather over b", "inserted all_to_all over c",
        "inserted all_reduce sum over a, b", "inserted all_reduce sum over a, b, c",
        "inserted all_reduce sum over a, c", "inserted all_reduce max over a, c"]


def inputs():
    rng = np.random.default_rng(31)
    return {
        "x.npy": rng.normal(size=(8, 16)).astype(np.float32),
        "w.npy": rng.normal(size=(16, 8)).astype(np.float32),
        "t.npy": rng.normal(size=(8, 8, 4)).astype(np.float32),
        # distinct values per column so that a wrong (c, a) piece order shows
        "u.npy": (np.arange(32).reshape(4, 8) * 0.25 - 3.0 + rng.normal(size=(4, 8)) * 0.01).astype(np.float32),
    }


def expected(inp):
    x, w, t, u = (inp[k].astype(np.float64) for k in ("x.npy", "w.npy", "t.npy", "u.npy"))
    exact = dict(rtol=0.0, atol=0.0)
    return {
        "scatter.npy": F32(x @ w),
        "reduce.npy": F32(x @ w),
        "regather.npy": F32(t, **exact),
        "moved.npy": F32(t, **exact),
        "t_sum0.npy": F32(t.sum(axis=0)),
        "t_sum01.npy": F32(t.sum(axis=(0, 1))),
        "u_scaled.npy": F32(u * 3.0 + 1.0),
        "u_sum.npy": F32(u.sum(axis=1)),
        "u_max.npy": F32(u.max(axis=1)),
        "stdout": [["sums", F32(x.sum(), atol=1e-4), F32(t.sum(), atol=1e-4), F32(u.sum(), atol=1e-4),
                    "max", t.max()]],
    }
