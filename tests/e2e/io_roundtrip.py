"""Reference for io_roundtrip.msh: load/save of every dtype and rank."""
import numpy as np
from e2e_lib import F32, F64, I32, I64, BOOL

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted local_slice over data", "inserted all_reduce sum over data, model"]


def inputs():
    rng = np.random.default_rng(43)
    a = rng.normal(size=(4, 8)).astype(np.float32)
    return {
        "a.npy": a,
        "b.npy": rng.normal(size=(8, 2, 4)),
        "c.npy": rng.integers(-2 ** 31, 2 ** 31 - 1, size=(16,)).astype(np.int32),
        "d.npy": np.array([[2 ** 40, -3, 0, 7], [-(2 ** 62), 5, 6, 2 ** 62]], dtype=np.int64),
        "e.npy": rng.random(size=(8, 4)) < 0.5,
        "s.npy": np.array(1.25, dtype=np.float32),
        "sub/a.npy": (a + 1.0).astype(np.float32),
    }


def expected(inp):
    a = inp["a.npy"].astype(np.float64)
    exact = dict(rtol=0.0, atol=0.0)
    return {
        "a_out.npy": F32(a, **exact),
        "b_out.npy": F64(inp["b.npy"], **exact),
        "c_out.npy": I32(inp["c.npy"]),
        "d_out.npy": I64(inp["d.npy"]),
        "e_out.npy": BOOL(inp["e.npy"]),
        "s_out.npy": F32(np.array(2.5), **exact),
        "sub_out.npy": F32(inp["sub/a.npy"].astype(np.float64) - a),
        "mixed.npy": F32(inp["c.npy"].astype(np.float32).astype(np.float64) * 0.5, **exact),
        "mask.npy": I64(inp["e.npy"].astype(np.int64)),
        "rank0.npy": F32(np.array(a.sum())),
        "a2.npy": F32(a * 3.0),
        "stdout": [["reloaded", True, "s", 1.25]],
    }
