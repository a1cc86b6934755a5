"""Reference for rt_minibatch.msh: minibatch SGD with run-time window starts, per-step
seeds and program arguments (set by ARGV), and its run-time failures."""
import numpy as np
from e2e_lib import F32, BadCase, random_normal

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["inserted all_reduce sum over model"]
ARGV = ["--steps=6", "--lr=0.05", "--seed=77", "--verbose=true"]
HELP = ["--steps=INT", "an i64 argument (default 3)", "--lr=FLOAT", "an f32 argument (default 0.1)",
        "--verbose=BOOL", "--x=PATH", "a file name argument (default x.npy)", "--out=PATH", "--comm=sim"]
RNG = np.random.default_rng(5)
X = RNG.standard_normal((32, 8)).astype(np.float32)
Y = RNG.standard_normal((32, 4)).astype(np.float32)


def inputs():
    return {"x.npy": X, "y.npy": Y}


def train(steps, lr, seed, offset=0):
    x, y = X.astype(np.float64), Y.astype(np.float64)
    w = np.zeros((8, 4))
    total, lines = 0.0, []
    for step in range(steps):
        s = offset + (step * 8) % 32
        xb = x[s:s + 8]
        yb = y[s:s + 8] + 0.01 * random_normal(seed + step, [8, 4]).astype(np.float32).astype(np.float64)
        d = xb @ w - yb
        l = (d * d).mean()
        g = 2.0 * xb.T @ d / d.size
        w = w - lr * g
        total += l
        lines.append(["step", step, "start", s, "loss", l])
    return w, total, lines


def expected(inp):
    w, total, lines = train(6, 0.05, 77)
    return {"w0.npy": F32(np.zeros((8, 4))), "w.npy": F32(w, rtol=1e-4, atol=1e-5),
            "stdout": lines + [["steps", 6, "loss", total]]}


FILES = {"x.npy": X, "y.npy": Y}
BAD_CASES = [
    # --offset=4: the window of step 3 starts at 28 > 32 - 8.
    BadCase("start out of range", FILES, ["rt_minibatch.msh:25:18", "slice start 28 is out of range", "0..24"],
            argv=["--steps=4", "--offset=4"], keeps=["w0.npy"]),
    BadCase("negative start", FILES, ["rt_minibatch.msh:25:18", "slice start -1"], argv=["--offset=-1"], keeps=["w0.npy"]),
    BadCase("malformed int", FILES, ["--steps wants an i64, not 'x3'"], argv=["--steps=x3"], status=2),
    BadCase("malformed float", FILES, ["--lr wants an f32, not '0.1.2'"], argv=["--lr=0.1.2"], status=2),
    BadCase("malformed bool", FILES, ["--verbose wants a bool"], argv=["--verbose=yes"], status=2),
    BadCase("missing value", FILES, ["--seed wants a value: --seed=INT"], argv=["--seed"], status=2),
    BadCase("unknown argument", FILES, ["unknown option '--stepz=3'"], argv=["--stepz=3"], status=2),
    BadCase("path argument", {"y.npy": Y}, ["load other.npy"], argv=["--x=other.npy"]),
]
