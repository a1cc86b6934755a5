"""Reference for coercions.msh: every inserted coercion keeps the global value."""
import numpy as np
from e2e_lib import F32

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce sum over model", "inserted reduce_scatter sum over model",
        "inserted all_gather over model", "inserted all_to_all over model",
        "inserted local_slice over data", "inserted local_slice over model",
        "inserted make_partial over model", "inserted all_reduce sum over data, model"]


def inputs():
    rng = np.random.default_rng(23)
    return {
        "a.npy": rng.normal(size=(8, 16)).astype(np.float32),
        "b.npy": rng.normal(size=(16, 8)).astype(np.float32),
        "r.npy": rng.normal(size=(8, 8)).astype(np.float32),
        "x.npy": rng.normal(size=(8, 16)).astype(np.float32),
    }


def expected(inp):
    a, b, r, x = (inp[k].astype(np.float64) for k in ("a.npy", "b.npy", "r.npy", "x.npy"))
    exact = dict(rtol=0.0, atol=0.0)
    return {
        "replicated.npy": F32(a @ b),
        "scattered.npy": F32(a @ b),
        "added.npy": F32(a @ b + r),
        "gathered.npy": F32(x, **exact),
        "swapped.npy": F32(x, **exact),
        "sliced.npy": F32(x, **exact),
        "pended.npy": F32(x, **exact),     # x on one device, zeros elsewhere: the sum is exact
        "spread.npy": F32(x, **exact),
        "stdout": [["2x total", F32(2 * x.sum(), atol=1e-4), "(", F32(2 * x.sum(), atol=1e-4), ")"]],
    }
