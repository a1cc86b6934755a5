"""Reference for lookup.msh: embedding and one_hot."""
import numpy as np
from e2e_lib import F32

COMM = ["inserted all_reduce sum over model", "local_slice over model"]


def inputs():
    rng = np.random.default_rng(13)
    return {
        "table.npy": rng.normal(size=(16, 8)).astype(np.float32),
        "ids.npy": np.array([3, 0, 15, 7, 7, 12, 1, 8], dtype=np.int64),
        "ids2.npy": rng.integers(0, 16, size=(4, 6)).astype(np.int32),
        "classes.npy": np.array([0, 5, 6, -1, 2, 2, 100, 3, 4, 1], dtype=np.int64),
    }


def hot(ids, n):
    return (np.asarray(ids)[..., None] == np.arange(n)).astype(np.float64)


def expected(inp):
    table = inp["table.npy"].astype(np.float64)
    ids, ids2, classes = inp["ids.npy"], inp["ids2.npy"], inp["classes.npy"]
    exact = dict(rtol=0.0, atol=0.0)
    return {
        "emb_vocab.npy": F32(table[ids], **exact),
        "emb_wide.npy": F32(table[ids], **exact),
        "emb_2d.npy": F32(table[ids2], **exact),
        "hot.npy": F32(hot(ids, 16), **exact),
        "hot32.npy": F32(hot(ids2, 16), **exact),
        "hot_out.npy": F32(hot(classes, 6), **exact),
        "stdout": [
            ["embedding == one_hot @ table:", 0.0],
            ["rows", table[ids[:2]]],
        ],
    }
