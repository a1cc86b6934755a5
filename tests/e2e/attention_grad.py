"""Reference for attention_grad.msh: attention forward in float64 and gradients by
central finite differences."""
import numpy as np
from e2e_lib import F32, numgrad, softmax

RTOL, ATOL = 2e-3, 3e-5
# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce max over seq"]


def inputs():
    rng = np.random.default_rng(4)
    f = lambda *sh, s=1.0: (rng.normal(size=sh) * s).astype(np.float32)
    return {"x.npy": f(2, 4, 8), "t.npy": f(2, 4, 8), "wq.npy": f(8, 4, 2, s=0.5),
            "wk.npy": f(8, 4, 2, s=0.5), "wv.npy": f(8, 4, 2, s=0.5), "wo.npy": f(4, 2, 8, s=0.5),
            "full.npy": np.ones((4, 4), dtype=np.bool_),
            "causal.npy": np.tril(np.ones((4, 4), dtype=np.bool_))}


def attend(wq, wk, wv, wo, x, mask, scale):
    q = np.einsum("bsd,dhk->bshk", x, wq)
    k = np.einsum("bsd,dhk->bshk", x, wk)
    v = np.einsum("bsd,dhk->bshk", x, wv)
    sc = np.where(mask, np.einsum("bqhk,bshk->bhqs", q, k) * scale, -1e9)
    ctx = np.einsum("bhqs,bshk->bqhk", softmax(sc, axis=-1), v)
    return np.einsum("bqhk,hkd->bqd", ctx, wo)


def loss(ws, x, mask, t):
    y = x + attend(*ws, x, mask, 1.0 / np.sqrt(2.0))
    return (y * y * t).mean() + y.max(axis=2).mean()


def expected(inp):
    d = {k: v.astype(np.float64) for k, v in inp.items() if v.dtype != np.bool_}
    x, t = d["x.npy"], d["t.npy"]
    ws = [d[k] for k in ("wq.npy", "wk.npy", "wv.npy", "wo.npy")]
    full, causal = inp["full.npy"], inp["causal.npy"]
    a = attend(*ws, x, full, 0.5)
    out = {"ours.npy": F32(a), "std.npy": F32(a), "stdout": [["loss", loss(ws, x, causal, t)]]}
    for i, name in enumerate(("g_wq.npy", "g_wk.npy", "g_wv.npy", "g_wo.npy")):
        def f(w, i=i):
            w2 = list(ws)
            w2[i] = w
            return loss(w2, x, causal, t)
        out[name] = F32(numgrad(f, ws[i]))
    return out
