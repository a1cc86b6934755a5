"""Reference for int_mean.msh: integer mean = floor(sum / count), independent of the mesh."""
import numpy as np
from e2e_lib import Expect, I32, I64


def tdiv(a, b):
    return np.trunc(np.asarray(a) / b).astype(np.int64)


def M(dtype, a, b):
    return Expect(np.floor_divide(a, b).astype(dtype), "i64" if dtype == np.int64 else "i32",
                  alternatives={"truncated toward zero": tdiv(a, b)})


def inputs():
    rng = np.random.default_rng(121)
    return {"n.npy": np.arange(8, dtype=np.int64),
            "m.npy": rng.integers(-100, 100, size=(4, 8)).astype(np.int32)}


def expected(inp):
    n, m = inp["n.npy"], inp["m.npy"].astype(np.int64)
    return {
        "n_mean.npy": M(np.int64, n.sum(), 8),
        "m_mean0.npy": M(np.int32, m.sum(axis=0), 4),
        "m_mean1.npy": M(np.int32, m.sum(axis=1), 8),
        "stdout": [["means", int(n.sum() // 8), int(m.sum() // 32)]],
    }
