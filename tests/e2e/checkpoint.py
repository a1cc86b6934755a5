"""Reference for checkpoint.msh: the gradients with and without @checkpoint, by central
finite differences of a float64 NumPy forward pass."""
import numpy as np
from e2e_lib import F32, gelu_tanh as gelu, numgrad

COMM = ["inserted all_reduce sum over model"]
RTOL, ATOL = 2e-3, 2e-5


def inputs():
    rng = np.random.default_rng(11)
    return {"x.npy": rng.normal(size=(8, 8)).astype(np.float32),
            "w1.npy": (rng.normal(size=(8, 16)) * 0.3).astype(np.float32),
            "w2.npy": (rng.normal(size=(16, 8)) * 0.3).astype(np.float32),
            "v1.npy": (rng.normal(size=(8, 16)) * 0.3).astype(np.float32),
            "v2.npy": (rng.normal(size=(16, 8)) * 0.3).astype(np.float32)}


def forward(x, w1, w2, v1, v2):
    h = gelu(x @ w1) @ w2 + x
    h = gelu(h @ v1) @ v2 + h
    return (h * h).mean()


def expected(inp):
    a = {k: v.astype(np.float64) for k, v in inp.items()}
    x, w1, w2, v1, v2 = a["x.npy"], a["w1.npy"], a["w2.npy"], a["v1.npy"], a["v2.npy"]
    g1 = F32(numgrad(lambda w: forward(x, w, w2, v1, v2), w1))
    g2 = F32(numgrad(lambda w: forward(x, w1, w, v1, v2), w2))
    return {"g_w1.npy": g1, "g_w2.npy": g2, "h_w1.npy": g1, "h_w2.npy": g2,
            "stdout": [["loss", forward(x, w1, w2, v1, v2)]]}
