"""Reference for ring8.msh: a 1-D mesh of 8 devices."""
import numpy as np
from e2e_lib import F32, softmax

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce sum over x", "inserted reduce_scatter sum over x",
        "inserted all_to_all over x", "inserted all_gather over x", "inserted all_reduce max over x"]


def inputs():
    rng = np.random.default_rng(29)
    return {"inp.npy": rng.normal(size=(32, 8)).astype(np.float32),
            "w.npy": (rng.normal(size=(8, 16)) * 0.5).astype(np.float32)}


def expected(inp):
    x, w = inp["inp.npy"].astype(np.float64), inp["w.npy"].astype(np.float64)
    y = np.tanh(x @ w)
    return {
        "y.npy": F32(y),
        "gw.npy": F32(x.T @ y),
        "g_rep.npy": F32(x.T @ y),
        "cols.npy": F32(y),
        "probs.npy": F32(softmax(y, axis=0)),
        "col_mean.npy": F32(y.mean(axis=0)),
        "acc.npy": F32(y * 10.0),
        "stdout": [["sum", F32(y.sum(), atol=1e-3), "max", y.max(), "first rows", y[:2]]],
    }
