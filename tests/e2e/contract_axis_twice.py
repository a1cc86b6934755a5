"""Reference for contract_axis_twice.msh: plain matrix products."""
import numpy as np
from e2e_lib import F32


def inputs():
    rng = np.random.default_rng(13)
    return {"x.npy": rng.normal(size=(4, 8)).astype(np.float32),
            "y.npy": rng.normal(size=(8, 4)).astype(np.float32),
            "u.npy": np.arange(16, dtype=np.float32).reshape(8, 2),
            "v.npy": (np.arange(8).reshape(4, 2) % 3).astype(np.float32)}


def expected(inp):
    x = inp["x.npy"].astype(np.float64)
    y = inp["y.npy"].astype(np.float64)
    u = inp["u.npy"].astype(np.float64)
    v = inp["v.npy"].astype(np.float64)
    return {"s.npy": F32(np.einsum("ij,kj->", u, v) * 2.0), "xy.npy": F32(x @ y), "c.npy": F32(x @ y), "ab.npy": F32(x @ y), "e.npy": F32((x @ y).T)}
