"""Reference for section11.msh (docs/language.md, "A complete example"): the Megatron MLP."""
import numpy as np
from e2e_lib import F32, random_normal

COMM = ["inserted all_reduce sum over model"]
OUTPUT = "y.npy"


def mlp_reference():
    x = random_normal(1, [8, 16])
    w1 = random_normal(2, [16, 32]) * 0.1
    w2 = random_normal(3, [32, 16]) * 0.1
    return np.maximum(x @ w1, 0.0) @ w2


def expected(inputs):
    y = mlp_reference()
    return {OUTPUT: F32(y), "stdout": [["sum", F32(y.sum(), atol=1e-4)]]}
