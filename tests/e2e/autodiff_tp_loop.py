"""Reference for autodiff_tp_loop.msh: gradients of a looped tensor-parallel block by
central finite differences of a float64 NumPy forward pass."""
import numpy as np
from e2e_lib import F32, numgrad

COMM = ["inserted all_reduce sum over model"]
RTOL, ATOL = 2e-3, 2e-5


def inputs():
    rng = np.random.default_rng(5)
    return {"x.npy": rng.normal(size=(8, 8)).astype(np.float32),
            "w1.npy": (rng.normal(size=(8, 16)) * 0.3).astype(np.float32),
            "w2.npy": (rng.normal(size=(16, 8)) * 0.3).astype(np.float32)}


def forward(x, w1, w2):
    h = x
    for i in range(3):
        h = np.tanh(h @ w1) @ w2 + h
        if i == 2:
            h = h * 0.5
    return (h * h).mean()


def expected(inp):
    x = inp["x.npy"].astype(np.float64)
    w1 = inp["w1.npy"].astype(np.float64)
    w2 = inp["w2.npy"].astype(np.float64)
    return {"g_w1.npy": F32(numgrad(lambda w: forward(x, w, w2), w1)),
            "g_w2.npy": F32(numgrad(lambda w: forward(x, w1, w), w2)),
            "stdout": [["loss", forward(x, w1, w2)]]}
