"""Reference for data_windows.msh: SGD over windows taken in each device's rows of a
dataset split over `data` (rows k*16 + s .. k*16 + s + 4 of block k)."""
import numpy as np
from e2e_lib import F32

ARGV = ["--steps=6"]
RNG = np.random.default_rng(13)
X = RNG.standard_normal((32, 8)).astype(np.float32)
Y = RNG.standard_normal((32, 4)).astype(np.float32)


def inputs():
    return {"x.npy": X, "y.npy": Y}


def expected(inp):
    x, y = X.astype(np.float64), Y.astype(np.float64)
    w = np.zeros((8, 4))
    lines = []
    for step in range(6):
        s = (step * 4) % 16
        rows = np.r_[s:s + 4, 16 + s:16 + s + 4]
        xb, yb = x[rows], y[rows]
        d = xb @ w - yb
        lines.append(["step", step, "start", s, "loss", (d * d).mean()])
        w = w - 0.1 * (2.0 * xb.T @ d / d.size)
    return {"w.npy": F32(w, rtol=1e-4, atol=1e-5), "stdout": lines}
