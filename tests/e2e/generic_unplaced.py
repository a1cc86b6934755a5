"""Reference for generic_unplaced.msh (layernorm: (x - mean) / sqrt(var + eps) * g + b
over the last dim; std.nn's eps)."""
import re
import os
import numpy as np
from e2e_lib import F32


def _eps():
    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "stdlib", "std", "nn.msh")).read()
    body = text[text.index("fn layernorm"):]
    return float(re.search(r"\+ ([0-9.e-]+)", body).group(1))


def layernorm(x, g, b):
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + _eps()) * g + b


def inputs():
    return {"x.npy": np.random.default_rng(19).normal(size=(2, 4, 8)).astype(np.float32)}


def expected(inp):
    x = inp["x.npy"].astype(np.float64)
    io = np.broadcast_to(np.arange(8, dtype=np.float64), (2, 4, 8))
    return {"a.npy": F32(layernorm(x, np.ones(8), np.zeros(8))),
            "b.npy": F32(np.arange(4) * 2.0),
            "c.npy": F32(layernorm(io, np.ones(8) * 2.0, np.zeros(8)))}
