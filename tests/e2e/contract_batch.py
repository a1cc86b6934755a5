"""Reference for contract_batch.msh: batch-broadcast matmul and einsum forms."""
import numpy as np
from e2e_lib import F32, softmax


def inputs():
    rng = np.random.default_rng(41)
    f = lambda *sh: rng.normal(0.0, 1.0, size=sh).astype(np.float32)
    return {"a4.npy": f(2, 1, 4, 8), "b3.npy": f(4, 8, 6), "a1.npy": f(1, 4, 8),
            "bs.npy": f(2, 8, 6), "v8.npy": f(8), "c3.npy": f(2, 4, 8), "p.npy": f(8, 16),
            "r.npy": f(16, 4), "q.npy": f(2, 4, 3, 5), "k.npy": f(2, 4, 3, 5), "v.npy": f(2, 4, 3, 5)}


def expected(inp):
    g = {k[:-4]: v.astype(np.float64) for k, v in inp.items()}
    a4, b3, a1, bs, v8, c3, p, r, q, k, v = (g[n] for n in "a4 b3 a1 bs v8 c3 p r q k v".split())
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * 0.5
    att = np.einsum("bhqk,bhkd->bqhd", softmax(s, axis=-1), v)
    return {
        "bb43.npy": F32(a4 @ b3),
        "bb13.npy": F32(a1 @ bs),
        "bm.npy": F32(c3 @ v8[:, None]),
        "chain.npy": F32(c3 @ bs @ bs.transpose(0, 2, 1)),
        "pr.npy": F32(p @ r),
        "pr_split.npy": F32(p @ r),
        "attn.npy": F32(att),
        "dot.npy": F32(np.einsum("ij,ij->", p, p)),
        "tr.npy": F32(np.einsum("bij->jbi", c3)),
        "colsum.npy": F32(p.sum(axis=0)),
        "outer.npy": F32(np.einsum("bi,bj->bij", c3.sum(axis=1), bs.sum(axis=1))),
        "perm.npy": F32(np.einsum("bsk,bkh->hbs", c3, bs)),
        "stdout": [["dot", (v8 * v8).sum(), (v8 * v8).sum()]],
    }
