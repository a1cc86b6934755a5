"""Reference for stdlib_all.msh: std.nn and std.optim against float64 NumPy."""
import math
import numpy as np
from e2e_lib import F32, gelu_tanh, gelu_erf, softmax, log_softmax

RTOL, ATOL = 2e-4, 2e-5


def inputs():
    rng = np.random.default_rng(2024)
    f = lambda *sh, s=1.0: (rng.normal(size=sh) * s).astype(np.float32)
    return {
        "x.npy": f(8, 12), "w.npy": f(12, 6, s=0.3), "b.npy": f(6),
        "s.npy": f(4, 3, 8), "w1.npy": f(8, 16, s=0.3), "b1.npy": f(16),
        "w2.npy": f(16, 8, s=0.3), "b2.npy": f(8),
        "g.npy": rng.uniform(0.5, 1.5, size=(8,)).astype(np.float32),
        "wq.npy": f(8, 4, 2, s=0.4), "wk.npy": f(8, 4, 2, s=0.4), "wv.npy": f(8, 4, 2, s=0.4),
        "wo.npy": f(4, 2, 8, s=0.4),
        "mask.npy": np.tril(np.ones((3, 3), dtype=np.bool_)),
        "logits.npy": f(8, 16),
        "labels.npy": np.array([3, 0, 15, 7, 7, 2, 11, 9], dtype=np.int64),
        "p0.npy": f(8, 4), "t.npy": f(8, 4),
    }


def expected(inp):
    d = {k: v.astype(np.float64) if v.dtype != np.bool_ and v.dtype != np.int64 else v
         for k, v in inp.items()}
    x, w, b = d["x.npy"], d["w.npy"], d["b.npy"]
    s, w1, b1, w2, b2, g = d["s.npy"], d["w1.npy"], d["b1.npy"], d["w2.npy"], d["b2.npy"], d["g.npy"]
    cp = s @ w1 + b1
    row = cp @ w2 + b2
    mlp = gelu_tanh(cp) @ w2 + b2
    mlp_erf = gelu_erf(cp) @ w2 + b2
    mu = s.mean(axis=2, keepdims=True)
    xc = s - mu
    ln = xc / np.sqrt((xc * xc).mean(axis=2, keepdims=True) + 1e-5) * g + b2
    rms = s / np.sqrt((s * s).mean(axis=2, keepdims=True) + 1e-6) * g
    q = np.einsum("bsd,dhk->bshk", s, d["wq.npy"])
    k = np.einsum("bsd,dhk->bshk", s, d["wk.npy"])
    v = np.einsum("bsd,dhk->bshk", s, d["wv.npy"])
    sc = np.einsum("bqhk,bshk->bhqs", q, k) * (1.0 / math.sqrt(2.0))
    sc = np.where(inp["mask.npy"], sc, -1e9)
    pr = softmax(sc, axis=-1)
    ctx = np.einsum("bhqs,bshk->bqhk", pr, v)
    att = np.einsum("bshk,hkd->bsd", ctx, d["wo.npy"])
    logits, labels = d["logits.npy"], inp["labels.npy"]
    ce = -log_softmax(logits, axis=1)[np.arange(8), labels].mean()

    p0, t = d["p0.npy"], d["t.npy"]
    p = p0.copy()
    q_ = p0.copy()
    for _ in range(3):
        p = p - 0.1 * (p * 2.0 - t)
        q_ = q_ - 0.05 * (q_ * 2.0 - t)
    a = p0.copy()
    m = np.zeros_like(a)
    vv = np.zeros_like(a)
    b1t = b2t = 1.0
    for _ in range(4):
        gg = a * 2.0 - t
        m = 0.9 * m + 0.1 * gg
        vv = 0.999 * vv + (1 - 0.999) * gg * gg
        b1t *= 0.9
        b2t *= 0.999
        a = a - 0.01 * (m / (1 - b1t)) / (np.sqrt(vv / (1 - b2t)) + 1e-8)
    # Trees (fields a..e of Tree), momentum and AdamW with clipping and warm-up cosine.
    def tree_of(x):
        return {"a": x, "b": x * 0.5, "c": -x, "d": x.sum(axis=0), "e": np.float64(0.25)}

    def gnorm(tr):
        return math.sqrt(sum(float(np.sum(np.square(v))) for v in tr.values()))

    def warmup_cosine(step, warmup, total, peak, floor):
        if step < warmup:
            return peak * min((step + 1) / max(warmup, 1), 1.0)
        progress = min(max((step - warmup) / max(total - warmup, 1), 0.0), 1.0)
        return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    target = tree_of(t)
    mp, mv = tree_of(p0), {k: 0.0 * v for k, v in tree_of(p0).items()}
    wp = tree_of(p0)
    wm = {k: 0.0 * v for k, v in wp.items()}
    wv = {k: 0.0 * v for k, v in wp.items()}
    b1t = b2t = 1.0
    for i in range(4):
        for k in mp:
            mv[k] = 0.9 * mv[k] + (mp[k] - target[k])
            mp[k] = mp[k] - 0.1 * mv[k]
        g = {k: wp[k] - target[k] for k in wp}
        scale = min(1.0, 2.0 / (gnorm(g) + 1e-6))
        g = {k: v * scale for k, v in g.items()}
        lr = warmup_cosine(i, 2, 4, 0.05, 0.005)
        b1t *= 0.9
        b2t *= 0.999
        for k in wp:
            wm[k] = 0.9 * wm[k] + 0.1 * g[k]
            wv[k] = 0.999 * wv[k] + 0.001 * g[k] * g[k]
            wp[k] = wp[k] - lr * ((wm[k] / (1 - b1t)) / (np.sqrt(wv[k] / (1 - b2t)) + 1e-8) + 0.1 * wp[k])
    adamw = {}
    for k in wp:
        adamw["0." + k] = F32(np.asarray(wp[k]), rtol=1e-3, atol=1e-4)
    for k in wp:
        adamw["1.m." + k] = F32(np.asarray(wm[k]))
    for k in wp:
        adamw["1.v." + k] = F32(np.asarray(wv[k]))
    adamw["1.b1t"] = F32(np.asarray(b1t))
    adamw["1.b2t"] = F32(np.asarray(b2t))
    ones_norm = math.sqrt(32 * 3 + 4 + 1)
    return {
        "momentum.safetensors": {k: F32(np.asarray(v)) for k, v in mp.items()},
        "adamw.safetensors": adamw,
        "adamw_state.safetensors": {k[2:]: v for k, v in adamw.items() if k.startswith("1.")},
        "linear.npy": F32(x @ w + b),
        "column.npy": F32(cp),
        "row.npy": F32(row),
        "mlp.npy": F32(mlp, alternatives={"erf gelu": mlp_erf}),
        "layernorm.npy": F32(ln),
        "rmsnorm.npy": F32(rms),
        "attention.npy": F32(att),
        "sgd.npy": F32(p),
        "sgd_sharded.npy": F32(q_),
        "adam.npy": F32(a, rtol=1e-3, atol=1e-4),
        "adam_m.npy": F32(m),
        "adam_v.npy": F32(vv),
        "stdout": [["ce", ce, ce], ["adam", 0.9 ** 4, 0.999 ** 4],
                   ["reloaded", 0.9 ** 4, 0.0],
                   ["norm", gnorm(target), ones_norm],
                   ["schedules", 0.5, 0.25, warmup_cosine(3, 1, 5, 1.0, 0.0)]],
    }
