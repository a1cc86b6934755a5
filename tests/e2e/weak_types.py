"""Reference for weak_types.msh: weak literals and creations take their context's type."""
import numpy as np
from e2e_lib import F32, F64, I32, I64, random_normal

EX = dict(rtol=1e-14, atol=0.0)


def inputs():
    rng = np.random.default_rng(7)
    return {
        "d.npy": rng.normal(0.0, 3.0, size=(4, 8)),
        "k.npy": rng.integers(-50, 50, size=(4, 8)).astype(np.int32),
        "q.npy": rng.integers(-5, 5, size=(8,)).astype(np.int64),
        "v.npy": rng.normal(0.0, 1.0, size=(8,)),
    }


def expected(inp):
    d, k, q, v = inp["d.npy"], inp["k.npy"].astype(np.int64), inp["q.npy"], inp["v.npy"]
    col = np.arange(8)
    return {
        "d_tenth.npy": F64(d * 0.1, **EX),
        "d_ones.npy": F64(d + 0.1, **EX),
        "d_full.npy": F64(d - 0.3, **EX),
        "d_let.npy": F64(d + 0.1, **EX),
        "k_iota.npy": I32(k + col * 3),
        "q_big.npy": I64(q * 3000000000 + col),
        "k_div.npy": I32(np.floor_divide(k, 3) - np.mod(k, -4)),
        "rn64.npy": F64(random_normal(9, (4, 8), "f64"), **EX),
        "f32.npy": F32(np.full((4, 8), 1.5), rtol=0.0, atol=0.0),
        "v_scaled.npy": F64(v * 0.1 + v * (1.0 / 3.0), **EX),
        "v_big.npy": F64(v * 1.0e300 * 1.0e-300, **EX),
        "v_third.npy": F64(v + 1.0 / 3.0, **EX),
        "stdout": [["f64 scalars", 0.1 + 0.2, 1.0 / 3.0]],
    }
