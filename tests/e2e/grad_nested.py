"""Reference for grad_nested.msh: finite differences of float64 forward passes."""
import numpy as np
from e2e_lib import F32, numgrad, sigmoid

RTOL, ATOL = 2e-3, 3e-5


def inputs():
    rng = np.random.default_rng(31)
    f = lambda *sh, s=1.0: (rng.normal(size=sh) * s).astype(np.float32)
    return {"x.npy": f(8, 4), "w1.npy": f(4, 8, s=0.5), "b1.npy": f(8, s=0.5),
            "w2.npy": f(8, 4, s=0.5), "s.npy": f(8)}


def net_loss(w1, b1, w2, x):
    y = np.tanh(x @ w1 + b1) @ w2 - x
    return (y * y).mean()


def train(w1, b1, w2, x, steps):
    last = 0.0
    for _ in range(steps):
        last = net_loss(w1, b1, w2, x)
        g1 = numgrad(lambda v: net_loss(v, b1, w2, x), w1)
        gb = numgrad(lambda v: net_loss(w1, v, w2, x), b1)
        g2 = numgrad(lambda v: net_loss(w1, b1, v, x), w2)
        w1, b1, w2 = w1 - 0.2 * g1, b1 - 0.2 * gb, w2 - 0.2 * g2
    return w1, b1, w2, last


def expected(inp):
    d = {k: v.astype(np.float64) for k, v in inp.items()}
    x, w1, b1, w2, s = d["x.npy"], d["w1.npy"], d["b1.npy"], d["w2.npy"], d["s.npy"]
    tw1, tb1, tw2, last = train(w1, b1, w2, x, 3)
    pl = lambda w, b, s_: (sigmoid(x @ w + b) * s_).sum()
    return {"pod_w1.npy": F32(tw1), "pod_b1.npy": F32(tb1), "pod_w2.npy": F32(tw2),
            "box_w2.npy": F32(tw2),
            "gt_w.npy": F32(numgrad(lambda v: pl(v, b1, s), w1)),
            "gt_b.npy": F32(numgrad(lambda v: pl(w1, v, s), b1)),
            "gt_s.npy": F32(numgrad(lambda v: pl(w1, b1, v), s)),
            "stdout": [["last", last, last]]}
