"""Reference for struct_open_mesh.msh: struct literals placed by their first use."""
import numpy as np
from e2e_lib import F32

COMM = []


def inputs():
    return {"x.npy": np.random.default_rng(5).normal(size=(8, 16)).astype(np.float32)}


def expected(inp):
    x = inp["x.npy"].astype(np.float64)
    pa = x @ np.full((16, 32), 0.5) + np.arange(32)
    qb = x @ np.full((16, 32), 0.25)
    return {"pa.npy": F32(pa), "qb.npy": F32(qb), "s.npy": F32(np.arange(6.0))}
