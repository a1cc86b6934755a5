"""Reference for autodiff_value_and_grad.msh: SGD with analytic gradients."""
import numpy as np
from e2e_lib import F32, sigmoid

COMM = ["inserted all_reduce sum over data"]


def inputs():
    rng = np.random.default_rng(53)
    return {"x.npy": rng.normal(size=(16, 4)).astype(np.float32),
            "y.npy": rng.uniform(0.0, 1.0, size=(16, 3)).astype(np.float32),
            "w.npy": (rng.normal(size=(4, 3)) * 0.5).astype(np.float32),
            "a.npy": rng.normal(size=(8,)).astype(np.float32)}


def expected(inp):
    x, y, w, a = (inp[k].astype(np.float64) for k in ("x.npy", "y.npy", "w.npy", "a.npy"))
    b = np.zeros(3)
    lines = []
    for step in range(3):
        s = sigmoid(x @ w + b)
        e = s - y
        lines.append(["step", step, "loss", (e * e).mean()])
        dz = 2.0 / e.size * e * s * (1.0 - s)
        w, b = w - 0.5 * (x.T @ dz), b - 0.5 * dz.sum(axis=0)
    return {
        "w_out.npy": F32(w),
        "b_out.npy": F32(b),
        "ga.npy": F32(4.0 * a),
        "gb.npy": F32(a),
        "stdout": lines,
    }
