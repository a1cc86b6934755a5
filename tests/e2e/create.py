"""Reference for create.msh: the create built-ins and random numbers (Philox4x32-10)."""
import numpy as np
from e2e_lib import F32, F64, I32, I64, BOOL, random_normal, random_uniform

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["all_reduce max over data, model"]


def expected(inputs):
    ru = random_uniform(-3, [16, 8])
    big = random_normal(0, [40, 50])
    return {
        "z.npy": F32(np.zeros([4, 8])),
        "zi.npy": I32(np.zeros([8])),
        "o.npy": F64(np.ones([4, 8])),
        "f.npy": F32(np.full([8, 4], 2.5)),
        "fi.npy": F32(np.full([3], 7.0)),
        "it.npy": I64(np.broadcast_to(np.arange(8), [4, 8])),
        "itf.npy": F32(np.broadcast_to(np.arange(8.0)[:, None], [8, 6])),
        "it32.npy": I32(np.broadcast_to(np.arange(4), [2, 3, 4])),
        # Random values must match bit for bit up to the f32 rounding of a double.
        "rn.npy": F32(random_normal(7, [16, 8]), rtol=1e-6, atol=1e-7),
        "ru.npy": F32(ru, rtol=1e-6, atol=1e-7),
        "rn3.npy": F32(random_normal(123456789012, [2, 4, 8]), rtol=1e-6, atol=1e-7),
        "big.npy": F32(big, rtol=1e-6, atol=1e-7),
        "flags.npy": BOOL(np.arange(8) % 3 == 0),
        "stdout": [
            ["same values in any layout:", 0.0],
            ["mean of 2000 normals", big.mean(), "uniform range", ru.max() < 1.0, -(-ru).max() >= 0.0],
        ],
    }
