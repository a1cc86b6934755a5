"""Reference for generic_reduce.msh: named-axis reductions in generic functions."""
import numpy as np
from e2e_lib import F32, I64, softmax, log_softmax


def inputs():
    rng = np.random.default_rng(31)
    x = rng.normal(0.0, 1.5, size=(8, 16)).astype(np.float32)
    m = rng.normal(0.0, 1.0, size=(8, 16)).astype(np.float32)
    m[np.arange(8), (np.arange(8) * 3) % 16] = -np.inf
    m[2, 4:13] = -np.inf
    return {
        "x.npy": x, "m.npy": m,
        "xg.npy": rng.normal(0.0, 1.0, size=(4, 8)).astype(np.float32),
        "t.npy": rng.normal(0.0, 1.0, size=(2, 8, 8)).astype(np.float32),
        "tg.npy": rng.normal(0.0, 1.0, size=(3, 4, 6)).astype(np.float32),
        "neg.npy": (-rng.uniform(1.0, 5.0, size=(8, 8))).astype(np.float32),
        "ineg.npy": rng.integers(-1000, -1, size=(8, 8)).astype(np.int64),
    }


def lse(x):
    mx = x.max(axis=1)
    return mx + np.log(np.exp(x - mx[:, None]).sum(axis=1))


def expected(inp):
    g = {k[:-4]: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in inp.items()}
    x, m, xg, t, tg, neg, ineg = (g[n] for n in "x m xg t tg neg ineg".split())
    big = (inp["x.npy"] * np.float32(1000.0)).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "lse_x.npy": F32(lse(x)),
            "lse_big.npy": F32(lse(big)),
            "lse_g.npy": F32(lse(xg)),
            "sm_big.npy": F32(softmax(big, axis=1)),
            "lsm_big.npy": F32(log_softmax(big, axis=1), rtol=1e-5, atol=1e-3),
            "sm_mask.npy": F32(softmax(m, axis=1)),
            "lsm_mask.npy": F32(log_softmax(m, axis=1)),
            "sm_g.npy": F32(softmax(xg * 500.0, axis=1)),
            "lsm_g.npy": F32(log_softmax(xg * 500.0, axis=1), rtol=1e-5, atol=1e-3),
            "csm_big.npy": F32(softmax(big, axis=0)),
            "csm_g.npy": F32(softmax(xg, axis=0)),
            "t_sum.npy": F32(t.sum(axis=1)),
            "t_max.npy": F32(t.max(axis=2)),
            "t_mean.npy": F32(t.mean(axis=0)),
            "tg_sum.npy": F32(tg.sum(axis=1)),
            "tg_max.npy": F32(tg.max(axis=2)),
            "tg_mean.npy": F32(tg.mean(axis=0)),
            "neg_max0.npy": F32(neg.max(axis=0)),
            "neg_max1.npy": F32(neg.max(axis=1)),
            "ineg_max.npy": I64(ineg.max(axis=1)),
            "stdout": [["neg max", neg.max(), int(ineg.max()), "lse sum", F32(lse(big).sum(), rtol=1e-5)]],
        }
