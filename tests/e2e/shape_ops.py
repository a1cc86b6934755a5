"""Reference for shape_ops.msh: transpose, reshape, broadcast, concat, slice."""
import numpy as np
from e2e_lib import F32

COMM = ["inserted all_gather over data", "inserted all_gather over model"]


def inputs():
    rng = np.random.default_rng(3)
    return {
        "x.npy": rng.normal(size=(8, 12)).astype(np.float32),
        "t.npy": rng.normal(size=(4, 8, 6)).astype(np.float32),
        "y.npy": rng.normal(size=(8, 4)).astype(np.float32),
        "v.npy": rng.normal(size=(6,)).astype(np.float32),
    }


def expected(inp):
    x, t, y, v = (inp[k].astype(np.float64) for k in ("x.npy", "t.npy", "y.npy", "v.npy"))
    exact = dict(rtol=0.0, atol=0.0)
    return {
        "xt.npy": F32(x.T, **exact),
        "tt.npy": F32(t.transpose(2, 0, 1), **exact),
        "tt2.npy": F32(t.transpose(1, 2, 0) * 2.0, **exact),
        "merge.npy": F32(t.reshape(32, 6), **exact),
        "merge_keep.npy": F32(x.reshape(96), **exact),
        "factor.npy": F32(x.reshape(2, 4, 3, 4), **exact),
        "flat.npy": F32(y.reshape(32), **exact),
        "unsqueeze.npy": F32(t.sum(axis=2).reshape(4, 8, 1) + t),
        "bcast.npy": F32(np.broadcast_to(v, (5, 6)), **exact),
        "bcast3.npy": F32(np.broadcast_to(y, (3, 8, 4)), **exact),
        "cat0.npy": F32(np.concatenate([x, x * 2.0, -x], axis=0), **exact),
        "cat1.npy": F32(np.concatenate([x, x[:, 2:7]], axis=1), **exact),
        "cat_last.npy": F32(np.concatenate([t, t + 1.0], axis=-1)),
        "slice0.npy": F32(t[1:3], **exact),
        "slice1.npy": F32(t[:, 3:7, :], **exact),
        "slice2.npy": F32(y[:, 1:4], **exact),
        "stdout": [["shapes", y.T, v[:4].reshape(2, 2)]],
    }
