"""Reference for multi_axis_order.msh: every collective is the identity on the global
value, and the gradient of sum(all_to_all(z) * w) is w."""
import numpy as np
from e2e_lib import F32

COMM = ["written all_to_all over data, model", "written reduce_scatter sum over data, model"]


def inputs():
    z = (np.arange(6)[:, None] * 100.0 + np.arange(12)[None, :]).astype(np.float32)
    w = np.random.default_rng(3).normal(size=(6, 12)).astype(np.float32)
    return {"z.npy": z, "w.npy": w}


def expected(inp):
    z = inp["z.npy"].astype(np.float64)
    return {"m.npy": F32(z), "back.npy": F32(z), "q.npy": F32(z), "s.npy": F32(z),
            "g.npy": F32(inp["w.npy"].astype(np.float64))}
