"""Reference for struct_load.msh."""
import numpy as np
from e2e_lib import F32


def inputs():
    rng = np.random.default_rng(17)
    return {"w1.npy": rng.normal(size=(4, 8)).astype(np.float32),
            "w2.npy": rng.normal(size=(8, 4)).astype(np.float32),
            "b.npy": rng.normal(size=(8,)).astype(np.float32),
            "x.npy": rng.normal(size=(2, 4)).astype(np.float32)}


def expected(inp):
    a = {k: v.astype(np.float64) for k, v in inp.items()}
    x, w1, w2, b = a["x.npy"], a["w1.npy"], a["w2.npy"], a["b.npy"]
    return {"y.npy": F32(x @ w1 @ w2), "z.npy": F32(x @ w1 + b), "u.npy": F32(x @ (np.ones((4, 8)) * 0.5) + b)}
