"""Reference for move_reshape.msh: two-axis moves and a reshape keeping a split."""
import numpy as np
from e2e_lib import F32

COMM = ["inserted make_partial over model", "inserted reduce_scatter sum over model", "inserted all_to_all over model",
        "inserted all_to_all over data", "inserted all_gather over model"]
NO_COMM = ["inserted all_gather over data"]  # the reshape keeps `data`


def inputs():
    rng = np.random.default_rng(8)
    return {"x.npy": rng.normal(size=(8, 12)).astype(np.float32),
            "r.npy": rng.normal(size=(8, 6)).astype(np.float32)}


def expected(inp):
    x = inp["x.npy"].astype(np.float64)
    r = inp["r.npy"].astype(np.float64)
    col = np.broadcast_to(np.arange(12, dtype=np.float64), (8, 12))
    return {"y.npy": F32(x), "z.npy": F32(2 * x), "q.npy": F32(r.reshape(4, 12)),
            "g.npy": F32(2 * x + col),
            "stdout": [["moved", np.sum(x * x) + np.sum(x * col)]]}
