"""Reference for grad_comm.msh: finite differences of float64 forward passes."""
import numpy as np
from e2e_lib import F32, numgrad, softmax, log_softmax, sigmoid

RTOL, ATOL = 2e-3, 2e-5


def inputs():
    rng = np.random.default_rng(99)
    f = lambda *sh: rng.normal(size=sh).astype(np.float32)
    return {"w.npy": f(8, 16), "x.npy": f(4, 8), "c.npy": f(4, 16),
            "t.npy": rng.uniform(0, 1, size=(4, 16)).astype(np.float32),
            "s.npy": f(8, 8), "c8.npy": f(8, 8), "r.npy": f(8, 4)}


def l_gather(w, x, c):
    return (np.tanh(x @ w) * c).mean()


def l_scatter(a, w, t):
    return -(log_softmax(a @ w, axis=1) * t).sum()


def l_a2a(x, c):
    return (x * c).max(axis=1).sum() + sigmoid(x).mean()


def l_reduce(x):
    return np.sqrt((x * x).sum(axis=0) + 1.0).sum() + np.where(x > 0, x, x * x * 0.3).mean()


def l_reshard(x, c):
    return (softmax(x, axis=0) * c).sum() + ((x * x).mean(axis=0) * x.mean(axis=1)).sum()


def expected(inp):
    d = {k: v.astype(np.float64) for k, v in inp.items()}
    w, x, c, t, s, c8, r = (d[k + ".npy"] for k in ("w", "x", "c", "t", "s", "c8", "r"))
    return {
        "g_gather.npy": F32(numgrad(lambda v: l_gather(v, x, c), w)),
        "g_scatter.npy": F32(numgrad(lambda v: l_scatter(v, w, t), x)),
        "g_a2a.npy": F32(numgrad(lambda v: l_a2a(v, c8), s)),
        "g_reduce.npy": F32(numgrad(l_reduce, r)),
        "g_reshard.npy": F32(numgrad(lambda v: l_reshard(v, c8), s)),
        "stdout": [["losses", l_gather(w, x, c), l_scatter(x, w, t), l_a2a(s, c8), l_reduce(r),
                    l_reshard(s, c8)]],
    }
