"""Reference for loops.msh: loops and ifs carrying structs and tuples."""
import numpy as np
from e2e_lib import F32


def inputs():
    rng = np.random.default_rng(51)
    f = lambda *sh: rng.normal(0.0, 1.0, size=sh).astype(np.float32)
    return {"x0.npy": f(8), "y0.npy": f(16), "a.npy": f(4, 8), "b.npy": f(4, 8)}


def run(x0, n, dt=0.1):
    x, v, t = x0.copy(), np.zeros_like(x0), 0.0
    for _ in range(n):
        v = v - x * dt
        x = x + v * dt
        t += dt
    return x, v, t


def expected(inp):
    x0, y0, a, b = (inp[n].astype(np.float64) for n in ("x0.npy", "y0.npy", "a.npy", "b.npy"))
    sx, sv, st = run(x0, 10)
    rx, _, rt = run(y0, 7)
    p, q = a, a * 0.5
    for _ in range(6):
        p, q = q, p + q * 0.5
    if a.sum() > b.sum():
        chosen, dt = a - b, 1.0
    else:
        chosen, dt = b - a, -1.0
    stv = sv - sx * dt
    stx = sx + stv * dt
    c = a if b.max() > 0 else b
    w = np.ones((4, 8))
    for i in range(4):
        w = w * b if i % 2 == 1 else w + a
    acc, cnt = 0.0, 0
    for i in range(5):
        for j in range(i):
            acc += a.mean() * j
            cnt += 1
    return {
        "sx.npy": F32(sx), "sv.npy": F32(sv), "rx.npy": F32(rx),
        "f0.npy": F32(p), "f1.npy": F32(q), "chosen.npy": F32(chosen), "st.npy": F32(stx),
        "c.npy": F32(c * 2.0), "w.npy": F32(w),
        "stdout": [["t", st, rt], ["acc", F32(acc, atol=1e-5), "cnt", cnt]],
    }
