"""Shared reference helpers for the end-to-end tests (python3 stdlib + numpy).

Every test program tests/e2e/NAME.msh has a reference module tests/e2e/NAME.py that
imports what it needs from here. A reference module defines:

    RTOL, ATOL          default tolerances of its float outputs (optional; f32 default
                        rtol 1e-4, atol 1e-5)
    COMM                optional: collectives/coercions `meshc explain` must list, as
                        strings "KIND" or "KIND over AXES" (e.g. "all_reduce over model",
                        "local_slice", "make_partial"); checked before building
    inputs()            optional: dict file name -> numpy array (or bytes) written into
                        the run directory before the program runs
    expected(inputs)    dict: output file name -> Expect / numpy array, and the key
                        "stdout" -> list of expected lines (each a list of items, below)
    BAD_CASES           optional (bad-input tests): list of BadCase; then the program
                        must fail in every case, see run_e2e.py

Expected printed lines: a line is a list of items, matched left to right against the
printed line (items separated by one space):
    "text"              literal text (may contain spaces)
    int / np.integer    an integer, exact
    bool                true / false
    float               a number printed with %.6g, compared with the tolerance
    np.ndarray          a tensor: nested list for <= 64 elements, else the summary
                        "<f32[a, b] sum=... min=... max=...>" (dtype checked via Expect)
    Expect(...)         any of the above with its own tolerance / dtype
"""

import math
import struct

import numpy as np

# ----------------------------------------------------------------------------- Philox

PHILOX_M0 = np.uint64(0xD2511F53)
PHILOX_M1 = np.uint64(0xCD9E8D57)
PHILOX_W0 = np.uint32(0x9E3779B9)
PHILOX_W1 = np.uint32(0xBB67AE85)
_MASK32 = np.uint64(0xFFFFFFFF)
_SH32 = np.uint64(32)


def philox4x32_10(counter, key):
    """Philox4x32-10 (Salmon et al. 2011, as in Random123), vectorised.

    counter: uint32 array of shape (4, N) (or a 4-sequence); key: two uint32 words.
    Returns a uint32 array of shape (4, N)."""
    c = np.asarray(counter, dtype=np.uint32)
    squeeze = c.ndim == 1
    if squeeze:
        c = c.reshape(4, 1)
    x0, x1, x2, x3 = (c[i].copy() for i in range(4))
    k0 = np.uint32(key[0])
    k1 = np.uint32(key[1])
    with np.errstate(over="ignore"):
        for rnd in range(10):
            if rnd > 0:
                k0 = np.uint32((int(k0) + int(PHILOX_W0)) & 0xFFFFFFFF)
                k1 = np.uint32((int(k1) + int(PHILOX_W1)) & 0xFFFFFFFF)
            p0 = PHILOX_M0 * x0.astype(np.uint64)
            p1 = PHILOX_M1 * x2.astype(np.uint64)
            hi0 = (p0 >> _SH32).astype(np.uint32)
            lo0 = (p0 & _MASK32).astype(np.uint32)
            hi1 = (p1 >> _SH32).astype(np.uint32)
            lo1 = (p1 & _MASK32).astype(np.uint32)
            x0, x1, x2, x3 = hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0
    out = np.stack([x0, x1, x2, x3])
    return out[:, 0] if squeeze else out


# Random123's known-answer vectors for philox4x32_10 (kat_vectors): (counter, key, result).
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox_self_test():
    """Returns a list of failure messages (empty when every known answer matches)."""
    bad = []
    for ctr, key, want in PHILOX_KAT:
        got = tuple(int(v) for v in philox4x32_10(np.array(ctr, dtype=np.uint32), key))
        if got != want:
            bad.append("philox4x32_10(ctr=%s, key=%s) = %s, want %s" % (
                " ".join("%08x" % v for v in ctr), " ".join("%08x" % v for v in key),
                " ".join("%08x" % v for v in got), " ".join("%08x" % v for v in want)))
    return bad


def _philox_words(seed, n):
    seed &= 0xFFFFFFFFFFFFFFFF
    key = (seed & 0xFFFFFFFF, seed >> 32)
    i = np.arange(n, dtype=np.uint64)
    ctr = np.zeros((4, n), dtype=np.uint32)
    ctr[0] = (i & _MASK32).astype(np.uint32)
    ctr[1] = (i >> _SH32).astype(np.uint32)
    return philox4x32_10(ctr, key)


