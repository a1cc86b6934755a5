"""Reference for call_chain.msh."""
import numpy as np
from e2e_lib import F32

RTOL, ATOL = 2e-4, 2e-5


def inputs():
    rng = np.random.default_rng(8)
    return {"x.npy": rng.normal(size=(8, 16)).astype(np.float32)}


def r2c(x):
    return x * 2.0 + 1.0


def c2b(x):
    return np.tanh(x * 0.1)


def flip(x):
    return x.T - 0.5


def expected(inp):
    x = inp["x.npy"].astype(np.float64)
    f = flip(c2b(r2c(x)))
    r = f.sum(axis=0)
    sp = r * 3.0
    e = np.exp(r * 0.1)
    e2 = np.exp(x.sum(axis=1) * 0.1)
    v = x
    for i in range(4):
        if i % 2 == 0:
            v = r2c(v) * 0.5
        else:
            v = flip(c2b(v)).T
    acc = np.zeros((8, 16))
    for i in range(3):
        acc = acc + r2c(x) * i if i == 1 else acc + c2b(x) + i
    return {"f.npy": F32(f), "sp.npy": F32(sp), "e.npy": F32(e), "e2.npy": F32(e2),
            "v.npy": F32(v), "acc.npy": F32(acc),
            "stdout": [["total", e2.sum(), sp.sum() * 2.0]]}
