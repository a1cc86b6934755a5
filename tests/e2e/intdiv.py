"""Reference for intdiv.msh: NumPy integer division and modulo corner cases."""
import numpy as np
from e2e_lib import F32, I32, I64


def inputs():
    rng = np.random.default_rng(111)
    a = rng.integers(-1000, 1000, size=(8, 8)).astype(np.int32)
    a[0, :4] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max, -7, 7]
    a[1, :4] = [np.iinfo(np.int32).min, 0, -1, 1]
    b = np.array([-1, 0, 3, -3, 7, -7, 1, 2], dtype=np.int32)
    c = rng.integers(-10 ** 15, 10 ** 15, size=(8, 8)).astype(np.int64)
    c[0, 0] = np.iinfo(np.int64).min
    c[1, 0] = np.iinfo(np.int64).min
    e = np.array([[-1], [0], [5], [-5], [1000003], [-2], [3], [-(10 ** 12)]], dtype=np.int64)
    f = rng.normal(0.0, 10.0, size=(8,)).astype(np.float32)
    f[0] = 1e10
    g = np.array([0.0, 3.0, -3.0, 0.5, -0.25, 7.0, -1.5, 2.0], dtype=np.float32)
    return {"a.npy": a, "b.npy": b, "c.npy": c, "e.npy": e, "f.npy": f, "g.npy": g}


def expected(inp):
    a, b, c, e, f, g = (inp[k + ".npy"] for k in "a b c e f g".split())
    with np.errstate(all="ignore"):
        f64 = f.astype(np.float64)
        return {
            "a_div_b.npy": I32(np.floor_divide(a, b)),
            "a_mod_b.npy": I32(np.mod(a, b)),
            "c_div_e.npy": I64(np.floor_divide(c, e)),
            "c_mod_e.npy": I64(np.mod(c, e)),
            "a_div_lit.npy": I32(np.floor_divide(a, np.int32(-3)) + np.mod(a, np.int32(-3)) * np.int32(100)),
            "f_mod_g.npy": F32(np.mod(f, g).astype(np.float64)),
            "f_mod_neg.npy": F32(np.mod(f, np.float32(-0.7)).astype(np.float64)),
            "stdout": [["scalars", -4, 1, -1, -4, 2, -1, 0, 0]],
        }
