"""Reference for shuffle.msh: permutation(seed, n) (Philox keys sorted, e2e_lib) and SGD
over the minibatches of shuffled epochs."""
import numpy as np
from e2e_lib import F32, I64, permutation

ARGV = ["--seed=11", "--epochs=3"]
RNG = np.random.default_rng(8)
X = RNG.standard_normal((32, 8)).astype(np.float32)
Y = RNG.standard_normal((32, 4)).astype(np.float32)


def inputs():
    return {"x.npy": X, "y.npy": Y}


def expected(inp):
    seed, epochs = 11, 3
    x, y = X.astype(np.float64), Y.astype(np.float64)
    w = np.zeros((8, 4))
    lines = []
    for epoch in range(epochs):
        perm = permutation(seed + epoch, 32)
        for k in range(4):
            ids = perm[k * 8:(k + 1) * 8]
            xb, yb = x[ids], y[ids]
            d = xb @ w - yb
            lines.append(["epoch", epoch, "step", k, "loss", (d * d).mean()])
            w = w - 0.1 * (2.0 * xb.T @ d / d.size)
    p = permutation(seed, 32)
    assert sorted(p.tolist()) == list(range(32))
    return {"perm0.npy": I64(p), "perm1.npy": I64(permutation(seed + 1, 32)),
            "perm_const.npy": I64(permutation(7, 10)),
            "w.npy": F32(w, rtol=1e-4, atol=1e-5), "stdout": lines}
