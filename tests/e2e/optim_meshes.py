"""Reference for optim_meshes.msh: Adam on two meshes."""
import numpy as np
from e2e_lib import F32


def inputs():
    rng = np.random.default_rng(77)
    f = lambda *sh: rng.normal(size=sh).astype(np.float32)
    return {"a.npy": f(6, 4), "ta.npy": f(6, 4), "b.npy": f(12, 2), "tb.npy": f(12, 2)}


def adam(p, t, n, lr):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    b1t = b2t = 1.0
    for _ in range(n):
        g = p * 2.0 - t
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + (1 - 0.999) * g * g
        b1t *= 0.9
        b2t *= 0.999
        p = p - lr * (m / (1 - b1t)) / (np.sqrt(v / (1 - b2t)) + 1e-8)
    return p, m, v


def expected(inp):
    d = {k: v.astype(np.float64) for k, v in inp.items()}
    pa, _, va = adam(d["a.npy"], d["ta.npy"], 3, 0.05)
    pb, mb, _ = adam(d["b.npy"], d["tb.npy"], 3, 0.05)
    return {"pa.npy": F32(pa, rtol=1e-3, atol=1e-4), "va.npy": F32(va),
            "pb.npy": F32(pb, rtol=1e-3, atol=1e-4), "mb.npy": F32(mb),
            "stdout": [["bias", 0.9 ** 3, 0.999 ** 3]]}
