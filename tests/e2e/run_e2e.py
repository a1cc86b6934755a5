#!/usr/bin/env python3
"""End-to-end tests of meshc: build Mesh programs, run them, compare with NumPy.

For each program tests/e2e/NAME.msh (reference: tests/e2e/NAME.py, see e2e_lib.py):

  1. static: `meshc check NAME.msh` must succeed, and `meshc explain NAME.msh` must list
     every collective / coercion named in the module's COMM list, and none of its
     NO_COMM list;
  2. build twice: on the declared meshes ("declared"), and with every declared mesh
     rebound to all-1 axis sizes with `--mesh NAME=axis:1,...` ("all-1");
  3. run each executable in its own empty directory, after writing the module's
     inputs() there as .npy files;
  4. compare every saved .npy file (dtype, shape, values) and every printed line with
     the module's expected() (an independent float64 NumPy reference), and the
     declared run with the all-1 run; no other file may appear in the run directory;
  5. a module with PLAN_SEARCH = N checks its COMM list and runs both builds with
     `--plan-search=N` (0: the local plans, for programs written to exercise
     particular collectives), and runs once more on the declared mesh with the
     whole-function plan search on ("searched"), checked against the reference too;
  6. bad-input tests (a module with BAD_CASES) must fail in each case with a message
     naming the file (and the expected and found types), leaving no output file.

--comm mpi (the MPI mode, ctest e2e-mpi) builds only the declared meshes and runs each
program twice: on the simulated mesh, then under OpenMPI (`mpirun ... -np N prog
--comm=mpi`, N the program's device count, from `prog --help`). The MPI run is checked
against the references too, and must be IDENTICAL to the simulated run: the same
printed bytes and bitwise the same .npy files (the MPI handler reduces floating point
in the same rank order; only a NaN's sign and payload may differ). Its bad-input cases must fail with the message naming the
device and leave no file; a run with the wrong -np must fail (status 2) with a message.

--device gpu-emulator (ctest e2e-gpu-emulator) builds every program with `meshc build
--gpu` and runs it with --device=gpu-emulator: each data-parallel loop runs as its GPU
kernel (outlined, launched through the runtime) on the host, as 7 emulated GPU threads.
With --ptxas, each program's PTX (`meshc build --emit=ptx`) must also assemble.
--device cuda does the same builds and runs them on a GPU (tests/gpu/run.sh).

grad / value_and_grad programs are listed in AUTODIFF_TESTS. They run by default and
must pass; --allow-unsupported-autodiff reports a build that says autodiff is not
supported as a loud SKIP instead (for a back end without it), --no-autodiff leaves them
out.

Usage:
  run_e2e.py [--meshc build/meshc] [--only NAME[,NAME]] [--keep] [--work DIR] [-j N]
             [--check-only] [--list] [-v] [--comm sim|mpi [--mpirun PATH]]
             [--device cpu|cuda|gpu-emulator [--ptxas PATH] [--gpu-arch sm_NN]]

Exit status: 0 all passed (skips allowed), 1 a failure, 77 nothing could be run
because meshc has no `build` sub-command yet (static checks still ran and passed), or
--comm mpi without an mpirun.
"""

import sys

sys.dont_write_bytecode = True   # the reference modules are imported from the source tree

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import time
import traceback

try:
    import numpy as np  # noqa: E402
except ImportError:
    print("run_e2e.py needs numpy for %s (pip install numpy)" % sys.executable)
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import e2e_lib  # noqa: E402
from e2e_lib import Expect, read_safetensors  # noqa: E402

# Programs that use grad / value_and_grad (an "autodiff is not supported by the back
# end" build failure is a SKIP only with --allow-unsupported-autodiff).
AUTODIFF_TESTS = ["checkpoint", "autodiff_grad", "autodiff_value_and_grad", "autodiff_collectives", "autodiff_loops", "autodiff_tp_loop",
                  "reduce_large", "autodiff", "autodiff_size_bounds", "auto_mlp"]

DEFAULT_TOL = {"f32": (1e-4, 1e-5), "f64": (1e-9, 1e-12), "f16": (1e-3, 1e-3), "bf16": (1e-2, 1e-2)}
PRINT_FORMAT_RTOL = {"f32": 6e-6, "f64": 6e-10}   # %.6g / %.10g rounding of printed floats
NPY_DTYPES = {"<f4": "f32", "<f8": "f64", "<i4": "i32", "<i8": "i64", "|b1": "bool", "<f2": "f16"}
EXIT_NO_BUILD = 77
# OpenMPI's mpirun flags for the MPI mode: allowed as root, more ranks than cores, the
# shared-memory transport without the ptrace-based single copy (refused in containers).
MPIRUN_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader",
                "--mca", "btl_vader_single_copy_mechanism", "none"]
DEVICES_RE = re.compile(r"it runs on (\d+) devices?\.")
MAX_PROBLEMS = 12          # problems listed per test without -v


# ============================================================================ utilities

class Failure(Exception):
    pass


