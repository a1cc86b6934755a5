"""Reference for arith.msh: arithmetic, comparisons, logic and casts."""
import numpy as np
from e2e_lib import F32, F64, I32, I64, BOOL, bf16

COMM = ["inserted make_partial over model", "inserted reduce_scatter sum over model", "inserted all_to_all over model", "local_slice over model",
        "local_slice over data"]


def inputs():
    rng = np.random.default_rng(5)
    a = rng.normal(0.0, 2.0, size=(8, 8)).astype(np.float32)
    a[0, :3] = [0.0, 1.5, -1.5]
    b = rng.uniform(0.5, 3.0, size=(8, 8)) * rng.choice([-1.0, 1.0], size=(8, 8))
    b = b.astype(np.float32)
    v = rng.normal(0.0, 1.0, size=(8,)).astype(np.float32)
    col = rng.normal(0.0, 1.0, size=(8, 1)).astype(np.float32)
    i = rng.integers(-50, 50, size=(8, 8)).astype(np.int64)
    i[0, :4] = [0, 7, -7, 12]
    j = rng.integers(1, 9, size=(8, 8)) * rng.choice([-1, 1], size=(8, 8))
    j[0, :4] = [3, 2, 2, -4]
    j = j.astype(np.int64)
    k = np.arange(-6, 6, dtype=np.int32) * 3
    d = rng.normal(0.0, 10.0, size=(8, 8))
    return {"a.npy": a, "b.npy": b, "v.npy": v, "col.npy": col, "i.npy": i, "j.npy": j,
            "k.npy": k, "d.npy": d}


def expected(inp):
    a32 = inp["a.npy"]
    a, b, v, col = (inp[n].astype(np.float64) for n in ("a.npy", "b.npy", "v.npy", "col.npy"))
    i, j, k, d = inp["i.npy"], inp["j.npy"], inp["k.npy"].astype(np.int64), inp["d.npy"]
    exact = dict(rtol=0.0, atol=0.0)
    return {
        "add.npy": F32(a + b),
        "sub.npy": F32(a - v),
        "mul.npy": F32(a * col),
        "div.npy": F32(a / b),
        "fmod.npy": F32(np.mod(a, b)),
        "fmod_scalar.npy": F32(np.mod(a, 0.75)),
        "neg.npy": F32(-a + 2.0 * b - 1.5),
        "poly.npy": F32((a * a - 3.0 * a) / (b * b + 1.0)),
        "iadd.npy": I64(i + j * 3 - 7),
        "idiv.npy": I64(np.floor_divide(i, j)),
        "imod.npy": I64(np.mod(i, j)),
        "ineg.npy": I64(-i),
        "k_ops.npy": I32(np.floor_divide(k * 5 - 17, 4) + np.mod(k, 3)),
        "d_ops.npy": F64(d * 0.1 + d / 3.0 - np.mod(d, 2.0)),
        "lt.npy": BOOL(a < b),
        "le.npy": BOOL(a <= v),
        "gt.npy": BOOL(i > j),
        "ge.npy": BOOL(i >= 0),
        "eq.npy": BOOL(i == j),
        "ne.npy": BOOL(a != 0.0),
        # The products are f32 operations; the cast truncates toward zero.
        "a_to_i32.npy": I32(np.trunc(a32 * np.float32(3.0))),
        "a_to_i64.npy": I64(np.trunc(a32 * np.float32(-3.0))),
        "i_to_f32.npy": F32(i / 4.0, **exact),
        "k_to_i64.npy": I64(k * 1000000000),
        "b_to_f32.npy": F32((a > 0).astype(float) + (i < j).astype(float), **exact),
        "f_to_bool.npy": BOOL(i != 0),
        "d_to_f32.npy": F32(d.astype(np.float32), **exact),
        "a_to_f64.npy": F64(a * 1.0e-3),
        "f16_round.npy": F32((a32 * np.float32(100.0)).astype(np.float16), **exact),
        "bf16_round.npy": F32(bf16(a32 * np.float32(100.0)), **exact),
        "f_to_bool2.npy": BOOL(a != 0.0),
        "bool_ops.npy": BOOL(np.logical_not((a > 0) == (b > 0)) != (i > j)),
        "select_bcast.npy": F32(np.where(v > 0, a, -a), **exact),
        "k_minmax.npy": I32(np.maximum(k, 0) + np.minimum(k, -3) * 2 + np.abs(k) + k),
        "stdout": [
            ["ints:", -4, -3, -3, 1, -17, -82],
            ["floats:", 9.0, 0.5, -0.5, 0.625],
            ["logic:", True, True, False, True, False, True, False, True, True],
        ],
    }