_DT = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


def random_uniform(seed, shape, dtype="f32"):
    """meshrt_random(MESHRT_UNIFORM): (x0 >> 8) * 2^-24, computed in double, rounded to
    dtype; returned as float64 holding the dtype-rounded values."""
    n = int(np.prod(shape, dtype=np.int64))
    w = _philox_words(seed, n)
    u = (w[0] >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
    return u.astype(_DT[dtype]).astype(np.float64).reshape(shape)


def random_normal(seed, shape, dtype="f32"):
    """meshrt_random(MESHRT_NORMAL): Box-Muller on x0, x1 (see meshrt.h), in double."""
    n = int(np.prod(shape, dtype=np.int64))
    w = _philox_words(seed, n)
    u1 = ((w[0] >> np.uint32(8)).astype(np.float64) + 1.0) * 2.0 ** -24
    u2 = (w[1] >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
    z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)
    return z.astype(_DT[dtype]).astype(np.float64).reshape(shape)


def permutation(seed, n):
    """meshrt_permutation: 0..n-1 sorted by the key (x0 << 32 | x1) of Philox at counter
    i, ties by index (an int64 array)."""
    w = _philox_words(seed, n)
    key = (w[0].astype(np.uint64) << np.uint64(32)) | w[1].astype(np.uint64)
    return np.lexsort((np.arange(n), key)).astype(np.int64)


# ----------------------------------------------------------------------------- math

def f32(x):
    """Round to f32 (values the program holds in f32), returned as float64."""
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


def bf16(x):
    """Round float64 values to bfloat16 (round to nearest even), returned as float64."""
    a = np.asarray(x, dtype=np.float32)
    b = a.view(np.uint32).astype(np.uint64)
    rounding = ((b >> np.uint64(16)) & np.uint64(1)) + np.uint64(0x7FFF)
    r = ((b + rounding) >> np.uint64(16)) << np.uint64(16)
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def relu(x):
    return np.maximum(x, 0.0)


def gelu_tanh(x):
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    docs/language.md ("Execution") defines `gelu` as this tanh approximation,
    which the suite uses (as GPT-2 / jax.nn.gelu's default)."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    """Exact GELU x * Phi(x) (for diagnosing which definition the back end uses)."""
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(np.asarray(x) / math.sqrt(2.0)))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def floordiv(a, b):
    """Integer `/` of the language: NumPy floor division."""
    return np.floor_divide(a, b)


def mod(a, b):
    """`%` of the language (integers and floats): sign of the divisor, like NumPy."""
    return np.mod(a, b)


def trunc_cast(x, dtype):
    """float -> int cast: truncation toward zero (C semantics)."""
    return np.trunc(x).astype(dtype)


# ----------------------------------------------------------------------------- expectations

class Expect:
    """An expected output value with its own tolerance and element type.

    value: the reference (any numpy array or scalar, computed in float64 for floats).
    dtype: the element type the program must produce ("f32", "f64", "i32", "i64",
           "bool"); for saved files it is checked exactly, for printed tensors against
           the summary's dtype when the summary form is printed.
    rtol, atol: tolerance (None: the test's default; integers and bools are exact).
    alternatives: {label: array}; on a mismatch the report says which one matches
           (e.g. the erf GELU when the tanh GELU was expected)."""

    def __init__(self, value, dtype=None, rtol=None, atol=None, alternatives=None):
        self.value = value
        self.alternatives = alternatives or {}
        self.dtype = dtype
        self.rtol = rtol
        self.atol = atol

    def __repr__(self):
        return "Expect(%r, dtype=%r, rtol=%r, atol=%r)" % (self.value, self.dtype, self.rtol, self.atol)


def F32(value, rtol=None, atol=None, alternatives=None):
    return Expect(np.asarray(value, dtype=np.float64), "f32", rtol, atol, alternatives)


def F64(value, rtol=None, atol=None, alternatives=None):
    return Expect(np.asarray(value, dtype=np.float64), "f64", rtol, atol, alternatives)


def I32(value):
    return Expect(np.asarray(value).astype(np.int32), "i32")


def I64(value):
    return Expect(np.asarray(value).astype(np.int64), "i64")


def BOOL(value):
    return Expect(np.asarray(value).astype(np.bool_), "bool")


class BadCase:
    """A run that must fail: `files` (name -> numpy array, or bytes written verbatim;
    a name mapped to None is not written, i.e. missing) are written into the run
    directory; the program must exit non-zero, its stderr must contain every string of
    `stderr` (case-sensitive), and afterwards the run directory must hold exactly the
    files written (no output, no temporary file), plus the files of `keeps` (output
    the program saved before it failed, which must be complete and stay). `argv`: program
    arguments for this run (`--steps=-1`); `status`: the exit status wanted (2 for a bad
    command line; checked on the simulated mesh)."""

    def __init__(self, name, files, stderr, argv=(), status=None, keeps=()):
        self.name = name
        self.files = files
        self.stderr = list(stderr)
        self.argv = list(argv)
        self.status = status
        self.keeps = list(keeps)


# ----------------------------------------------------------------------------- .npy

NPY_DESCR = {"f32": "<f4", "f64": "<f8", "i32": "<i4", "i64": "<i8", "bool": "|b1"}


def npy_bytes(arr, descr=None, shape=None, fortran=False, truncate=None):
    """Hand-made .npy (version 1.0) bytes: lets a test write headers that lie."""
    a = np.ascontiguousarray(arr)
    descr = descr or a.dtype.str
    shape = tuple(a.shape) if shape is None else tuple(shape)
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (
        descr, "True" if fortran else "False",
        "(%s)" % ("".join("%d, " % s for s in shape)) if len(shape) != 1 else "(%d,)" % shape[0])
    total = 10 + len(header) + 1
    pad = (64 - total % 64) % 64
    header = header + " " * pad + "\n"
    data = b"\x93NUMPY" + bytes([1, 0]) + struct.pack("<H", len(header)) + header.encode("latin1")
    data += a.tobytes()
    if truncate is not None:
        data = data[:truncate]
    return data



# ----------------------------------------------------------------------------- .safetensors

ST_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
             "BOOL": np.bool_, "F16": np.float16}
