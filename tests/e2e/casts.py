"""Reference for casts.msh: casts between every element type."""
import numpy as np
from e2e_lib import F32, F64, I32, I64, BOOL, Expect, bf16

EX = dict(rtol=0.0, atol=0.0)


def inputs():
    x = np.array([1.5, -2.5, 2.5, 3.7, -3.7, 70000.0, -1e6, 6e-8, 1e-5, 3e9, -3e9, np.nan,
                  65519.0, 65520.0, 1.00390625 * 3, -0.0], dtype=np.float32)
    d = np.array([1e19, -1e19, 2.9999999999, -7.5, 1e-300, 0.0, 123456789.123, 2.0 ** 40], dtype=np.float64)
    n = np.array([2 ** 24 + 1, -(2 ** 53) - 1, 0, 7, -3, 70000, 2 ** 62, 1], dtype=np.int64)
    k = np.array([2 ** 31 - 1, -2 ** 31, 2049, 65504, 70000, -5, 0, 1], dtype=np.int32)
    h = np.array([1.0009765625, -2.5, 65504.0, 6.1e-5, -0.0, 3.14, -70.9, 0.0], dtype=np.float16)
    t = np.array([True, False, True, True, False, False, True, False])
    return {"x.npy": x, "d.npy": d, "n.npy": n, "k.npy": k, "h.npy": h, "t.npy": t}


def sat(v, dtype):
    info = np.iinfo(dtype)
    v = np.asarray(v, dtype=np.float64)
    out = np.where(np.isnan(v), 0.0, np.trunc(v))
    out = np.clip(out, float(info.min), float(info.max))
    res = np.array([int(min(max(o, info.min), info.max)) if abs(o) < 2.0 ** 63 else (info.max if o > 0 else info.min)
                    for o in out], dtype=dtype)
    return res


def F16(v):
    return Expect(np.asarray(v).astype(np.float16).astype(np.float64), "f16", **EX)


def expected(inp):
    x, d, n, k, h, t = (inp[s + ".npy"] for s in "x d n k h t".split())
    with np.errstate(over="ignore", invalid="ignore"):
        return {
            "x_f16.npy": F16(x.astype(np.float16)),
            "x_bf16.npy": F32(bf16(x), **EX),
            "x_i32.npy": I32(sat(x, np.int32)),
            "x_i64.npy": I64(sat(x, np.int64)),
            "x_f64.npy": F64(x.astype(np.float64), **EX),
            "d_f32.npy": F32(d.astype(np.float32), **EX),
            "d_i64.npy": I64(sat(d, np.int64)),
            "d_i32.npy": I32(sat(d, np.int32)),
            "d_f16.npy": F16(d.astype(np.float16)),
            "n_f32.npy": F32(n.astype(np.float32), **EX),
            "n_f64.npy": F64(n.astype(np.float64), **EX),
            "n_bool.npy": BOOL(n != 0),
            "n_f16.npy": F16(n.astype(np.float16)),
            "k_f16.npy": F16(k.astype(np.float16)),
            "k_i64.npy": I64(k.astype(np.int64) * 4000000000),
            "k_f64.npy": F64(k.astype(np.float64) / 7.0),
            "h_f32.npy": F32(h.astype(np.float64), **EX),
            "h_i32.npy": I32(np.trunc(h.astype(np.float64)).astype(np.int32)),
            "h_bf16.npy": Expect(bf16(h.astype(np.float32)), "f32", **EX),
            "h_bool.npy": BOOL(h != 0),
            "b_f16.npy": F16(bf16(h.astype(np.float32))),
            "t_i32.npy": I32(t.astype(np.int32) * 5),
            "t_i64.npy": I64(t.astype(np.int64) - 1),
            "t_f64.npy": F64(t * 0.5, **EX),
            "t_f16.npy": F16(t.astype(np.float16)),
            "t_bf16.npy": F32(t.astype(np.float64), **EX),
            "t_t.npy": BOOL(t),
            "f_bool.npy": BOOL(d != 0),
            "stdout": [["scalars", 2, -2, 3.5, 1, False]],
        }
