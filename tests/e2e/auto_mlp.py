"""Reference for auto_mlp.msh: three SGD steps of a ReLU MLP, analytic gradients."""
import numpy as np
from e2e_lib import F32


def inputs():
    rng = np.random.default_rng(211)
    return {"x.npy": rng.normal(size=(64, 16)).astype(np.float32),
            "y.npy": rng.normal(size=(64, 16)).astype(np.float32),
            "w1.npy": (rng.normal(size=(16, 32)) * 0.3).astype(np.float32),
            "w2.npy": (rng.normal(size=(32, 16)) * 0.3).astype(np.float32)}


def expected(inp):
    x, y, w1, w2 = (inp[k].astype(np.float64) for k in ("x.npy", "y.npy", "w1.npy", "w2.npy"))
    lines = []
    for step in range(3):
        a = x @ w1
        h = np.maximum(a, 0.0)
        e = h @ w2 - y
        lines.append(["step", step, "loss", (e * e).mean()])
        de = 2.0 / e.size * e
        g2 = h.T @ de
        dh = de @ w2.T
        g1 = x.T @ (dh * (a > 0))
        w1, w2 = w1 - 0.1 * g1, w2 - 0.1 * g2
    return {"w1_out.npy": F32(w1), "w2_out.npy": F32(w2), "stdout": lines}
