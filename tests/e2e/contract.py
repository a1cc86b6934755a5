"""Reference for contract.msh: @ (2-D, vector, batched, integer, f64) and einsum."""
import numpy as np
from e2e_lib import F32, F64, I64

COMM = ["inserted all_reduce sum over model", "inserted all_gather over model"]


def inputs():
    rng = np.random.default_rng(8)
    return {
        "a.npy": rng.normal(size=(8, 16)).astype(np.float32),
        "b.npy": rng.normal(size=(16, 12)).astype(np.float32),
        "c.npy": rng.normal(size=(12, 16)).astype(np.float32),
        "v.npy": rng.normal(size=(16,)).astype(np.float32),
        "ba.npy": rng.normal(size=(4, 8, 16)).astype(np.float32),
        "bb.npy": rng.normal(size=(4, 16, 8)).astype(np.float32),
        "i.npy": rng.integers(-9, 10, size=(8, 4)).astype(np.int64),
        "j.npy": rng.integers(-9, 10, size=(4, 8)).astype(np.int64),
        "d.npy": rng.normal(size=(8, 16)),
    }


def expected(inp):
    a, b, c, v, ba, bb = (inp[k].astype(np.float64) for k in ("a.npy", "b.npy", "c.npy", "v.npy", "ba.npy", "bb.npy"))
    i, j, d = inp["i.npy"], inp["j.npy"], inp["d.npy"]
    return {
        "ab.npy": F32(a @ b),
        "ac_t.npy": F32(a @ c.T),
        "av.npy": F32(a @ v),
        "vb.npy": F32(v @ b),
        "bab.npy": F32(ba @ b),
        "babb.npy": F32(ba @ bb),
        "ij.npy": I64(i @ j),
        "dd.npy": F64(d @ d.T),
        "e_mm.npy": F32(np.einsum("ik,kj->ij", a, b)),
        "e_tt.npy": F32(np.einsum("ki,jk->ij", a.T, c)),
        "e_batch.npy": F32(np.einsum("bij,bjk->bik", ba, bb)),
        "e_bkj.npy": F32(np.einsum("bij,bkj->bik", ba, ba)),
        "e_perm.npy": F32(np.einsum("bij,jk->kbi", ba, b)),
        "e_outer.npy": F32(np.einsum("i,j->ij", v, v[:8])),
        "e_dot.npy": F32(v @ v),
        "stdout": [["dot", v @ v, "trace-like", F32(np.einsum("ij,ij->i", a, a * 0.5).sum(), atol=1e-4)]],
    }
