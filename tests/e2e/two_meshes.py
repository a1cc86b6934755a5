"""Reference for two_meshes.msh: two meshes over the same devices."""
import numpy as np
from e2e_lib import F32

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce sum over model", "inserted all_reduce max over data",
        "inserted all_reduce sum over data"]


def inputs():
    rng = np.random.default_rng(59)
    return {"x.npy": rng.normal(size=(8, 16)).astype(np.float32),
            "v.npy": rng.normal(size=(16,)).astype(np.float32)}


def expected(inp):
    x, v = inp["x.npy"].astype(np.float64), inp["v.npy"].astype(np.float64)
    r = (x * x).sum(axis=1)
    return {"r.npy": F32(r), "v2.npy": F32(v * 2.0),
            "stdout": [["pod", r.sum(), "quad", v.max(), F32(v.sum(), atol=1e-5)],
                       ["generic", r.sum() * 0.5, F32(v.sum() * 2.0, atol=2e-5)]]}
