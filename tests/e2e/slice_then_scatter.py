"""Reference for slice_then_scatter.msh: local slice, then reduce_scatter."""
import numpy as np
from e2e_lib import F32

COMM = ["inserted local_slice over model", "inserted reduce_scatter sum over data"]


def inputs():
    rng = np.random.default_rng(11)
    return {"l.npy": rng.normal(size=(8, 6)).astype(np.float32),
            "r.npy": rng.normal(size=(4, 6)).astype(np.float32)}


def expected(inp):
    l = inp["l.npy"].astype(np.float64)
    r = inp["r.npy"].astype(np.float64)
    return {"p.npy": F32(l @ r.T), "s.npy": F32(2 * (l @ r.T))}
