"""Reference for weak_f16.msh: literals take f16/bf16 before the op."""
import numpy as np
from e2e_lib import Expect, F32, BOOL, bf16


def inputs():
    rng = np.random.default_rng(9)
    return {"h.npy": rng.normal(0.0, 4.0, size=(8,)).astype(np.float16),
            "x.npy": rng.normal(0.0, 4.0, size=(8,)).astype(np.float32)}


def h16(x):
    return Expect(np.asarray(x).astype(np.float16).astype(np.float64), "f16", rtol=0.0, atol=0.0)


def expected(inp):
    hf = inp["h.npy"].astype(np.float32)
    l16 = lambda v: np.float32(np.float16(v))
    b = bf16(inp["x.npy"])
    exact = dict(rtol=0.0, atol=0.0)
    return {
        "h_plus.npy": h16(hf + l16(0.1)),
        "h_mul.npy": h16(np.float16(hf * l16(3.3)).astype(np.float32) - l16(1.7)),
        "h_full.npy": h16(hf + l16(0.1)),
        "b_plus.npy": F32(bf16(b + bf16(0.01)), **exact,
                          alternatives={"literal kept in f32": bf16(b + np.float32(0.01))}),
        "t.npy": h16(np.arange(4, dtype=np.float32) * l16(0.1)),
        "t_eq.npy": BOOL(np.arange(4).astype(np.float16) * np.float16(0.1) == np.float16(0.1)),
        "t_lt.npy": BOOL(np.arange(4).astype(np.float16) * np.float16(0.1) < np.float16(0.2)),
        "b_mul.npy": F32(bf16(b * bf16(1.1)), **exact,
                         alternatives={"literal kept in f32": bf16(b * np.float32(1.1))}),
    }
