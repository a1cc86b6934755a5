"""Reference for reduce_large.msh: reductions of 64 Ki elements into few results."""
import numpy as np
from e2e_lib import F32, I64

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce sum over data, model", "inserted all_reduce max over data, model"]


def inputs():
    rng = np.random.default_rng(5)
    return {
        "x.npy": rng.normal(0.0, 1.0, size=(64, 1024)).astype(np.float32),
        "n.npy": rng.integers(-10**9, 10**9, size=(64, 1024)).astype(np.int64),
        "tall.npy": rng.normal(0.0, 1.0, size=(4096, 6)).astype(np.float32),
    }


def expected(inp):
    x = inp["x.npy"].astype(np.float64)
    n = inp["n.npy"]
    tall = inp["tall.npy"].astype(np.float64)
    return {
        "tall_cols.npy": F32(tall.sum(axis=0), atol=1e-3),
        "tall_max.npy": F32(tall.max(axis=0)),
        "sum_all.npy": F32(x.sum(), atol=1e-3),
        "mean_all.npy": F32((x * x).mean()),
        "max_all.npy": F32(x.max()),
        "row_sum.npy": F32(x.sum(axis=1), atol=1e-4),
        "col_sum.npy": F32(x.sum(axis=0), atol=1e-4),
        "row_max.npy": F32(x.max(axis=1)),
        "n_sum.npy": I64(n.sum()),
        "n_rows.npy": I64(n.sum(axis=1)),
        "grad.npy": F32(2.0 * x / x.size),
        "stdout": [["loss", F32((x * x).mean())]],
    }
