"""Reference for grad_partial.msh (analytic gradients)."""
import numpy as np
from e2e_lib import F32


def inputs():
    rng = np.random.default_rng(3)
    return {"v.npy": rng.normal(size=8).astype(np.float32), "c.npy": rng.normal(size=8).astype(np.float32),
            "m.npy": rng.normal(size=(8, 4)).astype(np.float32)}


def expected(inp):
    v, c, m = (inp[k].astype(np.float64) for k in ("v.npy", "c.npy", "m.npy"))
    pv = m.sum(axis=1)
    return {"g_param.npy": F32(0.5 * np.exp(v * 0.5) * c),
            "g_param2.npy": F32(0.5 * np.exp(pv * 0.5) * c),
            "g_result.npy": F32(m),
            "stdout": [["loss", (m * m * 0.5).sum(), (np.exp(v * 0.5) * c).sum()]]}
