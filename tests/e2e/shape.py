"""Reference for shape.msh: reshape/transpose/broadcast/concat/slice on split tensors."""
import numpy as np
from e2e_lib import F32, f32

RTOL, ATOL = 0.0, 0.0


def inputs():
    rng = np.random.default_rng(91)
    f = lambda *sh: rng.normal(0.0, 1.0, size=sh).astype(np.float32)
    return {"x.npy": f(8, 6), "y.npy": f(12, 4), "t.npy": f(2, 4, 6, 8), "z.npy": f(4, 8),
            "u.npy": f(4, 8), "r.npy": np.array(2.5, dtype=np.float32), "q.npy": f(2, 3, 16)}


def expected(inp):
    g = {k[:-4]: v.astype(np.float64) for k, v in inp.items()}
    x, y, t, z, u, r, q = (g[k] for k in "x y t z u r q".split())
    zu = (inp["z.npy"] * inp["u.npy"]).astype(np.float64)
    return {
        "fac_keep.npy": F32(x.reshape(4, 2, 6)),
        "fac_keep2.npy": F32(y.reshape(4, 3, 4)),
        "fac_gather.npy": F32(y.reshape(2, 6, 4)),
        "merge_inner.npy": F32(u.reshape(32)),
        "merge_4d.npy": F32(t.reshape(8, 48)),
        "r1.npy": F32(np.full((1, 1), 5.0)),
        "r0.npy": F32(np.array(7.5)),
        "t4.npy": F32(t.transpose(3, 1, 0, 2)),
        "bc.npy": F32(f32(np.broadcast_to(z, (3, 4, 8)) + 1.0)),
        "cat_mixed.npy": F32(np.concatenate([z, u, zu], axis=0)),
        "cat_split.npy": F32(np.concatenate([z, u], axis=-1)),
        "slice_keep.npy": F32(t[:, :, 1:5, :]),
        "slice_full.npy": F32(z),
        "slice_last.npy": F32(u[3:4]),
        "heads.npy": F32(q * 2.0),
        "stdout": [["ok", F32(t.sum(), rtol=1e-5, atol=1e-4), np.array([[2.5]])]],
    }
