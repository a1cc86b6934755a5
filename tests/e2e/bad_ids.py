"""Reference for bad_ids.msh: embedding ids out of range fail the run cleanly."""
import numpy as np
from e2e_lib import F32, BadCase

COMM = ["inserted all_reduce sum over model"]
TABLE = (np.arange(64, dtype=np.float32).reshape(16, 4) - 20.0) * np.float32(0.5)
IDS = np.array([0, 15, 3, 3, 8, 9, 12, 1], dtype=np.int64)


def inputs():
    return {"table.npy": TABLE, "ids.npy": IDS}


def expected(inp):
    rows = TABLE.astype(np.float64)[IDS]
    return {"rows.npy": F32(rows, rtol=0, atol=0), "stdout": [["rows sum", float(rows.sum())]]}


BAD_CASES = [
    BadCase("id == vocab", {"table.npy": TABLE, "ids.npy": np.array([0, 1, 2, 3, 16, 5, 6, 7], np.int64)}, ["embedding", "16", "at position 4 ([4] of the ids)"]),
    BadCase("negative id", {"table.npy": TABLE, "ids.npy": np.array([0, 1, 2, 3, 4, 5, 6, -1], np.int64)}, ["embedding", "-1", "at position 7 ([7] of the ids)"]),
    BadCase("huge id", {"table.npy": TABLE, "ids.npy": np.array([2 ** 40, 1, 2, 3, 4, 5, 6, 7], np.int64)}, ["embedding", "1099511627776"]),
]
