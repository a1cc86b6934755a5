"""Reference for mlp_reduce_scatter.msh (examples/mlp_reduce_scatter.msh)."""
from e2e_lib import F32
from section11 import mlp_reference

COMM = ["inserted reduce_scatter sum over model"]


def expected(inputs):
    y = mlp_reference()
    return {"y_scattered.npy": F32(y), "stdout": [["sum", F32(y.sum(), atol=1e-4)]]}
