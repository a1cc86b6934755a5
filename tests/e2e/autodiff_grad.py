"""Reference for autodiff_grad.msh: analytic gradients."""
import numpy as np
from e2e_lib import F32

COMM = ["inserted all_reduce sum over data, model", "inserted all_reduce sum over data"]


def inputs():
    rng = np.random.default_rng(47)
    return {"x.npy": rng.normal(size=(8, 4)).astype(np.float32),
            "w.npy": (rng.normal(size=(4, 8)) * 0.5).astype(np.float32),
            "y.npy": rng.normal(size=(8, 8)).astype(np.float32)}


def expected(inp):
    x, w, y = (inp[k].astype(np.float64) for k in ("x.npy", "w.npy", "y.npy"))
    e = x @ w - y
    return {
        "g_mse.npy": F32(2.0 / e.size * x.T @ e),
        "g_act.npy": F32(x.T @ (1.0 - np.tanh(x @ w) ** 2)),
        "g_sq.npy": F32(2.0 * w),
        "stdout": [["mse", (e * e).mean()]],
    }
