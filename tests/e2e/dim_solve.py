"""Reference for dim_solve.msh."""
import numpy as np
from e2e_lib import F32


def inputs():
    return {"x.npy": np.random.default_rng(23).normal(size=(8, 4)).astype(np.float32)}


def expected(inp):
    x = inp["x.npy"].astype(np.float64)
    return {"h.npy": F32(x[:4] + x[4:]), "o.npy": F32(np.arange(1, 5, dtype=np.float64)),
            "stdout": [["pair", 7.0]]}
