"""Reference for mesh3x5.msh: a 3x5 mesh and a 2x3 mesh."""
import numpy as np
from e2e_lib import F32, gelu_tanh, softmax, log_softmax

RTOL, ATOL = 2e-4, 2e-5
# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce sum over data, model", "inserted all_reduce max over model"]


def inputs():
    rng = np.random.default_rng(15)
    f = lambda *sh, s=1.0: (rng.normal(size=sh) * s).astype(np.float32)
    return {"s.npy": f(3, 2, 5), "w1.npy": f(5, 10, s=0.4), "b1.npy": f(10), "w2.npy": f(10, 5, s=0.4),
            "b2.npy": f(5), "wq.npy": f(5, 5, 2, s=0.5), "wk.npy": f(5, 5, 2, s=0.5),
            "wv.npy": f(5, 5, 2, s=0.5), "wo.npy": f(5, 2, 5, s=0.5),
            "mask.npy": np.array([[True, False], [True, True]]),
            "logits.npy": f(6, 15), "labels.npy": np.array([0, 14, 7, 3, 3, 10], dtype=np.int64),
            "x.npy": f(15, 10)}


def expected(inp):
    d = {k: v.astype(np.float64) for k, v in inp.items() if v.dtype == np.float32}
    s = d["s.npy"]
    mlp = gelu_tanh(s @ d["w1.npy"] + d["b1.npy"]) @ d["w2.npy"] + d["b2.npy"]
    q = np.einsum("bsd,dhk->bshk", s, d["wq.npy"])
    k = np.einsum("bsd,dhk->bshk", s, d["wk.npy"])
    v = np.einsum("bsd,dhk->bshk", s, d["wv.npy"])
    sc = np.where(inp["mask.npy"], np.einsum("bqhk,bshk->bhqs", q, k) * 0.5, -1e9)
    att = np.einsum("bshk,hkd->bsd", np.einsum("bhqs,bshk->bqhk", softmax(sc, axis=-1), v), d["wo.npy"])
    ce = -log_softmax(d["logits.npy"], axis=1)[np.arange(6), inp["labels.npy"]].mean()
    x = d["x.npy"]
    return {"mlp.npy": F32(mlp), "attn.npy": F32(att), "moved.npy": F32(np.zeros_like(x)),
            "sc.npy": F32((x * x).sum(axis=0)), "handoff.npy": F32(x * 3.0),
            "stdout": [["ce", ce, ce], ["handoff", F32(x.sum() * 3.0, atol=1e-4), (x * 3.0).max(axis=0)]]}
