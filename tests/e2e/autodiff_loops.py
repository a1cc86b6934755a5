"""Reference for autodiff_loops.msh: the gradient of a loss with a loop, by central
finite differences of a float64 NumPy forward pass."""
import numpy as np
from e2e_lib import F32, numgrad

COMM = ["inserted all_reduce sum over data"]
RTOL, ATOL = 1e-3, 1e-5


def inputs():
    rng = np.random.default_rng(71)
    return {"x.npy": rng.normal(size=(8, 8)).astype(np.float32),
            "wl.npy": (rng.normal(size=(8, 8)) * 0.4).astype(np.float32)}


def expected(inp):
    x, wl = inp["x.npy"].astype(np.float64), inp["wl.npy"].astype(np.float64)

    def looped(w):
        h = x
        for i in range(3):
            h = np.tanh(h @ w)
            if i == 1:
                h = h * 1.5
        return (h * h).mean()

    return {"g_looped.npy": F32(numgrad(looped, wl)), "stdout": [["loss", looped(wl)]]}
