"""Reference for generics.msh."""
import numpy as np
from e2e_lib import F32

RTOL, ATOL = 2e-4, 2e-5


def inputs():
    rng = np.random.default_rng(12)
    f = lambda *sh: rng.normal(size=sh).astype(np.float32)
    return {"x.npy": f(8, 6), "w1.npy": f(6, 8), "w2.npy": f(8, 4), "xg.npy": f(4, 6),
            "a3.npy": f(4, 3, 2), "b3.npy": f(2, 2, 4)}


def net(x, w1, w2, s):
    h = np.maximum(x @ w1 + w1.sum(axis=0) * 0.1, 0.0)
    return (h @ w2 + w2.sum(axis=0) * 0.1) * s


def mix(a, b, c):
    return (a @ b) * c


def mix2(a, b, b2):
    return mix(mix(a, b, b.sum(axis=0)), b2, b2.sum(axis=0) * 0.5)


def expected(inp):
    x, w1, w2, xg, a3, b3 = (inp[k].astype(np.float64) for k in ("x.npy", "w1.npy", "w2.npy", "xg.npy", "a3.npy", "b3.npy"))
    y = net(x, w1, w2, 0.5)
    yg = net(xg, w1, w2, 2.0)
    fa = a3.reshape(4, 6)
    fb = b3.reshape(2, 8)
    return {"y.npy": F32(y), "ys.npy": F32(y.sum(axis=1)), "yg.npy": F32(yg),
            "mix2_pod.npy": F32(mix2(x, w1, w2), rtol=1e-3, atol=1e-4),
            "mix2_grid.npy": F32(mix2(xg, w1, w2), rtol=1e-3, atol=1e-4),
            "fa.npy": F32(fa), "mix_fb.npy": F32(mix(fb, w2, w2.sum(axis=0))),
            "v1.npy": F32((fa * fa.sum(axis=0)).sum(axis=1)),
            "v2.npy": F32((x * x.sum(axis=0)).sum(axis=1)),
            "stdout": [["max", y.max(), yg.max()], ["sums", fa.sum() * 0.25, x.sum() * 2.0]]}
