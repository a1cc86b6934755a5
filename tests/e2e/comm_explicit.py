"""Reference for comm_explicit.msh: explicit collectives and reshard keep global values."""
import numpy as np
from e2e_lib import F32

COMM = ["written all_reduce sum over model", "written reduce_scatter sum over model",
        "written all_reduce sum over data, model", "written all_gather over model",
        "written all_gather over data",
        "written all_to_all over model", "written all_to_all over data", "written local_slice over model"]


def inputs():
    rng = np.random.default_rng(17)
    return {
        "h.npy": rng.normal(size=(8, 32)).astype(np.float32),
        "w.npy": (rng.normal(size=(32, 16)) * 0.1).astype(np.float32),
        "x.npy": rng.normal(size=(16, 8)).astype(np.float32),
        "c.npy": rng.normal(size=(8, 16)).astype(np.float32),
        "s.npy": rng.normal(size=(2, 8, 4, 8)).astype(np.float32),
    }


def expected(inp):
    h, w, x, c, s = (inp[k].astype(np.float64) for k in ("h.npy", "w.npy", "x.npy", "c.npy", "s.npy"))
    exact = dict(rtol=0.0, atol=0.0)
    return {
        "reduced.npy": F32(h @ w),
        "scattered.npy": F32(h @ w),
        "total.npy": F32(x.sum(), atol=1e-4),
        "rows.npy": F32(x, **exact),
        "blocks.npy": F32(x, **exact),
        "cols.npy": F32(x, **exact),
        "everywhere.npy": F32(x, **exact),
        "gathered.npy": F32(c, **exact),
        "gathered_data.npy": F32(c, **exact),
        "heads.npy": F32(s, **exact),
        "back.npy": F32(s, **exact),
        "stdout": [["total", F32(x.sum(), atol=1e-4), "round trip", 0.0]],
    }
