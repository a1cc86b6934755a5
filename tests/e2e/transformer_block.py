"""Reference for transformer_block.msh (examples/transformer_block.msh): two
pre-layernorm transformer blocks (causal multi-head attention, GELU MLP)."""
import numpy as np
from e2e_lib import F32, random_normal, gelu_tanh, gelu_erf, softmax

COMM = ["inserted all_reduce sum over model"]
RTOL, ATOL = 2e-4, 2e-5


def layer_norm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + 1e-5) * g + b


def block(x, p, mask, scale, gelu):
    h_in = layer_norm(x, p["ln1_g"], p["ln1_b"])
    q = np.einsum("bsd,dhk->bshk", h_in, p["wq"])
    k = np.einsum("bsd,dhk->bshk", h_in, p["wk"])
    v = np.einsum("bsd,dhk->bshk", h_in, p["wv"])
    scores = np.einsum("bqhk,bshk->bhqs", q, k) * scale
    probs = softmax(np.where(mask, scores, -1e9), axis=-1)
    ctx = np.einsum("bhqs,bshk->bqhk", probs, v)
    h = x + np.einsum("bshk,hkd->bsd", ctx, p["wo"])
    f_in = layer_norm(h, p["ln2_g"], p["ln2_b"])
    return h + gelu(f_in @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def params(base):
    return {
        "ln1_g": np.ones(32), "ln1_b": np.zeros(32),
        "wq": random_normal(base + 1, [32, 4, 8]) * 0.18,
        "wk": random_normal(base + 2, [32, 4, 8]) * 0.18,
        "wv": random_normal(base + 3, [32, 4, 8]) * 0.18,
        "wo": random_normal(base + 4, [4, 8, 32]) * 0.18,
        "ln2_g": np.ones(32), "ln2_b": np.zeros(32),
        "w1": random_normal(base + 5, [32, 128]) * 0.18, "b1": np.zeros(128),
        "w2": random_normal(base + 6, [128, 32]) * 0.09, "b2": np.zeros(32),
    }


def forward(gelu):
    x = random_normal(1, [8, 8, 32])
    mask = np.arange(8)[:, None] >= np.arange(8)[None, :]
    scale = float(np.float32(0.35355339))
    h1 = block(x, params(10), mask, scale, gelu)
    y = block(h1, params(20), mask, scale, gelu)
    return h1, y


def expected(inputs):
    h1, y = forward(gelu_tanh)
    _, y_erf = forward(gelu_erf)
    return {
        "transformer_block_out.npy": F32(y, alternatives={"the exact erf GELU": y_erf}),
        "stdout": [
            ["layer 1: mean", F32(h1.mean(), atol=1e-5), "mean square", (h1 * h1).mean()],
            ["layer 2: mean", F32(y.mean(), atol=1e-5), "mean square", (y * y).mean()],
        ],
    }
