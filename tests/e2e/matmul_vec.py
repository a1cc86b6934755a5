"""Reference for matmul_vec.msh: NumPy matmul with a 1-D operand against a batch."""
import numpy as np
from e2e_lib import F32


def inputs():
    rng = np.random.default_rng(42)
    f = lambda *sh: rng.normal(0.0, 1.0, size=sh).astype(np.float32)
    return {"bs.npy": f(2, 8, 6), "v8.npy": f(8), "c3.npy": f(2, 4, 8)}


def expected(inp):
    bs, v8, c3 = (inp[n].astype(np.float64) for n in ("bs.npy", "v8.npy", "c3.npy"))
    return {"vb.npy": F32(np.matmul(v8, bs)), "bv.npy": F32(np.matmul(c3, v8))}
