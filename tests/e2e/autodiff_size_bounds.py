"""Reference for autodiff_size_bounds.msh: N + B - 1 = 11 halves of sum(x^2), one sum(x)."""
import numpy as np
from e2e_lib import F32


def inputs():
    rng = np.random.default_rng(5)
    return {"x.npy": rng.normal(size=(8, 4)).astype(np.float32)}


def expected(inp):
    x = inp["x.npy"].astype(np.float64)
    loss = 11 * 0.5 * (x * x).sum() + x.sum()
    return {"g.npy": F32(11 * x + 1), "stdout": [["loss", loss]]}
