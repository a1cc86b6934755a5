"""Reference for autodiff.msh: gradients by finite differences of float64 NumPy models."""
import numpy as np
from e2e_lib import F32, F64, numgrad, log_softmax

RTOL, ATOL = 2e-3, 2e-5


def inputs():
    rng = np.random.default_rng(71)
    f = lambda *sh: rng.normal(0.0, 0.7, size=sh).astype(np.float32)
    return {"x.npy": f(8, 4), "y.npy": rng.integers(0, 3, size=(8,)).astype(np.int64),
            "w1.npy": f(4, 8), "b1.npy": f(8), "w2.npy": f(8, 3), "b2.npy": f(1, 3),
            "xd.npy": rng.normal(0.0, 0.5, size=(6, 4)), "wd.npy": rng.normal(0.0, 0.5, size=(4, 8)),
            "bd.npy": rng.normal(0.0, 0.5, size=(8,)),
            "a.npy": f(2, 4, 8), "bs.npy": f(8)}


def xent(w1, b1, w2, b2, x, y):
    h = np.maximum(x @ w1 + b1, 0.0)
    lg = h @ w2 + b2
    return -np.mean(log_softmax(lg, axis=1)[np.arange(len(y)), y])


def expected(inp):
    g = {k[:-4]: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in inp.items()}
    x, y, w1, b1, w2, b2 = (g[n] for n in "x y w1 b1 w2 b2".split())
    xd, wd, bd, a, bs = (g[n] for n in "xd wd bd a bs".split())

    def grads(w1, b1, w2, b2):
        return (numgrad(lambda v: xent(v, b1, w2, b2, x, y), w1),
                numgrad(lambda v: xent(w1, v, w2, b2, x, y), b1),
                numgrad(lambda v: xent(w1, b1, v, b2, x, y), w2),
                numgrad(lambda v: xent(w1, b1, w2, v, x, y), b2))

    gw1, gb1, gw2, gb2 = grads(w1, b1, w2, b2)

    def tl(w, b):
        z = np.tanh(xd @ w + b)
        return (z * z).sum() + 0.5 * (w * w).sum()

    def sl(b):
        z = 1.0 / (1.0 + np.exp(-(a + b)))
        return (z * a).mean()

    q = [w1, b1, w2, b2]
    losses = []
    for step in range(3):
        losses.append(xent(*q, x, y))
        gq = grads(*q)
        q = [p - 0.5 * d for p, d in zip(q, gq)]
    return {
        "g_w1.npy": F32(gw1), "g_b1.npy": F32(gb1), "g_w2.npy": F32(gw2), "g_b2.npy": F32(gb2),
        "g_wd.npy": F64(numgrad(lambda v: tl(v, bd), wd), rtol=1e-6, atol=1e-8),
        "g_bd.npy": F64(numgrad(lambda v: tl(wd, v), bd), rtol=1e-6, atol=1e-8),
        "g_bs.npy": F32(numgrad(sl, bs)),
        "q_b2.npy": F32(q[3]), "q_w1.npy": F32(q[0]),
        "stdout": [["step", i, "loss", F32(l, rtol=1e-4)] for i, l in enumerate(losses)],
    }
