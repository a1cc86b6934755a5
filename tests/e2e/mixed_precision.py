"""Reference for mixed_precision.msh. Casts round (bf16/f16); the gradient of a
cast is the cotangent cast back, so gradients are analytic (finite differences of a
rounded forward pass are zero almost everywhere). Tolerances cover bf16 rounding."""
import numpy as np
from e2e_lib import F32, Expect, bf16, softmax

# The bf16 gradient of a contraction over the split batch is a pending sum of bf16
# pieces, each rounded on its device: declared and all-1 runs differ by bf16 ulps.
RTOL, ATOL = 5e-3, 1e-4


def inputs():
    rng = np.random.default_rng(16)
    f = lambda *sh, s=1.0: (rng.normal(size=sh) * s).astype(np.float32)
    return {"w.npy": f(8, 16, s=0.5), "x.npy": f(8, 8), "y.npy": f(8, 16),
            "wb.npy": f(32), "a.npy": f(8, 16, s=2.0)}


def fwd_grad(w, xb, y):
    h = bf16(xb @ bf16(w))
    e = h - y
    loss = (e * e).mean()
    dh = 2.0 * e / e.size
    g = xb.T @ bf16(dh)                  # the cotangent reaches the bf16 product as bf16
    return loss, g


def F16(v, rtol=2e-3, atol=2e-3):
    return Expect(np.asarray(v).astype(np.float16).astype(np.float64), "f16", rtol, atol)


def expected(inp):
    d = {k: v.astype(np.float64) for k, v in inp.items()}
    w, x, y, wb, a = d["w.npy"], d["x.npy"], d["y.npy"], d["wb.npy"], d["a.npy"]
    xb = bf16(x)
    _, g0 = fwd_grad(w, xb, y)
    lines = []
    for step in range(3):
        l, g = fwd_grad(w, xb, y)
        lines.append(["step", step, Expect(l, "f32", 2e-2, 1e-4)])
        w = w - 0.5 * g
    wbb = bf16(wb)
    a16 = a.astype(np.float16).astype(np.float64)
    return {
        "g0.npy": F32(g0, rtol=2e-2, atol=2e-4),
        "w.npy": F32(w, rtol=2e-2, atol=2e-3),
        "w_f16.npy": F16(w, rtol=2e-2, atol=2e-3),
        "g_b.npy": Expect(bf16(wbb + 1.0 / 32.0), "f32", 1e-2, 1e-3),
        "m16.npy": F16((a16 * a16).mean(axis=0)),
        "p16.npy": F16(softmax(a16, axis=1)),
        "stdout": lines,
    }
