"""Reference for if_stmt.msh: if/else statements ending a loop body and main."""
import numpy as np
from e2e_lib import F32


def inputs():
    return {"a.npy": np.random.default_rng(61).normal(0.0, 1.0, size=(4, 8)).astype(np.float32)}


def expected(inp):
    a = inp["a.npy"].astype(np.float64)
    w = a.copy()
    for i in range(4):
        w = w * 0.5 if i % 2 == 1 else w + a
    return {"w.npy": F32(w), "stdout": [["positive" if w.sum() > 0 else "not positive"]]}