def run_cmd(cmd, cwd=None, timeout=120):
    """Runs cmd; returns (rc, stdout, stderr, seconds). rc is None on a time-out."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
        return (p.returncode, p.stdout.decode("utf-8", "replace"),
                p.stderr.decode("utf-8", "replace"), time.time() - t0)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        err = (e.stderr or b"").decode("utf-8", "replace")
        return None, out, err, time.time() - t0


def clip(text, n=1500):
    text = text.rstrip()
    if len(text) <= n:
        return text
    return text[:n // 2] + "\n    ...\n" + text[-n // 2:]


def indent(text, prefix="      "):
    return "\n".join(prefix + line for line in text.splitlines())


def list_files(d):
    out = []
    for base, _dirs, files in os.walk(d):
        for f in files:
            out.append(os.path.relpath(os.path.join(base, f), d))
    return sorted(out)


def load_module(name, path):
    spec = importlib.util.spec_from_file_location("e2e_ref_" + name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MESH_RE = re.compile(r"^\s*mesh\s+([A-Za-z_]\w*)\s*=\s*\[(.*?)\]\s*;", re.S | re.M)
AXIS_RE = re.compile(r"([A-Za-z_]\w*)\s*:\s*\d[\d_]*")


def strip_comments(src):
    src = re.sub(r"//[^\n]*", "", src)
    # nested block comments
    out, depth, i = [], 0, 0
    while i < len(src):
        if src.startswith("/*", i):
            depth += 1
            i += 2
        elif depth and src.startswith("*/", i):
            depth -= 1
            i += 2
        else:
            if not depth:
                out.append(src[i])
            i += 1
    return "".join(out)


def declared_meshes(path):
    """[(mesh name, [axis names])] of the `mesh Name = [a: n, ...];` declarations."""
    with open(path, encoding="utf-8") as f:
        src = strip_comments(f.read())
    meshes = []
    for m in MESH_RE.finditer(src):
        body = re.sub(r"\{[^}]*\}", "", m.group(2))   # drop link properties
        meshes.append((m.group(1), AXIS_RE.findall(body)))
    return meshes


def all_ones_flags(meshes):
    flags = []
    for name, axes in meshes:
        flags += ["--mesh", "%s=%s" % (name, ",".join("%s:1" % a for a in axes))]
    return flags


# ============================================================================ explain

EXPLAIN_LINE = re.compile(
    r"^\s+(?:[^\s]+:)?(\d+):(\d+)\s+(all_reduce|all_gather|reduce_scatter|all_to_all|local_slice|make_partial)"
    r"(?: (sum|max))? over \(([^)]*)\).*?\((written|inserted)[^)]*\)?(?:\s+\[[^\]]*\])*\s*$")


def explain_ops(text):
    """[(kind, op, frozenset(axes), origin, line)] from `meshc explain` text output."""
    ops = []
    for line in text.splitlines():
        m = EXPLAIN_LINE.match(line)
        if m:
            axes = frozenset(a.strip() for a in m.group(5).split(",") if a.strip())
            ops.append((m.group(3), m.group(4), axes, m.group(6), int(m.group(1))))
    return ops


def parse_comm_spec(spec):
    """'[inserted|written] KIND [sum|max] [over A, B]' -> (origin, kind, op, axes)."""
    words = spec.replace(",", " , ").split()
    origin = None
    if words and words[0] in ("inserted", "written"):
        origin = words.pop(0)
    kind = words.pop(0)
    op = None
    if words and words[0] in ("sum", "max"):
        op = words.pop(0)
    axes = None
    if words and words[0] == "over":
        axes = frozenset(w for w in words[1:] if w != ",")
    return origin, kind, op, axes


def check_comm(specs, ops):
    missing = []
    for spec in specs:
        origin, kind, op, axes = parse_comm_spec(spec)
        if not any(k == kind and (op is None or o == op) and (axes is None or a == axes)
                   and (origin is None or g == origin) for k, o, a, g, _ in ops):
            missing.append(spec)
    return missing


# ============================================================================ comparison

def tol_for(exp, dtype, module):
    rtol, atol = DEFAULT_TOL.get(dtype, (0.0, 0.0))
    if dtype == "f32":
        rtol = getattr(module, "RTOL", rtol)
        atol = getattr(module, "ATOL", atol)
    if isinstance(exp, Expect):
        if exp.rtol is not None:
            rtol = exp.rtol
        if exp.atol is not None:
            atol = exp.atol
    return rtol, atol


def describe_mismatch(got, want, rtol, atol):
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    n = int(bad.sum())
    err = np.where(bad, np.abs(got - want), 0.0)
    err = np.where(np.isnan(err), np.inf, err)
    idx = np.unravel_index(int(np.argmax(err)), err.shape) if err.ndim else ()
    msg = "%d of %d elements differ (rtol %g, atol %g); worst at %s: got %r, want %r" % (
        n, got.size, rtol, atol, tuple(int(i) for i in idx), float(got[idx]), float(want[idx]))
    if got.size <= 16:
        msg += "\n        got  %s\n        want %s" % (
            np.array2string(got, precision=6, separator=", ").replace("\n", " "),
            np.array2string(want, precision=6, separator=", ").replace("\n", " "))
    return msg


def compare_arrays(got, want, dtype, rtol, atol, what, alternatives=None):
    """Raises Failure unless got (numpy array as loaded) matches want."""
    want = np.asarray(want)
    if tuple(got.shape) != tuple(want.shape):
        raise Failure("%s: shape %s, want %s" % (what, list(got.shape), list(want.shape)))
    if dtype in ("i32", "i64", "bool") or want.dtype.kind in "iub":
        if not np.array_equal(got.astype(np.float64), want.astype(np.float64)):
            raise Failure("%s: %s" % (what, describe_mismatch(got, want, 0.0, 0.0)))
        return
    if not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                       equal_nan=True):
        msg = "%s: %s" % (what, describe_mismatch(got, want, rtol, atol))
        for label, alt in (alternatives or {}).items():
            if np.allclose(got.astype(np.float64), np.asarray(alt, dtype=np.float64),
                           rtol=rtol, atol=atol, equal_nan=True):
                msg += "\n        (it matches %s instead)" % label
        raise Failure(msg)


def check_saved(path, exp, module, what):
    if not os.path.exists(path):
        raise Failure("%s: not written" % what)
    if path.endswith(".safetensors"):
        # A checkpoint: exp maps each tensor name to its expected value.
        try:
            got = read_safetensors(path)
        except Exception as e:  # noqa: BLE001
            raise Failure("%s: not a readable .safetensors file: %s" % (what, e))
        if list(got) != list(exp):
            raise Failure("%s: tensors %s, want %s" % (what, list(got), list(exp)))
        for name, e in exp.items():
            g = got[name]
            gdt = NPY_DTYPES.get(g.dtype.str, g.dtype.str)
            want = e.value if isinstance(e, Expect) else e
            wdt = e.dtype if isinstance(e, Expect) and e.dtype else NPY_DTYPES.get(np.asarray(want).dtype.str, "f64")
            if gdt != wdt:
                raise Failure("%s: tensor %s: dtype %s, want %s" % (what, name, gdt, wdt))
            rtol, atol = tol_for(e, wdt, module)
            compare_arrays(g, want, wdt, rtol, atol, "%s tensor %s" % (what, name))
        return got
    try:
        got = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001
        raise Failure("%s: not a readable .npy file: %s" % (what, e))
    got_dtype = NPY_DTYPES.get(got.dtype.str, got.dtype.str)
    want = exp.value if isinstance(exp, Expect) else exp
    want_dtype = exp.dtype if isinstance(exp, Expect) and exp.dtype else None
    if want_dtype is None:
        want_dtype = NPY_DTYPES.get(np.asarray(want).dtype.str, "f64")
    if got_dtype != want_dtype:
        raise Failure("%s: dtype %s (%s), want %s" % (what, got_dtype, got.dtype.str, want_dtype))
    rtol, atol = tol_for(exp, want_dtype, module)
    alts = getattr(exp, "alternatives", None) if isinstance(exp, Expect) else None
    compare_arrays(got, want, want_dtype, rtol, atol, what, alts)
    return got


# ---------------------------------------------------------------------------- printed lines

class Any_:
    """Matches any one printed token."""

    def __repr__(self):
        return "ANY"


ANY = Any_()
e2e_lib.ANY = ANY

SUMMARY_RE = re.compile(r"^<(\w+)\[([\d, ]*)\] sum=(\S+) min=(\S+) max=(\S+)>$")


def read_token(line, pos):
    """One printed token at pos: a bracketed nested list, a <summary>, or a word."""
    if pos >= len(line):
        raise Failure("line ends early")
    if line[pos] == "[":
        depth = 0
        for i in range(pos, len(line)):
            if line[i] == "[":
                depth += 1
            elif line[i] == "]":
                depth -= 1
                if depth == 0:
                    return line[pos:i + 1], i + 1
        raise Failure("unbalanced [ in %r" % line[pos:])
    if line[pos] == "<":
        end = line.find(">", pos)
        if end < 0:
            raise Failure("unterminated <...> in %r" % line[pos:])
        return line[pos:end + 1], end + 1
    end = line.find(" ", pos)
    end = len(line) if end < 0 else end
    return line[pos:end], end


def parse_number(tok):
    try:
        return float(tok)
    except ValueError:
        raise Failure("%r is not a number" % tok)


def parse_nested(tok):
    """'[[1, 2], [3, 4]]' -> nested Python lists of strings."""
    parts = re.findall(r"\[|\]|,|[^\[\],\s]+", tok)
    stack = [[]]
    for p in parts:
        if p == "[":
            stack.append([])
        elif p == "]":
            lst = stack.pop()
            stack[-1].append(lst)
        elif p == ",":
            continue
        else:
            stack[-1].append(p)
    if len(stack) != 1 or len(stack[0]) != 1:
        raise Failure("malformed tensor %r" % tok)
    return stack[0][0]


def nested_to_array(tok):
    lst = parse_nested(tok)

    def conv(x):
        if isinstance(x, list):
            return [conv(y) for y in x]
        if x == "true":
            return 1.0
        if x == "false":
            return 0.0
        return parse_number(x)

    arr = np.array(conv(lst), dtype=np.float64)
    return arr


def scalar_dtype(v):
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "i64"
    return "f32"


def match_value(tok, exp, module, what):
    """Compares one printed token with an expected item (not a literal string)."""
    if exp is ANY:
        return
    e = exp
    dtype = None
    if isinstance(exp, Expect):
        e = exp.value
        dtype = exp.dtype
    arr = np.asarray(e)
    if dtype is None:
        if arr.dtype.kind == "b":
            dtype = "bool"
        elif arr.dtype.kind in "iu":
            dtype = "i64"
        else:
            dtype = "f32"
    rtol, atol = tol_for(exp, dtype, module)
    rtol = max(rtol, PRINT_FORMAT_RTOL.get(dtype, 0.0))
    if arr.ndim == 0:
        if dtype == "bool":
            want = "true" if bool(arr) else "false"
            if tok != want:
                raise Failure("%s: printed %r, want %s" % (what, tok, want))
            return
        got = parse_number(tok)
        if dtype in ("i32", "i64"):
            if not re.fullmatch(r"-?\d+", tok) or int(tok) != int(arr):
                raise Failure("%s: printed %r, want %d" % (what, tok, int(arr)))
            return
        if not np.isclose(got, float(arr), rtol=rtol, atol=atol, equal_nan=True):
            raise Failure("%s: printed %s, want %.9g (rtol %g, atol %g)" % (what, tok, float(arr), rtol, atol))
        return
    # a tensor
    if arr.size <= 64:
        if not tok.startswith("["):
            raise Failure("%s: printed %r, want a nested list of shape %s" % (what, tok, list(arr.shape)))
        got = nested_to_array(tok)
        if dtype == "bool" and re.search(r"\d", tok):
            raise Failure("%s: a bool tensor printed as %r (want true/false)" % (what, tok))
        compare_arrays(got, arr.astype(np.float64), dtype, rtol, atol, what)
        return
    m = SUMMARY_RE.match(tok)
    if not m:
        raise Failure("%s: printed %r, want <%s%s sum=... min=... max=...>" % (what, clip(tok, 200), dtype, list(arr.shape)))
    pdtype, pshape = m.group(1), [int(s) for s in m.group(2).split(",") if s.strip()]
    if pdtype != dtype or pshape != list(arr.shape):
        raise Failure("%s: printed %s[%s], want %s%s" % (what, pdtype, m.group(2), dtype, list(arr.shape)))
    a64 = arr.astype(np.float64)
    checks = [("sum", a64.sum(), atol * a64.size + rtol * np.abs(a64).sum()),
              ("min", a64.min(), atol + rtol * abs(a64.min())),
              ("max", a64.max(), atol + rtol * abs(a64.max()))]
    for (label, want, tol), gtok in zip(checks, m.groups()[2:]):
        g = parse_number(gtok)
        if not abs(g - want) <= tol + PRINT_FORMAT_RTOL.get(dtype, 0.0) * abs(want):
            raise Failure("%s: summary %s=%s, want %.9g (tolerance %.3g)" % (what, label, gtok, want, tol))


def match_line(line, items, module, what):
    pos = 0
    for k, item in enumerate(items):
        if k > 0:
            if line[pos:pos + 1] != " ":
                raise Failure("%s: expected a space at column %d of %r" % (what, pos + 1, line))
            pos += 1
        if isinstance(item, str):
            if not line.startswith(item, pos):
                raise Failure("%s: expected %r at column %d of %r" % (what, item, pos + 1, line))
            pos += len(item)
        else:
            tok, pos = read_token(line, pos)
            match_value(tok, item, module, "%s, item %d" % (what, k + 1))
    if pos != len(line):
        raise Failure("%s: unexpected trailing text %r" % (what, line[pos:]))


def check_stdout(stdout, expected_lines, module):
    lines = stdout.splitlines()
    for i, items in enumerate(expected_lines):
        if i >= len(lines):
            raise Failure("stdout: %d lines, want %d; missing line %d: %r" % (len(lines), len(expected_lines), i + 1, items))
        try:
            match_line(lines[i], items, module, "stdout line %d" % (i + 1))
        except Failure as f:
            raise Failure("%s\n        line: %s" % (f, clip(lines[i], 300)))
    if len(lines) > len(expected_lines):
        raise Failure("stdout: %d lines, want %d; extra: %r" % (len(lines), len(expected_lines), lines[len(expected_lines)]))


def split_tokens(line):
    toks, pos = [], 0
    while pos < len(line):
        tok, pos = read_token(line, pos)
        toks.append(tok)
        if pos < len(line):
            pos += 1
    return toks


def same_token(a, b, rtol, atol):
    if a == b:
        return True
    try:
        if a.startswith("["):
            x, y = nested_to_array(a), nested_to_array(b)
            return x.shape == y.shape and np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
        if a.startswith("<"):
            ma, mb = SUMMARY_RE.match(a), SUMMARY_RE.match(b)
            if not (ma and mb) or ma.group(1, 2) != mb.group(1, 2):
                return False
            n = np.prod([int(s) for s in ma.group(2).split(",") if s.strip()] or [1])
            ok = True
            for k, ga, gb in zip(range(3), ma.groups()[2:], mb.groups()[2:]):
                x, y = float(ga), float(gb)
                t = atol * (n if k == 0 else 1) + rtol * max(abs(x), abs(y)) * (10 if k == 0 else 1)
                ok = ok and abs(x - y) <= t
            return ok
        x, y = float(a), float(b)
        return bool(np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True))
    except (ValueError, Failure):
        return False


def compare_stdouts(a, b, module):
    rtol, atol = DEFAULT_TOL["f32"]
    rtol = max(getattr(module, "RTOL", rtol), PRINT_FORMAT_RTOL["f32"]) * 2
    atol = getattr(module, "ATOL", atol) * 2
    la, lb = a.splitlines(), b.splitlines()
    if len(la) != len(lb):
        raise Failure("declared vs all-1: %d vs %d printed lines" % (len(la), len(lb)))
    for i, (x, y) in enumerate(zip(la, lb)):
        ta, tb = split_tokens(x), split_tokens(y)
        if len(ta) != len(tb) or not all(same_token(p, q, rtol, atol) for p, q in zip(ta, tb)):
            raise Failure("declared vs all-1: line %d differs:\n        declared: %s\n        all-1:    %s"
                          % (i + 1, clip(x, 300), clip(y, 300)))


# ============================================================================ one test

class Result:
    def __init__(self, name):
        self.name = name
        self.status = "PASS"      # PASS FAIL SKIP NOTRUN
        self.problems = []
        self.notes = []
        self.skip_reason = None
        self.seconds = 0.0

    def fail(self, msg):
        self.status = "FAIL"
        self.problems.append(msg)


def write_inputs(d, files):
    for name, value in files.items():
        if value is None:
            continue
        p = os.path.join(d, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if isinstance(value, (bytes, bytearray)):
            with open(p, "wb") as f:
                f.write(value)
        else:
            np.save(p, np.asarray(value), allow_pickle=False)


def unsupported_autodiff(stderr):
    if not re.search(r"E07\d\d", stderr):
        return None
    if re.search(r"autodiff|grad|differentiat", stderr, re.I) and re.search(r"not supported|unsupported|not yet", stderr, re.I):
        for line in stderr.splitlines():
            if re.search(r"E07\d\d", line):
                return line.strip()
        return stderr.strip().splitlines()[0]
    return None


def how_failed(rc, timeout):
    return ("timed out after %g s (a hang?)" % timeout if rc is None
            else "killed by signal %d" % -rc if rc < 0 else "exit status %d" % rc)


def program_devices(exe):
    """The device count a built program runs on (from its --help), or None."""
    rc, out, _err, _ = run_cmd([exe, "--help"], timeout=30)
    m = DEVICES_RE.search(out) if rc == 0 else None
    return int(m.group(1)) if m else None


def same_bits(path_a, path_b):
    """Whether two .npy files hold the same bytes. The one latitude: a NaN matches any NaN
    (which NaN an addition of two NaNs gives depends on the operand order a compiler
    picked for that loop, and is not specified)."""
    with open(path_a, "rb") as a, open(path_b, "rb") as b:
        da, db = a.read(), b.read()
    if da == db:
        return True
    if len(da) != len(db) or not path_a.endswith(".npy"):
        return False
    x, y = np.load(path_a, allow_pickle=False), np.load(path_b, allow_pickle=False)
    if x.dtype.str != y.dtype.str or x.shape != y.shape or x.dtype.kind != "f":
        return False
    bits = np.dtype("u%d" % x.dtype.itemsize)
    return bool(np.all((x.view(bits) == y.view(bits)) | (np.isnan(x) & np.isnan(y))))


def mpirun_cmd(args, nprocs):
    return [args.mpirun] + MPIRUN_FLAGS + ["-np", str(nprocs)]


def check_kept(res, tag, cdir, case, after):
    """The files a failing run saved before it failed (case.keeps) must be there, complete
    .npy files; returns `after` without them."""
    for k in case.keeps:
        path = os.path.join(cdir, k)
        try:
            read_safetensors(path) if path.endswith(".safetensors") else np.load(path)
        except Exception as e:  # noqa: BLE001
            res.fail("%s: %s, saved before the failure, is not a complete .npy file: %s" % (tag, k, e))
    return [f for f in after if f not in case.keeps]


def check_mpi_run(res, args, exe, vdir, inputs, expected, module, bad_cases, sim_out):
    """The MPI mode: the declared build under mpirun, compared with the simulated run
    (sim_out: its stdout; the .npy files are in vdir/run), then its bad-input cases and
    a run with the wrong process count."""
    ndev = program_devices(exe)
    if ndev is None:
        res.fail("[mpi] cannot read the device count from %s --help" % exe)
        return
    tag = "[mpi -np %d]" % ndev
    rdir = os.path.join(vdir, "run-mpi")
    os.makedirs(rdir)
    write_inputs(rdir, inputs)
    cmd = mpirun_cmd(args, ndev) + [exe, "--comm=mpi"]
    rc, out, err, secs = run_cmd(cmd + getattr(module, "ARGV", []), cwd=rdir, timeout=args.mpi_timeout)
    if args.verbose:
        res.notes.append("%s ran in %.2f s, rc %s" % (tag, secs, rc))
    if rc != 0:
        res.fail("%s run failed: %s: %s\n%s" % (tag, how_failed(rc, args.mpi_timeout), " ".join(cmd),
                                                indent(clip("stdout:\n" + out + "\nstderr:\n" + err))))
        return
    for fname, exp in expected.items():
        if fname == "stdout":
            continue
        try:
            check_saved(os.path.join(rdir, fname), exp, module, "%s %s" % (tag, fname))
        except Failure as f:
            res.fail(str(f))
            continue
        if not same_bits(os.path.join(rdir, fname), os.path.join(vdir, "run", fname)):
            res.fail("%s %s: not bitwise identical to the simulated run's" % (tag, fname))
    try:
        check_stdout(out, expected.get("stdout", []), module)
    except Failure as f:
        res.fail("%s %s" % (tag, f))
    if out.replace("-nan", "nan") != sim_out.replace("-nan", "nan"):   # a NaN is a NaN
        la, lb = out.splitlines(), sim_out.splitlines()
        diff = next((i for i in range(min(len(la), len(lb))) if la[i] != lb[i]), min(len(la), len(lb)))
        res.fail("%s stdout differs from the simulated run's at line %d:\n        mpi: %s\n        sim: %s"
                 % (tag, diff + 1, clip(la[diff] if diff < len(la) else "(none)", 300),
                    clip(lb[diff] if diff < len(lb) else "(none)", 300)))
    extra = sorted(set(list_files(rdir)) - set(inputs) - set(k for k in expected if k != "stdout"))
    if extra:
        res.fail("%s unexpected files in the run directory: %s" % (tag, ", ".join(extra)))

    # bad inputs: every rank that fails names its device; mpirun ends the others
    for case in bad_cases:
        cdir = os.path.join(vdir, "bad-mpi-" + case.name)
        os.makedirs(cdir)
        write_inputs(cdir, case.files)
        before = list_files(cdir)
        rc, bout, berr, _ = run_cmd(cmd + case.argv, cwd=cdir, timeout=args.mpi_timeout)
        after = list_files(cdir)
        ctag = "%s bad input '%s'" % (tag, case.name)
        after = check_kept(res, ctag, cdir, case, after)
        if rc is None or rc <= 0:
            res.fail("%s: %s, want a non-zero exit status\n%s" % (
                ctag, "exited 0" if rc == 0 else how_failed(rc, args.mpi_timeout),
                indent(clip("stdout:\n" + bout + "\nstderr:\n" + berr))))
        else:
            # A bad command line is refused before any device starts.
            miss = [x for x in case.stderr + (["error: device "] if case.status is None else []) if x not in berr]
            if miss:
                res.fail("%s: stderr lacks %s\n      stderr: %s" % (ctag, ", ".join(repr(x) for x in miss), clip(berr, 600)))
        if after != before:
            res.fail("%s: files appeared: %s" % (ctag, ", ".join(sorted(set(after) - set(before))) or "(changed)"))

    # the wrong process count: a message from rank 0, status 2, nothing written
    wrong = ndev + 1 if ndev == 1 else ndev - 1
    wdir = os.path.join(vdir, "wrong-np")
    os.makedirs(wdir)
    write_inputs(wdir, inputs)
    before = list_files(wdir)
    rc, wout, werr, _ = run_cmd(mpirun_cmd(args, wrong) + [exe, "--comm=mpi"], cwd=wdir,
                                timeout=args.mpi_timeout)
    want = "runs on %d device%s, one MPI process each, but it was started as %d process" % (
        ndev, "" if ndev == 1 else "s", wrong)
    if rc != 2 or want not in werr:
        res.fail("[mpi -np %d] want exit status 2 and %r, got %s\n%s" % (
            wrong, want, "exit status %s" % rc if rc is not None and rc >= 0 else how_failed(rc, args.mpi_timeout),
            indent(clip("stdout:\n" + wout + "\nstderr:\n" + werr))))
    if list_files(wdir) != before:
        res.fail("[mpi -np %d] files appeared" % wrong)


def run_test(name, args, work_root, have_build):
    res = Result(name)
    t0 = time.time()
    src = os.path.join(HERE, name + ".msh")
    try:
        module = load_module(name, os.path.join(HERE, name + ".py"))
    except Exception:  # noqa: BLE001
        res.fail("reference module %s.py does not load:\n%s" % (name, indent(traceback.format_exc())))
        return res

    # 1. static checks
    rc, out, err, _ = run_cmd([args.meshc, "check", src])
    if rc != 0:
        res.fail("meshc check failed (rc %s):\n%s" % (rc, indent(clip(out + err))))
        return res
    # PLAN_SEARCH: a program written to exercise particular collectives (an all_reduce of
    # max over two axes, say) is small enough that the whole-function plan search would
    # gather instead (cheaper under the cost model); its COMM list and its runs are then
    # those of the local plans (`--plan-search=N`), and one more run on the declared mesh
    # with the search on checks the searched plan's values too.
    search = getattr(module, "PLAN_SEARCH", None)
    sflags = [] if search is None else ["--plan-search=%d" % search]
    rc, out, err, _ = run_cmd([args.meshc, "explain", src] + sflags)
    if rc != 0:
        res.fail("meshc explain failed (rc %s):\n%s" % (rc, indent(clip(out + err))))
        return res
    ops = explain_ops(out)
    missing = check_comm(getattr(module, "COMM", []), ops)
    if missing:
        res.fail("meshc explain does not list: %s" % "; ".join(missing))
    # NO_COMM: collectives a better plan avoids; each listed one must be absent.
    present = [s for s in getattr(module, "NO_COMM", []) if not check_comm([s], ops)]
    if present:
        res.fail("meshc explain lists what it should not: %s" % "; ".join(present))
    if args.check_only or not have_build:
        if res.status == "PASS":
            res.status = "NOTRUN"
        res.seconds = time.time() - t0
        return res

    # reference values
    try:
        inputs = module.inputs() if hasattr(module, "inputs") else {}
        expected = module.expected(inputs)
    except Exception:  # noqa: BLE001
        res.fail("reference computation failed:\n%s" % indent(traceback.format_exc()))
        return res
    bad_cases = getattr(module, "BAD_CASES", [])

    tdir = os.path.join(work_root, name)
    shutil.rmtree(tdir, ignore_errors=True)
    os.makedirs(tdir)
    meshes = declared_meshes(src)
    variants = [("declared", list(sflags))]
    if meshes and args.comm != "mpi":
        variants.append(("all-1", all_ones_flags(meshes) + sflags))
    if sflags:
        variants.append(("searched", []))
    outputs = {}
    for vname, flags in variants:
        vdir = os.path.join(tdir, vname)
        os.makedirs(vdir)
        exe = os.path.join(vdir, name)
        cmd = [args.meshc, "build", src, "-o", exe] + flags + args.build_flags
        rc, out, err, secs = run_cmd(cmd, timeout=args.build_timeout)
        if rc == 0 and args.ptxas:
            # The GPU kernels' PTX must assemble (ptxas: CUDA's own assembler).
            ptx = os.path.join(vdir, name + ".ptx")
            prc, pout, perr, _ = run_cmd([args.meshc, "build", src, "--emit=ptx"] + flags + args.build_flags,
                                         timeout=args.build_timeout)
            if prc != 0:
                res.fail("[%s] --emit=ptx failed: %s" % (vname, indent(clip(pout + perr))))
            else:
                with open(ptx, "w") as f:
                    f.write(pout)
                arc, aout, aerr, _ = run_cmd([args.ptxas, "-arch=" + args.gpu_arch, ptx, "-o", os.devnull],
                                             timeout=args.build_timeout)
                if arc != 0:
                    res.fail("[%s] ptxas rejects the kernels of %s:\n%s" % (vname, name, indent(clip(aout + aerr))))
        if rc != 0:
            why = unsupported_autodiff(out + err) if name in AUTODIFF_TESTS else None
            if why and not args.require_autodiff:
                res.status = "SKIP"
                res.skip_reason = why
                res.seconds = time.time() - t0
                if not args.keep:
                    shutil.rmtree(tdir, ignore_errors=True)
                return res
            res.fail("[%s] build failed (%s): %s\n%s" % (
                vname, "timed out" if rc is None else "exit status %d" % rc, " ".join(cmd), indent(clip(out + err))))
            continue
        if not os.path.exists(exe):
            res.fail("[%s] build succeeded but wrote no %s" % (vname, exe))
            continue
        # good run
        rdir = os.path.join(vdir, "run")
        os.makedirs(rdir)
        write_inputs(rdir, inputs)
        rc, out, err, secs = run_cmd([exe] + args.run_flags + getattr(module, "ARGV", []), cwd=rdir,
                                     timeout=args.run_timeout)
        if args.verbose:
            res.notes.append("[%s] ran in %.2f s, rc %s" % (vname, secs, rc))
        if rc != 0:
            how = ("timed out after %g s (a hang?)" % args.run_timeout if rc is None
                   else "killed by signal %d" % -rc if rc < 0 else "exit status %d" % rc)
            res.fail("[%s] run failed: %s: %s\n%s" % (
                vname, how, exe, indent(clip("stdout:\n" + out + "\nstderr:\n" + err))))
            continue
        if err.strip() and args.verbose:
            res.notes.append("[%s] stderr: %s" % (vname, clip(err, 300)))
        saved = {}
        for fname, exp in expected.items():
            if fname == "stdout":
                continue
            try:
                saved[fname] = check_saved(os.path.join(rdir, fname), exp, module, "[%s] %s" % (vname, fname))
            except Failure as f:
                res.fail(str(f))
        try:
            check_stdout(out, expected.get("stdout", []), module)
        except Failure as f:
            res.fail("[%s] %s" % (vname, f))
        extra = sorted(set(list_files(rdir)) - set(inputs) - set(k for k in expected if k != "stdout"))
        if extra:
            res.fail("[%s] unexpected files in the run directory: %s" % (vname, ", ".join(extra)))
        outputs[vname] = (out, saved)
        # `--help` lists the program's arguments (module HELP: strings it must print).
        if getattr(module, "HELP", None):
            hrc, hout, herr, _ = run_cmd([exe, "--help"], cwd=rdir, timeout=args.run_timeout)
            miss = [s for s in module.HELP if s not in hout]
            if hrc != 0 or miss:
                res.fail("[%s] --help: exit status %s, lacks %s\n%s" % (vname, hrc, ", ".join(repr(s) for s in miss),
                                                                         indent(clip(hout + herr))))
        # RESUME: the same run in parts (each an argv, run in turn in one directory, e.g.
        # stop at a checkpoint, then resume from it); RESUME_SAME: files that must then be
        # bitwise the good run's.
        if getattr(module, "RESUME", None):
            zdir = os.path.join(vdir, "resume")
            os.makedirs(zdir)
            write_inputs(zdir, inputs)
            for part, argv in enumerate(module.RESUME):
                zrc, zout, zerr, _ = run_cmd([exe] + args.run_flags + list(argv), cwd=zdir, timeout=args.run_timeout)
                if zrc != 0:
                    res.fail("[%s] resume part %d (%s) failed: %s\n%s" % (
                        vname, part + 1, " ".join(argv), how_failed(zrc, args.run_timeout),
                        indent(clip("stdout:\n" + zout + "\nstderr:\n" + zerr))))
                    break
            else:
                for fname in module.RESUME_SAME:
                    if not same_bits(os.path.join(zdir, fname), os.path.join(rdir, fname)):
                        res.fail("[%s] resumed run: %s is not bitwise the uninterrupted run's" % (vname, fname))
        if args.comm == "mpi":
            # The simulated run's bad cases are the plain e2e's; here the MPI ones.
            check_mpi_run(res, args, exe, vdir, inputs, expected, module, bad_cases, out)
            continue
        # bad-input runs
        for case in bad_cases:
            cdir = os.path.join(vdir, "bad-" + case.name)
            os.makedirs(cdir)
            write_inputs(cdir, case.files)
            before = list_files(cdir)
            rc, bout, berr, _ = run_cmd([exe] + args.run_flags + case.argv, cwd=cdir, timeout=args.run_timeout)
            after = list_files(cdir)
            tag = "[%s] bad input '%s'" % (vname, case.name)
            after = check_kept(res, tag, cdir, case, after)
            if case.status is not None and rc is not None and rc > 0 and rc != case.status:
                res.fail("%s: exit status %d, want %d" % (tag, rc, case.status))
            if rc is None:
                res.fail("%s: timed out" % tag)
            elif rc == 0:
                res.fail("%s: exited 0, want a failure\n%s" % (tag, indent(clip("stdout:\n" + bout + "\nstderr:\n" + berr))))
            elif rc < 0:
                res.fail("%s: killed by signal %d (want a clean exit with a message)\n%s" % (tag, -rc, indent(clip(berr))))
            else:
                miss = [s for s in case.stderr if s not in berr]
                if miss:
                    res.fail("%s: stderr lacks %s\n      stderr: %s" % (tag, ", ".join(repr(s) for s in miss), clip(berr, 600)))
                elif args.verbose:
                    res.notes.append("%s: rc %d, %s" % (tag, rc, berr.strip()))
            if after != before:
                res.fail("%s: files appeared: %s" % (tag, ", ".join(sorted(set(after) - set(before))) or "(changed)"))
    # declared vs all-1
    if "declared" in outputs and "all-1" in outputs:
        (o1, s1), (o2, s2) = outputs["declared"], outputs["all-1"]
        try:
            compare_stdouts(o1, o2, module)
        except Failure as f:
            res.fail(str(f))
        for fname in sorted(set(s1) & set(s2)):
            if isinstance(s1[fname], dict):  # a .safetensors checkpoint: tensor by tensor
                for tname, e in expected[fname].items():
                    dt = e.dtype if isinstance(e, Expect) and e.dtype else NPY_DTYPES.get(s1[fname][tname].dtype.str, "f64")
                    rtol, atol = tol_for(e, dt, module)
                    try:
                        compare_arrays(s1[fname][tname], s2[fname][tname], dt, rtol, atol,
                                       "declared vs all-1: %s tensor %s" % (fname, tname))
                    except Failure as f:
                        res.fail(str(f))
                continue
            exp = expected[fname]
            dt = exp.dtype if isinstance(exp, Expect) and exp.dtype else NPY_DTYPES.get(s1[fname].dtype.str, "f64")
            rtol, atol = tol_for(exp, dt, module)
            try:
                compare_arrays(s1[fname], s2[fname], dt, rtol, atol, "declared vs all-1: %s" % fname)
            except Failure as f:
                res.fail(str(f))
    if res.status == "PASS" and not args.keep:
        shutil.rmtree(tdir, ignore_errors=True)
    res.seconds = time.time() - t0
    return res


# ============================================================================ main

def discover():
    names = sorted(os.path.splitext(f)[0] for f in os.listdir(HERE) if f.endswith(".msh"))
    return names


def meshc_has_build(meshc):
    rc, out, err, _ = run_cmd([meshc, "build", "--help"], timeout=30)
    return rc == 0 and "build" in (out + err).lower()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--meshc", default=os.path.join(ROOT, "build", "meshc"), help="the meshc binary")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="run only these tests (repeatable, or comma-separated)")
    ap.add_argument("--keep", action="store_true", help="keep every test's work directory")
    ap.add_argument("--work", help="work directory (default: a fresh temporary one)")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="tests run in parallel (default 1)")
    ap.add_argument("--check-only", action="store_true",
                    help="only the static checks (meshc check, explain); no build")
    ap.add_argument("--include-autodiff", dest="autodiff", action="store_true", default=True,
                    help="run the grad/value_and_grad programs too (default)")
    ap.add_argument("--no-autodiff", dest="autodiff", action="store_false",
                    help="leave the grad/value_and_grad programs out")
    # The back end differentiates every autodiff program here, so a build that says
    # autodiff is unsupported is a failure by default.
    ap.add_argument("--require-autodiff", dest="require_autodiff", action="store_true", default=True,
                    help="an unsupported-autodiff build failure is a FAIL (default)")
    ap.add_argument("--allow-unsupported-autodiff", dest="require_autodiff", action="store_false",
                    help="report an unsupported-autodiff build failure as a SKIP (for a back end without it)")
    ap.add_argument("--build-timeout", type=float, default=120, help="seconds per build")
    ap.add_argument("--run-timeout", type=float, default=30, help="seconds per run (a hang is a failure)")
    ap.add_argument("--comm", choices=["sim", "mpi"], default="sim",
                    help="mpi: also run every program's declared build under mpirun and "
                         "require the results of the simulated run, bitwise")
    ap.add_argument("--mpirun", default=None, help="OpenMPI's mpirun (default: from PATH)")
    ap.add_argument("--device", choices=["cpu", "cuda", "gpu-emulator"], default="cpu",
                    help="cuda: build every program with `meshc build --gpu` and run it as "
                         "`prog --device=cuda` (a runtime built with -DMESHC_CUDA=ON, on a "
                         "machine with a GPU; tests/gpu/run.sh); gpu-emulator: the same "
                         "builds, run with --device=gpu-emulator (the GPU kernels on the "
                         "host, one emulated GPU thread after another)")
    ap.add_argument("--ptxas", default=None,
                    help="with --device cuda or gpu-emulator: also assemble each program's "
                         "`meshc build --emit=ptx` with this ptxas")
    ap.add_argument("--gpu-arch", default="sm_90", help="the GPU architecture (default sm_90)")
    ap.add_argument("--mpi-timeout", type=float, default=180,
                    help="seconds per mpirun run (a hang is a failure)")
    ap.add_argument("--list", action="store_true", help="list the tests and exit")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    args.meshc = os.path.abspath(args.meshc)
    args.run_flags = ["--device=" + args.device] if args.device != "cpu" else []
    args.build_flags = ["--gpu", "--gpu-arch=" + args.gpu_arch] if args.device != "cpu" else []
    if args.ptxas and args.device == "cpu":
        ap.error("--ptxas needs --device cuda or gpu-emulator")

    names = discover()
    if args.list:
        for n in names:
            print(n + ("   (autodiff)" if n in AUTODIFF_TESTS else ""))
        return 0
    only = [x for o in args.only for x in o.split(",") if x]
    if only:
        unknown = [o for o in only if o not in names]
        if unknown:
            print("unknown test(s): %s; see --list" % ", ".join(unknown))
            return 2
        names = [n for n in names if n in only]
    if not args.autodiff:
        names = [n for n in names if n not in AUTODIFF_TESTS]
    if not os.access(args.meshc, os.X_OK):
        print("meshc not found at %s (--meshc)" % args.meshc)
        return 2

    if args.comm == "mpi":
        args.mpirun = args.mpirun or shutil.which("mpirun")
        if not args.mpirun or not os.access(args.mpirun, os.X_OK):
            print("e2e: no mpirun (--mpirun): the MPI mode is skipped")
            return EXIT_NO_BUILD
        print("e2e: MPI mode, mpirun = %s %s" % (args.mpirun, " ".join(MPIRUN_FLAGS)))
    print("e2e: meshc = %s" % args.meshc)
    kat = e2e_lib.philox_self_test()
    if kat:
        print("FAIL philox self-test (the reference RNG is wrong):")
        for m in kat:
            print("  " + m)
        return 1
    print("e2e: Philox4x32-10 reference matches Random123's known answers")

    have_build = True if args.check_only else meshc_has_build(args.meshc)
    if not args.check_only and not have_build:
        print("e2e: *** `meshc build` does not exist yet: static checks only ***")

    if args.work:
        work_root = os.path.abspath(args.work)
        os.makedirs(work_root, exist_ok=True)
    else:
        work_root = tempfile.mkdtemp(prefix="meshc-e2e-")

    t0 = time.time()
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = [pool.submit(run_test, n, args, work_root, have_build) for n in names]
        for n, fut in zip(names, futs):
            try:
                r = fut.result()
            except Exception:  # noqa: BLE001
                r = Result(n)
                r.fail("harness error:\n%s" % indent(traceback.format_exc()))
            results.append(r)
            tag = "autodiff " if n in AUTODIFF_TESTS else ""
            if r.status == "SKIP":
                print("SKIP   %s%s  *** (unsupported: %s)" % (tag, n, r.skip_reason), flush=True)
            else:
                print("%-6s %s%s  (%.1f s)" % (r.status, tag, n, r.seconds), flush=True)
            shown = r.problems if args.verbose else r.problems[:MAX_PROBLEMS]
            for p in shown:
                print("    - " + p.replace("\n", "\n    "))
            if len(shown) < len(r.problems):
                print("    - ... and %d more (-v shows all)" % (len(r.problems) - len(shown)))
            for note in r.notes:
                print("    . " + note)
            if r.status == "FAIL":
                d = os.path.join(work_root, n)
                if os.path.isdir(d):
                    print("    work dir: %s" % d)

    counts = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    print()
    print("=" * 72)
    print("e2e summary: %d tests in %.1f s: %s" % (
        len(results), time.time() - t0,
        ", ".join("%d %s" % (counts[k], k) for k in ("PASS", "FAIL", "SKIP", "NOTRUN") if k in counts)))
    fails = [r.name for r in results if r.status == "FAIL"]
    skips = [r for r in results if r.status == "SKIP"]
    if fails:
        print("FAILED: %s" % " ".join(fails))
    if skips:
        print("*" * 72)
        for r in skips:
            print("*** SKIPPED %s (unsupported: %s)" % (r.name, r.skip_reason))
        print("*** (autodiff programs; without --allow-unsupported-autodiff this is a failure)")
        print("*" * 72)
    if not have_build and not args.check_only:
        print("*** NOT RUN: meshc has no `build` sub-command yet; only `check`/`explain` ran ***")
    if args.keep or fails:
        print("work dir: %s" % work_root)
    elif not args.work:
        shutil.rmtree(work_root, ignore_errors=True)
    print("=" * 72)
    if fails:
        return 1
    if not have_build and not args.check_only:
        return EXIT_NO_BUILD
    return 0


if __name__ == "__main__":
    sys.exit(main())
