"""Reference for broadcast.msh: NumPy broadcasting on sharded operands."""
import numpy as np
from e2e_lib import F32, I32, I64, BOOL


def inputs():
    rng = np.random.default_rng(101)
    f = lambda *sh: rng.normal(0.0, 1.5, size=sh).astype(np.float32)
    return {
        "a.npy": f(4, 1, 8), "b.npy": f(3, 1), "c.npy": f(8),
        "s.npy": np.array(1.75, dtype=np.float32), "e.npy": f(1, 1),
        "m.npy": f(8, 8), "r.npy": f(8, 1),
        "i.npy": rng.integers(-20, 20, size=(4, 1)).astype(np.int64),
        "j.npy": np.array([3, -4, 6], dtype=np.int64),
        "k.npy": rng.integers(-9, 9, size=(1, 6)).astype(np.int32),
        "x.npy": f(4, 6, 8),
    }


def expected(inp):
    g = {k[:-4]: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in inp.items()}
    a, b, c, s, e, m, r, x = (g[n] for n in "a b c s e m r x".split())
    i, j, k = g["i"], g["j"], g["k"].astype(np.int64)
    return {
        "ab.npy": F32(a + b),
        "ba.npy": F32(b - a),
        "ac.npy": F32(a * c),
        "abc.npy": F32(a + b * c),
        "sa.npy": F32(s / (a * a + 1.0)),
        "as.npy": F32(a - s),
        "ec.npy": F32(e + c),
        "scalar_left.npy": F32(2.0 - a * 0.5),
        "mr.npy": F32(m * r),
        "mc.npy": F32(m - c),
        "rc.npy": F32(r + c),
        "ij.npy": I64(i * 10 + j),
        "ij_div.npy": I64(np.floor_divide(i - 5, j + 1)),
        "ij_mod.npy": I64(np.mod(i - 5, j - 2)),
        "ki.npy": I32(k - 3),
        "cmp.npy": BOOL(a > b),
        "cmp_s.npy": BOOL(s <= c),
        "sel.npy": F32(np.where(b > 0, a, c)),
        "sel2.npy": F32(np.where(c > 0, s, e)),
        "mx.npy": F32(np.maximum(a, b) + np.minimum(c, s)),
        "bias.npy": F32(x + c),
        "xa.npy": F32(x * a + c * s),
        "y.npy": F32((a + b) * 2.0),
        "stdout": [["rank0 ops", 3.5, float((e + s).sum()), F32((a + b).sum(), atol=1e-4)]],
    }
