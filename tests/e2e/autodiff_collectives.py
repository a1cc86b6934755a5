"""Reference for autodiff_collectives.msh: gradients by central finite differences of
float64 NumPy forward passes (and the losses themselves)."""
import numpy as np
from e2e_lib import F32, log_softmax, numgrad, softmax

COMM = ["written all_to_all over model", "inserted all_reduce max over model", "inserted all_gather over data",
        "inserted all_reduce sum over data, model", "inserted make_partial over model"]
RTOL, ATOL = 1e-3, 1e-5


def inputs():
    rng = np.random.default_rng(67)
    f = np.float32
    return {
        "w.npy": (rng.normal(size=(8, 16)) * 0.5).astype(f),
        "x.npy": rng.normal(size=(8, 8)).astype(f),
        "labels.npy": np.array([1, 15, 4, 4, 0, 9, 12, 7], dtype=np.int64),
        "xs.npy": rng.normal(size=(4, 8)).astype(f),
        "c.npy": rng.normal(size=(4, 8)).astype(f),
        "table.npy": rng.normal(size=(16, 4)).astype(f),
        "ids.npy": np.array([3, 3, 0, 15, 8, 7, 11, 2], dtype=np.int64),
        "t.npy": rng.normal(size=(8, 4)).astype(f),
        "xa.npy": (rng.uniform(0.1, 1.0, size=(4, 8)) * rng.choice([-1.0, 1.0], size=(4, 8))).astype(f),
    }


def expected(inp):
    d = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in inp.items()}
    x, labels = d["x.npy"], d["labels.npy"]

    def vocab(w):
        return -log_softmax(x @ w, axis=1)[np.arange(8), labels].mean()

    def moved(xs):
        return (softmax(xs * 2.0, axis=0) * d["c.npy"]).sum() + (xs * xs).mean()

    def lookup(table):
        e = table[d["ids.npy"]] - d["t.npy"]
        return (e ** 3).sum() * 0.1

    def shaped(xa):
        r = xa.T.reshape(4, 8)
        s = np.concatenate([r, r * r], axis=0)[:, 2:7]
        return np.where(s > 0, np.maximum(s, 0) * 2.0, s * 0.5).sum() + xa.max() * 3.0

    w, xs, table, xa = d["w.npy"], d["xs.npy"], d["table.npy"], d["xa.npy"]
    return {
        "g_vocab.npy": F32(numgrad(vocab, w)),
        "g_moved.npy": F32(numgrad(moved, xs)),
        "g_lookup.npy": F32(numgrad(lookup, table)),
        "g_shaped.npy": F32(numgrad(shaped, xa)),
        "stdout": [["losses", vocab(w), moved(xs), lookup(table), shaped(xa)]],
    }
