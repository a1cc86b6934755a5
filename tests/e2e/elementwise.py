"""Reference for elementwise.msh: unary math built-ins, max/min/select, on f32 inputs."""
import numpy as np
from e2e_lib import F32, f32, sigmoid, relu, gelu_tanh, gelu_erf

# Written to exercise these collectives; at these sizes the whole-function search would
# gather some operands instead (cheaper under the cost model): see run_e2e.py, PLAN_SEARCH.
PLAN_SEARCH = 0
COMM = ["all_reduce sum over data, model", "all_reduce max over data, model"]


def inputs():
    rng = np.random.default_rng(11)
    x = rng.normal(0.0, 1.5, size=(8, 16)).astype(np.float32)
    x[0, :4] = [0.0, -0.0, 3.0, -3.0]
    p = rng.uniform(0.05, 4.0, size=(8, 16)).astype(np.float32)
    y = rng.normal(0.0, 1.0, size=(8, 16)).astype(np.float32)
    y[0, 0] = 0.0
    return {"x.npy": x, "p.npy": p, "y.npy": y}


def expected(inp):
    x, p, y = (inp[k].astype(np.float64) for k in ("x.npy", "p.npy", "y.npy"))
    chain = np.exp(-np.abs(x)) + np.log(p) * np.sqrt(p) - 1.0 / np.sqrt(p) + np.tanh(x) * sigmoid(y) \
        + relu(x) - gelu_tanh(y)
    return {
        "exp.npy": F32(np.exp(x)),
        "log.npy": F32(np.log(p)),
        "sqrt.npy": F32(np.sqrt(p)),
        "rsqrt.npy": F32(1.0 / np.sqrt(p)),
        "tanh.npy": F32(np.tanh(x)),
        "sigmoid.npy": F32(sigmoid(x)),
        "relu.npy": F32(relu(x)),
        # docs/language.md defines gelu as the tanh approximation; so does this suite.
        "gelu.npy": F32(gelu_tanh(x), alternatives={"the exact erf GELU": gelu_erf(x)}),
        "abs.npy": F32(np.abs(x)),
        "neg.npy": F32(-x),
        "max.npy": F32(np.maximum(x, y)),
        "min.npy": F32(np.minimum(x, y)),
        "clamp.npy": F32(np.clip(x, -0.5, 0.5)),
        "select.npy": F32(np.where(x > y, x, f32(y * 2.0))),
        "select_scalar.npy": F32(np.where(x >= 0.0, 1.0, -1.0) * p),
        "stdout": [["chain sum", F32(chain.sum(), atol=1e-3), "max", chain.max()]],
    }
