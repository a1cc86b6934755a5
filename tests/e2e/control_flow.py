"""Reference for control_flow.msh: for / if / var / early return."""
import numpy as np
from e2e_lib import F32

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce sum over data, model", "inserted all_reduce sum over model"]


def inputs():
    rng = np.random.default_rng(37)
    x = rng.normal(size=(8, 16)).astype(np.float32)
    x = x - x.mean() + np.float32(0.2)              # sum(x) clearly positive
    v = (rng.normal(size=(16,)) + 0.3).astype(np.float32)
    v = v - v.mean() + np.float32(0.25)              # sum(v) = 4 > 0
    return {"x.npy": x.astype(np.float32), "v.npy": v.astype(np.float32)}


def expected(inp):
    x, v = inp["x.npy"].astype(np.float64), inp["v.npy"].astype(np.float64)
    total = sum(i * j for i in range(5) for j in range(i, 6))
    evens = sum(1 for i in range(5) for j in range(i, 6) if (i + j) % 2 == 0)
    h = x
    steps = []
    for step in range(3):
        h = np.tanh(h * 0.5 + x)
        if step == 1:
            h = h - h.mean()
        steps.append(["step", step, "mean square", (h * h).mean()])
    s = x.sum()
    chosen = x * 2.0 if s > 0 else -x
    other = x + 1.0 if v.sum() > 0 else x - 1.0
    if v.sum() < 0:
        clamped, swapped = np.clip(v, -0.25, 0.75), False
    else:
        clamped, swapped = v, True

    def bucket(t):
        return 0 if t < -1 else 1 if t < 0 else 2 if t < 1 else 3

    return {
        "h.npy": F32(h),
        "acc.npy": F32(6.0 * x),
        "chosen.npy": F32(chosen),
        "other.npy": F32(other),
        "clamped.npy": F32(clamped),
        "clamped2.npy": F32(np.clip(v, -0.5, 0.5)),
        "stdout": [
            ["total", total, "evens", evens],
        ] + steps + [
            ["swapped", swapped, "buckets", bucket(-2.0), bucket(-0.5), bucket(0.5), bucket(7.0)],
        ],
    }
