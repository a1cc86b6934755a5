"""Reference for print_format.msh: the text `print` writes (mostly compared exactly)."""
import numpy as np
from e2e_lib import F32, I64, random_uniform

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce sum over data, model"]


def inputs():
    return {"d.npy": np.array([0.1, 0.2, 1.0 / 3.0], dtype=np.float64)}


def expected(inp):
    x = np.arange(4)[:, None] * 10.0 + np.arange(8)[None, :]
    flat = x.reshape(32)
    row = "[" + ", ".join(str(j) for j in range(8)) + "]"
    return {
        "stdout": [
            ["hello, mesh!"],
            ["ints 42 -7 1000000 9000000000 3 2"],
            ["floats 2.5 0.333333 1e+10 1.5e-07 100000 1.23457e+06 -0.125 0"],
            ["bools true false true false"],
            ["f64 0.6333333333 197.3333333 [0.1, 0.2, 0.3333333333]"],
            ["split [" + ", ".join("[" + ", ".join("%d" % v for v in r) + "]" for r in x) + "]"],
            ["int tensor [[-1, 0, 1], [-1, 0, 1]] i32 [[0, 0], [1, 1]]"],
            ["bool tensor [true, false, true, false, true]"],
            ["3-d [[[-1, -0.5]], [[0, 0.5]]]"],
            ["rank 0 592 mean 18.5"],
            ["64 [" + ", ".join([row] * 8) + "]"],
            ["65 <f32[65] sum=2080 min=0 max=64>"],
            ["big", F32(np.outer(flat, flat) * 0.001), "ints", I64(np.broadcast_to(np.arange(10)[:, None], (10, 10)))],
            ["random", F32(random_uniform(5, [40, 48]))],
            ["inf -inf inf"],
            ['strings with "quotes" and \\ backslash [not a list]'],
        ],
    }
