"""Reference for weak_int.msh: weak creations in integer contexts."""
import numpy as np
from e2e_lib import I32, I64


def inputs():
    rng = np.random.default_rng(8)
    return {"k.npy": rng.integers(-50, 50, size=(4, 8)).astype(np.int32),
            "q.npy": rng.integers(-5, 5, size=(8,)).astype(np.int64)}


def expected(inp):
    k, q = inp["k.npy"].astype(np.int64), inp["q.npy"]
    col = np.broadcast_to(np.arange(8), (4, 8))
    row = np.broadcast_to(np.arange(4)[:, None], (4, 8))
    return {
        "k_iota.npy": I32(k + col),
        "k_iota3.npy": I32(k - row * 3),
        "q_ones.npy": I64(1 + q * 2),
        "q_full.npy": I64(q * 3000000000),
        "q_z.npy": I64(q),
        "stdout": [["k", int((k + 1).sum())]],
    }
