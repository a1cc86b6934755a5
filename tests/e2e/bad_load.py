"""Reference for bad_load.msh: a good run, and bad inputs that must fail cleanly."""
import numpy as np
from e2e_lib import F32, I64, BadCase, npy_bytes

W = (np.arange(32, dtype=np.float32).reshape(4, 8) - 10.0) * np.float32(0.25)
IDS = np.arange(8, dtype=np.int64) * 3


def inputs():
    return {"w.npy": W, "ids.npy": IDS}


def expected(inp):
    return {
        "out.npy": F32(W.astype(np.float64) * 2.0, rtol=0, atol=0),
        "ids_out.npy": I64(IDS + 1),
        "stdout": [["saved", float((W.astype(np.float64) * 2).sum())]],
    }


GOOD_IDS = npy_bytes(IDS)
BAD_CASES = [
    BadCase("wrong shape", {"w.npy": np.zeros((4, 6), np.float32), "ids.npy": IDS},
            ["w.npy", "f32[4, 8]", "f32[4, 6]"]),
    BadCase("wrong dtype", {"w.npy": np.zeros((4, 8), np.float64), "ids.npy": IDS},
            ["w.npy", "f32[4, 8]", "f64[4, 8]"]),
    BadCase("wrong rank", {"w.npy": np.zeros((32,), np.float32), "ids.npy": IDS},
            ["w.npy", "f32[4, 8]", "f32[32]"]),
    BadCase("wrong int dtype (second file)", {"w.npy": W, "ids.npy": IDS.astype(np.int32)},
            ["ids.npy", "i64[8]", "i32[8]"]),
    BadCase("truncated data", {"w.npy": npy_bytes(W, truncate=len(npy_bytes(W)) - 5), "ids.npy": IDS},
            ["w.npy"]),
    BadCase("truncated header", {"w.npy": npy_bytes(W)[:30], "ids.npy": IDS}, ["w.npy"]),
    BadCase("missing file", {"w.npy": W, "ids.npy": None}, ["ids.npy"]),
    BadCase("not a npy file", {"w.npy": b"this is not a .npy file\n" * 20, "ids.npy": IDS}, ["w.npy"]),
    BadCase("big-endian f32", {"w.npy": W.astype(">f4"), "ids.npy": IDS}, ["w.npy"]),
    BadCase("f16 file", {"w.npy": W.astype(np.float16), "ids.npy": IDS}, ["w.npy", "f32[4, 8]", "f16[4, 8]"]),
    BadCase("empty file", {"w.npy": b"", "ids.npy": IDS}, ["w.npy"]),
]
