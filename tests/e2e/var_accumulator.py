"""Reference for var_accumulator.msh: loop accumulators started from literals."""
import numpy as np

COMM = ["inserted all_reduce sum over data, model"]


def inputs():
    rng = np.random.default_rng(77)
    return {"x.npy": rng.normal(size=(8, 4)).astype(np.float32)}


def expected(inp):
    x = inp["x.npy"].astype(np.float64)
    acc = 1.5 + sum(np.sum(x * i) for i in range(4))
    sq = 4 * 0.5 * np.sum(x * x)
    return {"stdout": [["acc", acc, "sq", sq]]}
