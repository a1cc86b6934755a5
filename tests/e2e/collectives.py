"""Reference for collectives.msh: explicit collectives, every argument form."""
import numpy as np
from e2e_lib import F32, F64, I64

COMM = ["all_gather over data, model", "reduce_scatter over data, model", "reduce_scatter over model",
        "all_to_all over model", "all_reduce sum over data"]


def inputs():
    rng = np.random.default_rng(81)
    f = lambda *sh: rng.normal(0.0, 1.0, size=sh).astype(np.float32)
    return {"x.npy": f(16, 8), "c.npy": f(4, 8), "a.npy": f(4, 16), "w.npy": f(16, 8),
            "a2.npy": f(8, 16), "w2.npy": f(16, 4), "s.npy": f(8, 12),
            "n.npy": rng.integers(-10 ** 12, 10 ** 12, size=(6, 8)).astype(np.int64),
            "d.npy": rng.normal(0.0, 1.0, size=(6, 8)), "y.npy": f(16, 8)}


def expected(inp):
    g = {k[:-4]: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in inp.items()}
    x, c, a, w, a2, w2, s, n, d, y = (g[k] for k in "x c a w a2 w2 s n d y".split())
    ex = dict(rtol=0.0, atol=0.0)
    return {
        "gather_group.npy": F32(x, **ex), "gather_minor.npy": F32(x, **ex), "gather_last.npy": F32(c, **ex),
        "scatter_group.npy": F32(a @ w), "scatter_onto_split.npy": F32(a2 @ w2),
        "swap.npy": F32(s, **ex), "int_total.npy": I64(n.sum(axis=0)),
        "f64_total.npy": F64(d.sum()),
        "l1.npy": F32(y, **ex), "l2.npy": F32(y, **ex), "l3.npy": F32(y, **ex), "l4.npy": F32(y, **ex),
        "stdout": [["checks", 0.0, 0.0, int(n.sum())]],
    }
