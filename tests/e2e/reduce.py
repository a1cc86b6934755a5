"""Reference for reduce.msh: sum, mean, max_over, softmax, log_softmax."""
import numpy as np
from e2e_lib import F32, F64, I32, I64, softmax, log_softmax

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce sum over data, model", "inserted all_reduce sum over data",
        "inserted all_reduce sum over model", "inserted all_reduce max over data, model",
        "inserted all_reduce max over data", "inserted all_reduce max over model"]


def inputs():
    rng = np.random.default_rng(21)
    return {
        "x.npy": rng.normal(0.0, 2.0, size=(8, 16)).astype(np.float32),
        "t.npy": rng.normal(0.0, 1.0, size=(4, 8, 6)).astype(np.float32),
        "n.npy": rng.integers(-1000, 1000, size=(8, 16)).astype(np.int64),
    }


def expected(inp):
    x, t = inp["x.npy"].astype(np.float64), inp["t.npy"].astype(np.float64)
    n = inp["n.npy"]
    return {
        "sum_all.npy": F32(x.sum(), atol=1e-4),
        "sum_0.npy": F32(x.sum(axis=0)),
        "sum_1.npy": F32(x.sum(axis=-1)),
        "mean_all.npy": F32(x.mean()),
        "mean_0.npy": F32(x.mean(axis=0)),
        "mean_1.npy": F32(x.mean(axis=1)),
        "max_all.npy": F32(x.max()),
        "max_0.npy": F32(x.max(axis=0)),
        "max_1.npy": F32(x.max(axis=-1)),
        "softmax_1.npy": F32(softmax(x, axis=1)),
        "softmax_0.npy": F32(softmax(x, axis=0)),
        "softmax_last.npy": F32(softmax(x, axis=-1)),
        "log_softmax_1.npy": F32(log_softmax(x, axis=-1)),
        "log_softmax_0.npy": F32(log_softmax(x, axis=0)),
        "log_softmax_last.npy": F32(log_softmax(t, axis=-1)),
        "t_sum_1.npy": F32(t.sum(axis=1)),
        "t_mean_02.npy": F32(t.mean(axis=2).mean(axis=0)),
        "t_max_1.npy": F32(t.max(axis=1)),
        "t_softmax_1.npy": F32(softmax(t, axis=1)),
        "n_sum.npy": I64(n.sum(axis=1)),
        "n_max.npy": I64(n.max(axis=0)),
        "d_softmax.npy": F64(softmax(x * 0.5, axis=1)),
        "d_log_softmax.npy": F64(log_softmax(x * 0.5, axis=0)),
        "d_mean.npy": F64((x * 0.5).mean(axis=1)),
        "k_sum.npy": I32(n.sum(axis=0)),
        "k_max.npy": I32(n.max()),
        "col_sum.npy": F32(x.sum(axis=0)),
        "row_max.npy": F32(x.max(axis=1)),
        "stdout": [
            ["sum", F32(x.sum(), atol=1e-4), "mean", x.mean(), "max", x.max(), "int sum", int(n.sum())],
            ["sums of softmax rows", np.ones(8)],
        ],
    }
