"""Reference for pending_major.msh: every conversion keeps the global value."""
import numpy as np
from e2e_lib import F32


def inputs():
    return {"z.npy": np.random.default_rng(7).normal(size=(8, 4)).astype(np.float32)}


def expected(inp):
    z = inp["z.npy"].astype(np.float64)
    return {"b.npy": F32(z), "e.npy": F32(3 * z), "f.npy": F32(z), "g.npy": F32(z)}
