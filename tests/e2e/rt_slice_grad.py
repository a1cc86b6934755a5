"""Reference for rt_slice_grad.msh: gradients through slices with run-time starts (and a
run-time seed), and a run-time slice of a split dim (gathered first)."""
import numpy as np
from e2e_lib import F32, random_uniform

COMM = ["inserted all_gather over data", "inserted all_gather over model", "local_slice over data"]
ARGV = ["--shift=1"]
W = (np.arange(64, dtype=np.float32).reshape(16, 4) * 0.25 - 3.0).astype(np.float32)


def inputs():
    return {"w.npy": W}


def expected(inp):
    w = W.astype(np.float64)
    g = np.zeros((16, 4))
    for k in range(3):
        s = k * 5 + 1
        r = random_uniform(s * 3 + 1, [4, 4]).astype(np.float32).astype(np.float64)
        g[s:s + 4] += 2.0 * w[s:s + 4] * r
    g2 = np.zeros((16, 4))
    for i in range(3):
        s = i * 4 + 1
        g2[s:s + 3] += 2.0 * w[s:s + 3] * (i + 1)
    return {"g.npy": F32(g, rtol=1e-5, atol=1e-6), "g2.npy": F32(g2, rtol=1e-5, atol=1e-6), "cols.npy": F32(w[:, 1:3], rtol=0, atol=0)}