ST_NAMES = {np.dtype(v).str: k for k, v in ST_DTYPES.items()}


def safetensors_bytes(tensors, dtypes=None, shapes=None, truncate=None, header=None):
    """Hand-made .safetensors bytes from {name: array} (in order): an 8-byte little-endian
    header length, the JSON header, the data. `dtypes`/`shapes` ({name: ...}) make the
    header lie; `truncate` cuts the file to that many bytes; `header` replaces the JSON."""
    import json
    meta, data, off = {}, b"", 0
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr)
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        meta[name] = {"dtype": (dtypes or {}).get(name, ST_NAMES[a.dtype.str]),
                      "shape": list((shapes or {}).get(name, a.shape)),
                      "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    text = (header if header is not None else json.dumps(meta)).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    out = struct.pack("<Q", len(text)) + text + data
    return out if truncate is None else out[:truncate]


def read_safetensors(path):
    """{name: array} of a .safetensors file (the names in file order); raises on a
    malformed file."""
    import json
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    head = json.loads(raw[8:8 + n].decode())
    out = {}
    base = 8 + n
    for name, e in head.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        if e["dtype"] == "BF16":
            bits = np.frombuffer(raw[base + b:base + end], dtype="<u2").astype(np.uint32) << 16
            out[name] = bits.view(np.float32).reshape(e["shape"])
            continue
        dt = np.dtype(ST_DTYPES[e["dtype"]]).newbyteorder("<")
        a = np.frombuffer(raw[base + b:base + end], dtype=dt)
        if a.size != int(np.prod(e["shape"], dtype=np.int64)):
            raise ValueError("tensor %s: %d elements for shape %s" % (name, a.size, e["shape"]))
        out[name] = a.reshape(e["shape"]).astype(dt.newbyteorder("="))
    return out


def numgrad(f, x, h=1e-6):
    """Central finite differences of the scalar float64 function f at x (any shape):
    the independent reference for gradients too tedious to derive by hand."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    flat, gflat = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + h
        up = f(x)
        flat[i] = old - h
        down = f(x)
        flat[i] = old
        gflat[i] = (up - down) / (2.0 * h)
    return g
