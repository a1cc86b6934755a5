#!/usr/bin/env python3
"""Gradient test generated from the built-in table: every differentiable built-in of
src/sema/builtins.def (and every operator, and the GIR ops of src/ir/ops.def) gets
its gradient checked against finite differences of a float64 NumPy model.

The tables below (BUILTINS, OPERATORS, CONSTRUCTS; GIR_OPS, EW_KINDS, REDUCE_KINDS)
classify EVERY built-in, every GIR op, and every element-wise function and reduction
kind of src/ir/gir.h: differentiable (with a generator of test programs, or the
entries whose programs contain the op) or not (with the reason). An entry that the
sources have and the tables lack (or the other way round) is a failure naming it, so a
new op without an adjoint test fails here.

For each differentiable entry, K (--cases) small cases are generated. A case is one
function on the mesh `Pod = [a: 2, b: 2]` with randomly laid out inputs (replicated,
one dim split over a, b, (a, b) or (b, a), or two dims split over a and b; only splits
that divide):

    fn f_cN(x: Tensor f32 [..] on Pod with {..}, <other inputs>, w0: ..) -> f32 {
        sum(OP(x, ..) * w0)
    }

where w0 is a random weight tensor loaded from a file (so the gradient is not all
ones; weights and non-differentiated inputs may also be mesh-free), and OP's result is
sometimes first bound by a `let` annotated with another random layout. `main` loads every input (`let x: TYPE = load("x.npy")`), calls
`grad(f)(..)` (and `f(..)` for the loss) or `value_and_grad(f)(..)`, and saves the loss
and the gradient. All cases with the same index go in one program (few builds); the
program is built on the declared mesh and rebound to one device (`--mesh
Pod=a:1,b:1`), each run in a fresh directory holding its .npy inputs, and every saved
gradient and loss must match central finite differences (eps 1e-3) of the case's
float64 NumPy function (tolerance 2e-3 relative + 1e-4 absolute: meshc computes in
f32). A program that fails to build or run is split into one program per case, so the
failing case is named. `grad` itself is tested by Hessian-vector products
(`fn gdot(x, v) -> f32 { sum(grad(h)(x, ..) * v) }`, whose gradient is H v) and
`value_and_grad` by differentiating through it.

Every GIR op classified as differentiable must appear in the forward code of some
generated program (`meshc build --emit=gir-checked`).

Known meshc bugs are listed in KNOWN_BUGS (their failures are reported as XFAIL).

Usage:
  grad_builtins.py --meshc build/meshc [--seed N] [--cases K] [--work DIR] [--only a,b]
                   [-j N] [-v]
Exit status: 0 all passed (XFAILs allowed), 1 a failure.
"""

import sys

sys.dont_write_bytecode = True

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import itertools  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

try:
    import numpy as np
except ImportError:
    print("grad_builtins.py needs numpy for %s (pip install numpy)" % sys.executable)
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from e2e_lib import gelu_tanh, log_softmax, sigmoid, softmax  # noqa: E402

BUILTINS_DEF = os.path.join(ROOT, "src", "sema", "builtins.def")
OPS_DEF = os.path.join(ROOT, "src", "ir", "ops.def")

MESH_AXES = (("a", 2), ("b", 2))
AXIS_SIZE = dict(MESH_AXES)
MESH_DECL = "mesh Pod = [a: 2, b: 2];"
ONE_DEVICE = "Pod=a:1,b:1"

EPS = 1e-3                 # central finite differences on the float64 model
RTOL, ATOL = 2e-3, 1e-4    # meshc computes in f32
SHAPES = ([4, 8], [8, 4], [2, 4, 8])
ANNOTATE = 0.3             # how often a term's result is first bound by an annotated `let`

# Known meshc bugs: failures of a matching case are reported as XFAIL, not as a failure.
# Each entry: {"builtin": NAME, a tuple of names or "*", "note": what is wrong, and
# "match": a predicate on the Case (its layouts) and/or "error": a regex the failure
# text must contain}. Remove an entry once the bug is fixed (a case matched by layout
# that passes is reported as XPASS).
KNOWN_BUGS = [
]


# ============================================================================ layouts

def axes_size(axes):
    return int(np.prod([AXIS_SIZE[a] for a in axes]))


def ax_str(axes):
    return axes[0] if len(axes) == 1 else "(" + ", ".join(axes) + ")"


def layout_str(layout):
    """{0: a, 1: (a, b)} (a layout literal, `{}` replicated)."""
    return "{" + ", ".join("%d: %s" % (d, ax_str(a)) for d, a in sorted(layout.items())) + "}"


def type_str(dtype, shape, layout):
    """The Mesh type; layout None: mesh-free (no `on`)."""
    s = "Tensor %s [%s]" % (dtype, ", ".join(str(n) for n in shape))
    if layout is None:
        return s
    s += " on Pod"
    if layout:
        s += " with " + layout_str(layout)
    return s


def describe_layout(layout):
    if layout is None:
        return "mesh-free"
    if not layout:
        return "replicated"
    return layout_str(layout)


SINGLE_SPLITS = (("a",), ("b",), ("a", "b"), ("b", "a"))


def layout_options(shape, free_ok=False):
    """Layout kind -> the layouts of that kind whose splits divide `shape`."""
    opts = {"replicated": [{}]}
    for axes in SINGLE_SPLITS:
        opts["".join(axes)] = [{d: axes} for d, n in enumerate(shape) if n % axes_size(axes) == 0]
    opts["two"] = [{d1: ("a",), d2: ("b",)} for d1, n1 in enumerate(shape) for d2, n2 in enumerate(shape)
                   if d1 != d2 and n1 % 2 == 0 and n2 % 2 == 0]
    if free_ok:
        opts["free"] = [None]
    return {k: v for k, v in opts.items() if v}


def random_layout(R, shape, free_ok=False):
    opts = layout_options(shape, free_ok)
    kind = R.choice(sorted(opts))
    return dict(R.choice(opts[kind])) if opts[kind][0] is not None else None


# ============================================================================ cases

class Inp:
    def __init__(self, name, dtype, shape, value, layout, diff):
        self.name, self.dtype, self.shape, self.layout, self.diff = name, dtype, list(shape), layout, diff
        npdt = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32}[dtype]
        self.value = np.asarray(value).astype(npdt).reshape(self.shape)

    def ref(self):
        """The value the NumPy model sees (floats: float64 of the stored values)."""
        return self.value.astype(np.float64) if self.dtype[0] == "f" else self.value

    def mtype(self):
        return type_str(self.dtype, self.shape, self.layout)


class Term:
    def __init__(self, expr, fn, shape, dtype):
        self.expr, self.fn, self.shape, self.dtype = expr, fn, list(shape), dtype
        self.annotation = None     # a layout: `let r: TYPE = EXPR;` first


class Case:
    """One differentiated function: inputs (differentiable first), helper items, body
    statements, and terms; the loss is sum over terms of sum(TERM * w_i)."""

    def __init__(self, builtin, R, note=""):
        self.builtin, self.R, self.note = builtin, R, note
        self.inputs, self.terms, self.helpers, self.body = [], [], [], []
        self.contractions = []       # (einsum spec, [operand input names], its Term) (KNOWN_BUGS)
        self.ret = "f32"
        self.mode = R.choice(["grad", "value_and_grad"])
        self.uid = None

    # inputs ------------------------------------------------------------------
    def inp(self, name, shape, value, diff=True, layout="random", dtype="f32"):
        if isinstance(layout, str) and layout == "random":
            layout = random_layout(self.R, shape, free_ok=not diff)
        i = Inp(name, dtype, shape, value, layout, diff)
        self.inputs.append(i)
        return i

    def term(self, expr, fn, shape, dtype=None):
        t = Term(expr, fn, shape, dtype or self.ret)
        if self.R.random() < ANNOTATE:
            t.annotation = random_layout(self.R, t.shape)
        self.terms.append(t)

    @property
    def diff(self):
        return [i for i in self.inputs if i.diff]

    @property
    def const(self):
        return [i for i in self.inputs if not i.diff]

    def finish(self, nrng):
        """Adds the weights w_i (random layouts, mesh-free allowed)."""
        for k, t in enumerate(self.terms):
            self.inp("w%d" % k, t.shape, nrng.normal(0.0, 1.0, size=t.shape), diff=False, dtype=t.dtype)

    # the Mesh text --------------------------------------------------------------
    def fname(self):
        return "f_" + self.uid

    def source(self):
        """The helper items and f."""
        d = self.diff
        params = []
        if len(d) == 1:
            params.append("%s: %s" % (d[0].name, d[0].mtype()))
        else:
            params.append("t: (%s)" % ", ".join(i.mtype() for i in d))
        params += ["%s: %s" % (i.name, i.mtype()) for i in self.const]
        lines = [h.replace("@ID", self.uid) for h in self.helpers]
        lines.append("fn %s(%s) -> %s {" % (self.fname(), ",\n        ".join(params), self.ret))
        if len(d) > 1:
            lines.append("    let (%s) = t;" % ", ".join(i.name for i in d))
        lines += ["    " + b.replace("@ID", self.uid) for b in self.body]
        exprs = []
        for k, t in enumerate(self.terms):
            e = t.expr.replace("@ID", self.uid)
            if t.annotation is not None:
                # The result materialised in a random layout first (backward coercions).
                lines.append("    let r%d: %s = %s;" % (k, type_str(t.dtype, t.shape, t.annotation), e))
                e = "r%d" % k
            exprs.append(e)
        loss = " + ".join("sum((%s) * w%d)" % (e, k) for k, e in enumerate(exprs))
        lines.append("    " + loss)
        lines.append("}")
        return "\n".join(lines)

    def main_lines(self):
        u = self.uid
        out = ["    let %s_%s: %s = load(\"%s_%s.npy\");" % (u, i.name, i.mtype(), u, i.name) for i in self.inputs]
        d = self.diff
        first = "%s_%s" % (u, d[0].name) if len(d) == 1 else "(%s)" % ", ".join("%s_%s" % (u, i.name) for i in d)
        args = ", ".join([first] + ["%s_%s" % (u, i.name) for i in self.const])
        if self.mode == "grad":
            out.append("    let %s_g = grad(%s)(%s);" % (u, self.fname(), args))
            out.append("    save(\"%s_loss.npy\", %s(%s));" % (u, self.fname(), args))
        else:
            out.append("    let (%s_l, %s_g) = value_and_grad(%s)(%s);" % (u, u, self.fname(), args))
            out.append("    save(\"%s_loss.npy\", %s_l);" % (u, u))
        if len(d) == 1:
            out.append("    save(\"%s_g_%s.npy\", %s_g);" % (u, d[0].name, u))
        else:
            out.append("    let (%s) = %s_g;" % (", ".join("%s_g_%s" % (u, i.name) for i in d), u))
            out += ["    save(\"%s_g_%s.npy\", %s_g_%s);" % (u, i.name, u, i.name) for i in d]
        return out

    def files(self):
        return {"%s_%s.npy" % (self.uid, i.name): i.value for i in self.inputs}

    def layouts(self):
        out = ", ".join("%s %s%s %s" % (i.name, i.dtype, i.shape, describe_layout(i.layout)) for i in self.inputs)
        for k, t in enumerate(self.terms):
            if t.annotation is not None:
                out += ", r%d %s" % (k, describe_layout(t.annotation))
        return out

    # the reference ------------------------------------------------------------
    def loss(self, env):
        total = 0.0
        for k, t in enumerate(self.terms):
            total += float(np.sum(np.asarray(t.fn(env), dtype=np.float64) * env["w%d" % k]))
        return total

    def reference(self):
        """(loss, {diff input name: gradient}) of the float64 model."""
        env = {i.name: i.ref() for i in self.inputs}
        grads = {}
        for i in self.diff:
            x = env[i.name].copy()
            g = np.zeros_like(x)
            flat, gflat = x.reshape(-1), g.reshape(-1)
            for j in range(flat.size):
                old = flat[j]
                flat[j] = old + EPS
                up = self.loss(dict(env, **{i.name: x}))
                flat[j] = old - EPS
                down = self.loss(dict(env, **{i.name: x}))
                flat[j] = old
                gflat[j] = (up - down) / (2.0 * EPS)
            grads[i.name] = g
        return self.loss(env), grads


def program(cases):
    parts = ["// generated by tests/e2e/grad_builtins.py", MESH_DECL, ""]
    for c in cases:
        parts.append("// %s: %s" % (c.builtin, c.note) if c.note else "// %s" % c.builtin)
        parts.append(c.source())
        parts.append("")
    parts.append("fn main() {")
    for c in cases:
        parts += c.main_lines()
    parts.append("}")
    return "\n".join(parts) + "\n"


# ============================================================================ values

class Vals:
    """Input values with the constraints of each function (all rounded to f32 by Inp)."""

    def __init__(self, nrng):
        self.r = nrng

    def normal(self, shape, scale=1.0):
        return self.r.normal(0.0, scale, size=shape)

    def positive(self, shape):
        return self.r.uniform(0.5, 2.0, size=shape)

    def away(self, shape, lo=0.1, hi=1.5):
        """|x| in [lo, hi] (away from the kink at 0)."""
        return self.r.choice([-1.0, 1.0], size=shape) * self.r.uniform(lo, hi, size=shape)

    def distinct(self, shape):
        """No two values within 0.06 (max_over without ties)."""
        n = int(np.prod(shape))
        v = self.r.permutation(n) * 0.1 - 0.05 * n + self.r.uniform(-0.02, 0.02, size=n)
        return v.reshape(shape)


def pick_shape(R):
    return list(R.choice(SHAPES))


def rand_axis(R, rank):
    """An axis, sometimes written negative."""
    d = R.randrange(rank)
    return d, (d - rank if R.random() < 0.3 else d)


def small_shape(R, S):
    """A shape that broadcasts against S (NumPy): S itself, a suffix, size-1 dims, []."""
    opts = [list(S), list(S[1:]), []]
    for d in range(len(S)):
        opts.append([1 if e == d else n for e, n in enumerate(S)])
    return R.choice(opts)


# ============================================================================ generators
# Each generator is gen(R, V, k, K) -> Case: R a random.Random (structure, layouts), V a
# Vals (values), k the case index of K.

def gen_unary(op, fn, domain):
    """op(x); domain: "any", "pos" (x in [0.5, 2]) or "kink" (|x| >= 0.1)."""
    def gen(R, V, k, K):
        c = Case(op, R)
        S = pick_shape(R)
        vals = {"any": V.normal, "pos": V.positive, "kink": V.away}[domain](S)
        c.inp("x", S, vals)
        c.note = "%s(x %s)" % (op, S)
        c.term("%s(x)" % op, lambda e: fn(e["x"]), S)
        return c
    return gen


def gen_neg(R, V, k, K):
    c = Case("-x", R)
    S = pick_shape(R)
    c.inp("x", S, V.normal(S))
    if R.random() < 0.5:
        c.term("-x", lambda e: -e["x"], S)
    else:
        c.term("-(x * x)", lambda e: -(e["x"] * e["x"]), S)
    return c


def gen_arith(op):
    """+ - * / % with NumPy broadcasting (either operand the smaller one)."""
    npf = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "%": np.mod}[op]

    def gen(R, V, k, K):
        c = Case(op, R)
        S = pick_shape(R)
        s = small_shape(R, S)
        big_first = R.random() < 0.6 or op == "%"     # `%`: the dividend is the full one
        sx, sy = (S, s) if big_first else (s, S)
        if op in ("/", "%"):
            yv = V.away(sy, 0.5, 1.5)
        else:
            yv = V.normal(sy)
        if op == "%":
            # x = y * (n + u), u in [0.15, 0.85]: no discontinuity of x % y near x.
            yb = np.broadcast_to(yv, sx)
            xv = yb * (V.r.integers(-2, 3, size=sx) + V.r.uniform(0.15, 0.85, size=sx))
        else:
            xv = V.normal(sx)
        c.note = "x %s y, x %s, y %s" % (op, sx, sy)
        c.inp("x", sx, xv)
        c.inp("y", sy, yv)
        c.term("x %s y" % op, lambda e: npf(e["x"], e["y"]), S)
        return c
    return gen


def gen_matmul(R, V, k, K):
    c = Case("@", R)
    sx, sy = R.choice([([4, 8], [8, 4]), ([2, 4, 8], [8, 4]), ([2, 4, 8], [2, 8, 4]), ([8], [8, 4]),
                       ([4, 8], [8]), ([8, 4], [4, 8])])
    c.note = "%s @ %s" % (sx, sy)
    c.inp("x", sx, V.normal(sx))
    c.inp("y", sy, V.normal(sy))
    out = list(np.matmul(np.zeros(sx), np.zeros(sy)).shape)
    c.term("x @ y", lambda e: np.matmul(e["x"], e["y"]), out)
    c.contractions.append(({(2, 2): "ij,jk->ik", (3, 2): "bij,jk->bik", (3, 3): "bij,bjk->bik",
                            (1, 2): "j,jk->k", (2, 1): "ij,j->i"}[(len(sx), len(sy))], ["x", "y"], c.terms[-1]))
    return c


def gen_maxmin(op):
    npf = np.maximum if op == "max" else np.minimum

    def gen(R, V, k, K):
        c = Case(op, R)
        S = pick_shape(R)
        if R.random() < 0.25:
            lit = 0.3
            c.note = "%s(x, %g)" % (op, lit)
            c.inp("x", S, lit + V.away(S))
            c.term("%s(x, %s)" % (op, lit), lambda e: npf(e["x"], lit), S)
            return c
        s = small_shape(R, S)
        sv = V.normal(s)
        bv = np.broadcast_to(sv, S) + V.away(S)      # |big - small| >= 0.1
        if R.random() < 0.5:
            c.inp("x", S, bv)
            c.inp("y", s, sv)
        else:
            c.inp("x", s, sv)
            c.inp("y", S, bv)
        c.note = "%s(x %s, y %s)" % (op, c.inputs[0].shape, c.inputs[1].shape)
        c.term("%s(x, y)" % op, lambda e: npf(e["x"], e["y"]), S)
        return c
    return gen


def gen_select(R, V, k, K):
    c = Case("select", R)
    S = pick_shape(R)
    variant = R.randrange(3)
    if variant == 0:
        s = small_shape(R, S)
        c.inp("x", S, V.normal(S))
        c.inp("y", s, V.normal(s))
        cs = small_shape(R, S)
        c.inp("c", cs, V.normal(cs), diff=False)
        c.note = "select(c > 0.0, x, y), c %s, y %s" % (cs, s)
        c.term("select(c > 0.0, x, y)", lambda e: np.where(e["c"] > 0.0, e["x"], e["y"]), S)
    elif variant == 1:
        c.inp("x", S, V.normal(S))
        cs = small_shape(R, S)
        c.inp("c", cs, V.normal(cs), diff=False)
        c.note = "select(c > 0.0, x, 0.5), c %s" % cs
        c.term("select(c > 0.0, x, 0.5)", lambda e: np.where(e["c"] > 0.0, e["x"], 0.5), S)
    else:
        yv = V.normal(S)
        c.inp("x", S, yv + V.away(S))
        c.inp("y", S, yv)
        c.note = "select(x > y, x, y * 2.0)"
        c.term("select(x > y, x, y * 2.0)", lambda e: np.where(e["x"] > e["y"], e["x"], e["y"] * 2.0), S)
    return c


def gen_cast(R, V, k, K):
    c = Case("cast", R)
    S = pick_shape(R)
    if k % 2 == 0:
        # f32 -> f64 -> f32 and f64 -> f32; loss f32.
        c.note = "f32 -> f64 -> f32, f64 -> f32 (loss f32)"
        c.inp("x", S, V.normal(S))
        c.inp("y", S, V.normal(S), dtype="f64")
        c.term("cast(cast(x, f64) * cast(x, f64), f32)", lambda e: e["x"] * e["x"], S)
        c.term("cast(y * y, f32)", lambda e: e["y"] * e["y"], S)
    else:
        # f32 -> f64 and f64 -> f32 -> f64; loss f64.
        c.ret = "f64"
        c.note = "f32 -> f64, f64 -> f32 -> f64 (loss f64)"
        c.inp("x", S, V.normal(S))
        c.inp("y", S, V.normal(S), dtype="f64")
        c.term("cast(x, f64) * cast(tanh(x), f64)", lambda e: e["x"] * np.tanh(e["x"]), S)
        c.term("y * cast(cast(y, f32), f64)", lambda e: e["y"] * e["y"], S)
    return c


def gen_reduce(op):
    npf = {"sum": np.sum, "mean": np.mean}[op]

    def gen(R, V, k, K):
        c = Case(op, R)
        S = pick_shape(R)
        c.inp("x", S, V.normal(S))
        if k % 3 == 0:
            c.note = "%s(x * x) (all dims)" % op
            c.term("%s(x * x)" % op, lambda e: npf(e["x"] * e["x"]), [])
        else:
            d, dw = rand_axis(R, len(S))
            c.note = "%s(x, axis: %d)" % (op, dw)
            c.term("%s(x, axis: %d)" % (op, dw), lambda e: npf(e["x"], axis=d), S[:d] + S[d + 1:])
        return c
    return gen


def gen_global_norm(R, V, k, K):
    """global_norm of a tensor, or of a tuple of two tensors (leaf-wise, one norm)."""
    c = Case("global_norm", R)
    S = pick_shape(R)
    c.inp("x", S, V.normal(S))
    if k % 2 == 0:
        c.note = "global_norm(x)"
        c.term("global_norm(x)", lambda e: np.sqrt(np.sum(e["x"] * e["x"])), [])
    else:
        c.note = "global_norm((x, x * 2.0))"
        c.term("global_norm((x, x * 2.0))", lambda e: np.sqrt(5.0 * np.sum(e["x"] * e["x"])), [])
    return c


def gen_like(op, expr, fn):
    """A term using op(x) (zeros_like, ones_like): the result has x's layout and no
    gradient of its own."""
    def gen(R, V, k, K):
        c = Case(op, R)
        S = pick_shape(R)
        c.inp("x", S, V.normal(S))
        c.note = expr
        c.term(expr, lambda e: fn(e["x"]), S)
        return c
    return gen


def gen_max_over(R, V, k, K):
    c = Case("max_over", R)
    S = pick_shape(R)
    c.inp("x", S, V.distinct(S))
    if k % 3 == 0:
        c.note = "max_over(x) (all dims)"
        c.term("max_over(x)", lambda e: np.max(e["x"]), [])
    else:
        d, dw = rand_axis(R, len(S))
        c.note = "max_over(x, axis: %d)" % dw
        c.term("max_over(x, axis: %d)" % dw, lambda e: np.max(e["x"], axis=d), S[:d] + S[d + 1:])
    return c


def gen_softmax(op):
    npf = {"softmax": softmax, "log_softmax": log_softmax}[op]

    def gen(R, V, k, K):
        c = Case(op, R)
        S = pick_shape(R)
        c.inp("x", S, V.normal(S, 1.5))
        if k % 3 == 0:
            c.note = "%s(x) (default axis)" % op
            c.term("%s(x)" % op, lambda e: npf(e["x"], axis=-1), S)
        else:
            d, dw = rand_axis(R, len(S))
            c.note = "%s(x, axis: %d)" % (op, dw)
            c.term("%s(x, axis: %d)" % (op, dw), lambda e: npf(e["x"], axis=d), S)
        return c
    return gen


def gen_transpose(R, V, k, K):
    c = Case("transpose", R)
    S = pick_shape(R)
    perms = [p for p in itertools.permutations(range(len(S))) if list(p) != list(range(len(S)))]
    p = list(R.choice(perms))
    c.note = "transpose(x, %s)" % p
    c.inp("x", S, V.normal(S))
    c.term("transpose(x, %s)" % p, lambda e: np.transpose(e["x"], p), [S[i] for i in p])
    return c


RESHAPES = {32: [[32], [2, 16], [16, 2], [8, 4], [4, 8], [2, 4, 4], [4, 2, 4], [2, 2, 8], [1, 32], [4, 8, 1]],
            64: [[64], [8, 8], [2, 32], [4, 16], [16, 4], [4, 4, 4], [2, 4, 8], [8, 2, 4], [2, 2, 16], [64, 1],
                 [4, 2, 8]]}


def gen_reshape(R, V, k, K):
    c = Case("reshape", R)
    S = pick_shape(R)
    T = R.choice([t for t in RESHAPES[int(np.prod(S))] if t != S])
    c.note = "reshape(x %s, %s)" % (S, T)
    c.inp("x", S, V.normal(S))
    c.term("reshape(x, %s)" % T, lambda e: np.reshape(e["x"], T), T)
    return c


def gen_broadcast(R, V, k, K):
    c = Case("broadcast", R)
    S = pick_shape(R)
    variant = R.randrange(3)
    if variant == 0:
        sx, T = S, [R.choice([2, 3])] + S
    elif variant == 1:
        d = R.randrange(len(S))
        sx, T = [1 if e == d else n for e, n in enumerate(S)], S
    else:
        d = R.randrange(len(S))
        sx, T = [1 if e == d else n for e, n in enumerate(S)], [3] + S
    c.note = "broadcast(x %s, %s)" % (sx, T)
    c.inp("x", sx, V.normal(sx))
    c.term("broadcast(x, %s)" % T, lambda e: np.broadcast_to(e["x"], T), T)
    return c


def gen_concat(R, V, k, K):
    c = Case("concat", R)
    S = pick_shape(R)
    d, dw = rand_axis(R, len(S))
    names = ["x", "y", "z"][:R.choice([2, 3])]
    for n in names:
        sh = [R.choice([2, 4, 8]) if e == d else m for e, m in enumerate(S)]
        c.inp(n, sh, V.normal(sh))
    T = list(S)
    T[d] = sum(i.shape[d] for i in c.inputs)
    c.note = "concat([%s], axis: %d), shapes %s" % (", ".join(names), dw, [i.shape for i in c.inputs])
    c.term("concat([%s], axis: %d)" % (", ".join(names), dw),
           lambda e: np.concatenate([e[n] for n in names], axis=d), T)
    return c


def gen_slice(R, V, k, K):
    c = Case("slice", R)
    S = pick_shape(R)
    d, dw = rand_axis(R, len(S))
    size = R.randint(1, S[d] - 1) if S[d] > 1 else 1
    start = R.randint(0, S[d] - size)
    T = list(S)
    T[d] = size
    c.note = "slice(x %s, axis: %d, start: %d, size: %d)" % (S, dw, start, size)
    c.inp("x", S, V.normal(S))
    c.term("slice(x, axis: %d, start: %d, size: %d)" % (dw, start, size),
           lambda e: np.take(e["x"], range(start, start + size), axis=d), T)
    return c


EINSUM_SPECS = ["ij,jk->ik",        # matrix product
                "bij,bjk->bik",     # batched
                "ij,jk->ki",        # transposed output
                "ij->ji",           # single operand, transposed
                "bij->jb",          # single operand, reduced and permuted
                "ij,ij->i",         # element-wise product reduced
                "i,j->ij",          # outer product
                "bsd,dh->bhs",      # batched, permuted output
                "ij,kj->"]          # full contraction to a scalar


def gen_einsum(R, V, k, K):
    c = Case("einsum", R)
    specs = [s for j, s in enumerate(EINSUM_SPECS) if j % K == k % K] or [R.choice(EINSUM_SPECS)]
    notes = []
    for j, spec in enumerate(specs):
        ins, out = spec.split("->")
        ins = ins.split(",")
        while True:
            size = {ch: R.choice([2, 4, 8]) for ch in sorted(set("".join(ins)))}
            if all(int(np.prod([size[ch] for ch in s])) <= 64 for s in ins):
                break
        names = []
        for m, s in enumerate(ins):
            n = "e%d%s" % (j, "xyz"[m])
            sh = [size[ch] for ch in s]
            c.inp(n, sh, V.normal(sh))
            names.append(n)
        notes.append("%s %s" % (spec, [[size[ch] for ch in s] for s in ins]))
        c.term("einsum(\"%s\", %s)" % (spec, ", ".join(names)),
               (lambda spec, names: lambda e: np.einsum(spec, *[e[n] for n in names]))(spec, names),
               [size[ch] for ch in out])
        c.contractions.append((spec, names, c.terms[-1]))
    c.note = "; ".join(notes)
    return c


def gen_embedding(R, V, k, K):
    c = Case("embedding", R)
    Vn, D = R.choice([(8, 4), (16, 4), (8, 8), (4, 8)])
    ids_shape = R.choice([[8], [4], [2, 4], [4, 2]])
    idt = R.choice(["i64", "i32"])
    ids = V.r.integers(0, Vn, size=ids_shape)
    ids.reshape(-1)[0] = ids.reshape(-1)[-1]      # a repeated id: its rows' gradients add up
    c.note = "embedding(table [%d, %d], ids %s %s)" % (Vn, D, idt, ids_shape)
    c.inp("table", [Vn, D], V.normal([Vn, D]))
    c.inp("ids", ids_shape, ids, diff=False, dtype=idt)
    c.term("embedding(table, ids)", lambda e: e["table"][e["ids"]], ids_shape + [D])
    return c


def _group_split(R, S, need_single=False):
    """A dim d and an axis group that divides it: (d, axes)."""
    opts = [(d, axes) for d, n in enumerate(S) for axes in SINGLE_SPLITS
            if n % axes_size(axes) == 0 and (len(axes) == 1 or not need_single)]
    return R.choice(opts)


def _other_axis(axes):
    return "b" if axes == ("a",) else "a"


def gen_all_reduce(R, V, k, K):
    c = Case("all_reduce", R)
    S = pick_shape(R)
    d, grp = _group_split(R, S)
    lay = {d: grp}
    if len(grp) == 1 and R.random() < 0.5:
        others = [e for e, n in enumerate(S) if e != d and n % 2 == 0]
        lay[R.choice(others)] = (_other_axis(grp),)
    over = grp if len(grp) == 1 or R.random() < 0.6 else (R.choice(grp),)
    c.inp("x", S, V.normal(S), layout=lay)
    expr = "all_reduce(sum(x, axis: %d), over: %s)" % (d, ax_str(over))
    c.note = expr
    c.term(expr, lambda e: np.sum(e["x"], axis=d), S[:d] + S[d + 1:])
    return c


def gen_reduce_scatter(R, V, k, K):
    c = Case("reduce_scatter", R)
    while True:
        S = pick_shape(R)
        d, grp = _group_split(R, S)
        lay = {d: grp}
        if len(grp) == 1 and R.random() < 0.5:
            others = [e for e, n in enumerate(S) if e != d and n % 2 == 0]
            lay[R.choice(others)] = (_other_axis(grp),)
        rdims = [e for e in range(len(S)) if e != d]
        targets = [j for j, e in enumerate(rdims)
                   if S[e] % (axes_size(grp) * (axes_size(lay[e]) if e in lay else 1)) == 0]
        if targets:
            break
    j = R.choice(targets)
    c.inp("x", S, V.normal(S), layout=lay)
    expr = "reduce_scatter(sum(x, axis: %d), over: %s, dim: %d)" % (d, ax_str(grp), j)
    c.note = expr
    c.term(expr, lambda e: np.sum(e["x"], axis=d), S[:d] + S[d + 1:])
    return c


def gen_all_gather(R, V, k, K):
    c = Case("all_gather", R)
    S = pick_shape(R)
    d, grp = _group_split(R, S)
    lay = {d: grp}
    if len(grp) == 1 and R.random() < 0.5:
        others = [e for e, n in enumerate(S) if e != d and n % 2 == 0]
        lay[R.choice(others)] = (_other_axis(grp),)
    over = grp if len(grp) == 1 or R.random() < 0.5 else (grp[-1],)     # all, or the minor axis
    c.inp("x", S, V.normal(S), layout=lay)
    expr = "all_gather(x, over: %s, dim: %d)" % (ax_str(over), d)
    c.note = expr
    c.term(expr, lambda e: e["x"], S)
    return c


def gen_all_to_all(R, V, k, K):
    c = Case("all_to_all", R)
    while True:
        S = pick_shape(R)
        d1, grp = _group_split(R, S)
        tos = [e for e, n in enumerate(S) if e != d1 and n % axes_size(grp) == 0]
        if tos:
            break
    d2 = R.choice(tos)
    lay = {d1: grp}
    rest = [e for e, n in enumerate(S) if e not in (d1, d2) and n % 2 == 0]
    if len(grp) == 1 and rest and R.random() < 0.5:
        lay[R.choice(rest)] = (_other_axis(grp),)
    c.inp("x", S, V.normal(S), layout=lay)
    expr = "all_to_all(x, over: %s, from: %d, to: %d)" % (ax_str(grp), d1, d2)
    c.note = expr
    c.term(expr, lambda e: e["x"], S)
    return c


def gen_reshard(R, V, k, K):
    c = Case("reshard", R)
    S = pick_shape(R)
    src = random_layout(R, S)
    while True:
        dst = random_layout(R, S)
        if dst != src:
            break
    c.inp("x", S, V.normal(S), layout=src)
    expr = "reshard(x, %s)" % layout_str(dst)
    c.note = "%s -> %s" % (layout_str(src), layout_str(dst))
    c.term(expr, lambda e: e["x"], S)
    return c


def gen_call(R, V, k, K):
    c = Case("call", R)
    S = pick_shape(R)
    x = c.inp("x", S, V.normal(S))
    pl, rl = random_layout(R, S), random_layout(R, S)
    c.note = "h(x) with x %s, parameter %s, result %s" % (describe_layout(x.layout), layout_str(pl), layout_str(rl))
    c.helpers.append("fn h_@ID(v: %s) -> %s {\n    v * tanh(v) + sigmoid(v)\n}"
                     % (type_str("f32", S, pl), type_str("f32", S, rl)))
    c.term("h_@ID(x)", lambda e: e["x"] * np.tanh(e["x"]) + sigmoid(e["x"]), S)
    return c


def gen_for(R, V, k, K):
    c = Case("for", R)
    S = pick_shape(R)
    n = R.choice([2, 3])
    c.inp("x", S, V.normal(S))
    c.body += ["var y = x;", "for i in 0..%d { y = tanh(y) * 1.5 + x * 0.25; }" % n]

    def fn(e):
        y = e["x"]
        for _ in range(n):
            y = np.tanh(y) * 1.5 + e["x"] * 0.25
        return y
    c.note = "a var updated in a loop of %d" % n
    c.term("y", fn, S)
    return c


def gen_if(R, V, k, K):
    c = Case("if", R)
    S = pick_shape(R)
    sign = 1.0 if k % 2 == 0 else -1.0
    c.inp("x", S, V.normal(S))
    c.inp("c", S, sign * V.positive(S), diff=False)
    c.body.append("let y = if sum(c) > 0.0 { exp(x) * 0.5 } else { x * x * c };")
    c.note = "the %s branch" % ("then" if sign > 0 else "else")
    c.term("y", lambda e: np.exp(e["x"]) * 0.5 if np.sum(e["c"]) > 0 else e["x"] * e["x"] * e["c"], S)
    return c


def gen_hvp(R, V, k, K):
    """grad of a function that takes a gradient: sum(grad(h)(x, ..) * v) has gradient H v
    (v is the weight w0); the reference is finite differences of the analytic grad of h."""
    c = Case("grad", R)
    variant = k % 3
    if variant == 0:
        c.note = "H v of h = sum(tanh(x @ m) * cc) + 0.1 * sum(x * x * x)"
        c.inp("x", [4, 8], V.normal([4, 8]))
        c.inp("m", [8, 4], V.normal([8, 4], 0.5), diff=False)
        c.inp("cc", [4, 4], V.normal([4, 4]), diff=False)
        xm, mm, cm = (i.mtype() for i in c.inputs)
        c.contractions.append(("ij,jk->ik", ["x", "m"], None))
        c.helpers.append("fn h_@ID(x: %s, m: %s, cc: %s) -> f32 {\n"
                         "    sum(tanh(x @ m) * cc) + 0.1 * sum(x * x * x)\n}" % (xm, mm, cm))

        def fn(e):
            t = np.tanh(e["x"] @ e["m"])
            return ((1.0 - t * t) * e["cc"]) @ e["m"].T + 0.3 * e["x"] ** 2
        c.term("grad(h_@ID)(x, m, cc)", fn, [4, 8])
    elif variant == 1:
        S = pick_shape(R)
        c.note = "H v of h = sum(log_softmax(x, axis: 1) * cc) + 0.5 * sum(x * x * x)"
        c.inp("x", S, V.normal(S))
        c.inp("cc", S, V.normal(S), diff=False)
        xm, cm = (i.mtype() for i in c.inputs)
        c.helpers.append("fn h_@ID(x: %s, cc: %s) -> f32 {\n"
                         "    sum(log_softmax(x, axis: 1) * cc) + 0.5 * sum(x * x * x)\n}" % (xm, cm))

        def fn(e):
            return e["cc"] - softmax(e["x"], axis=1) * np.sum(e["cc"], axis=1, keepdims=True) + 1.5 * e["x"] ** 2
        c.term("grad(h_@ID)(x, cc)", fn, S)
    else:
        S = pick_shape(R)
        c.note = "H v of h = sum(exp(x) * cc) + sum(sigmoid(x) * x)"
        c.inp("x", S, V.normal(S))
        c.inp("cc", S, V.normal(S), diff=False)
        xm, cm = (i.mtype() for i in c.inputs)
        c.helpers.append("fn h_@ID(x: %s, cc: %s) -> f32 {\n"
                         "    sum(exp(x) * cc) + sum(sigmoid(x) * x)\n}" % (xm, cm))

        def fn(e):
            s = sigmoid(e["x"])
            return np.exp(e["x"]) * e["cc"] + s + e["x"] * s * (1.0 - s)
        c.term("grad(h_@ID)(x, cc)", fn, S)
    return c


def gen_value_and_grad(R, V, k, K):
    """Differentiates through value_and_grad: both its value and its gradient."""
    c = Case("value_and_grad", R)
    S = pick_shape(R)
    c.inp("x", S, V.normal(S))
    c.inp("cc", S, V.normal(S), diff=False)
    xm, cm = (i.mtype() for i in c.inputs)
    c.helpers.append("fn h_@ID(x: %s, cc: %s) -> f32 {\n"
                     "    sum(sigmoid(x) * cc) + 0.5 * sum(x * x)\n}" % (xm, cm))
    c.body.append("let (l, g) = value_and_grad(h_@ID)(x, cc);")
    c.note = "l + sum(g * v), (l, g) = value_and_grad(h)(x, cc)"

    def g(e):
        s = sigmoid(e["x"])
        return s * (1.0 - s) * e["cc"] + e["x"]
    c.term("g", g, S)
    c.term("l", lambda e: np.sum(sigmoid(e["x"]) * e["cc"]) + 0.5 * np.sum(e["x"] ** 2), [])
    return c


# ============================================================================ the table

def NOT(reason):
    return ("not differentiable", reason)


def DIFF(gen):
    return ("differentiable", gen)


# Every built-in of src/sema/builtins.def.
BUILTINS = {
    "zeros": NOT("creation: no input"),
    "ones": NOT("creation: no input"),
    "full": NOT("creation: no tensor input (the value is a literal)"),
    "iota": NOT("creation: integer positions"),
    "random_normal": NOT("creation: random numbers from a seed"),
    "random_uniform": NOT("creation: random numbers from a seed"),
    "permutation": NOT("creation: an i64 permutation from a seed"),
    "zeros_like": DIFF(gen_like("zeros_like", "x * 3.0 + zeros_like(x) * x", lambda x: x * 3.0)),
    "ones_like": DIFF(gen_like("ones_like", "ones_like(x) * x * x", lambda x: x * x)),
    "global_norm": DIFF(gen_global_norm),
    "exp": DIFF(gen_unary("exp", np.exp, "any")),
    "log": DIFF(gen_unary("log", np.log, "pos")),
    "sqrt": DIFF(gen_unary("sqrt", np.sqrt, "pos")),
    "rsqrt": DIFF(gen_unary("rsqrt", lambda v: 1.0 / np.sqrt(v), "pos")),
    "tanh": DIFF(gen_unary("tanh", np.tanh, "any")),
    "cos": DIFF(gen_unary("cos", np.cos, "any")),
    "sin": DIFF(gen_unary("sin", np.sin, "any")),
    "sigmoid": DIFF(gen_unary("sigmoid", sigmoid, "any")),
    "relu": DIFF(gen_unary("relu", lambda v: np.maximum(v, 0.0), "kink")),
    "gelu": DIFF(gen_unary("gelu", gelu_tanh, "any")),
    "softplus": DIFF(gen_unary("softplus", lambda v: np.logaddexp(0.0, v), "any")),
    "abs": DIFF(gen_unary("abs", np.abs, "kink")),
    "max": DIFF(gen_maxmin("max")),
    "min": DIFF(gen_maxmin("min")),
    "select": DIFF(gen_select),
    "cast": DIFF(gen_cast),
    "isfinite": NOT("a bool result: no gradient"),
    "sum": DIFF(gen_reduce("sum")),
    "mean": DIFF(gen_reduce("mean")),
    "max_over": DIFF(gen_max_over),
    "softmax": DIFF(gen_softmax("softmax")),
    "log_softmax": DIFF(gen_softmax("log_softmax")),
    "transpose": DIFF(gen_transpose),
    "reshape": DIFF(gen_reshape),
    "broadcast": DIFF(gen_broadcast),
    "concat": DIFF(gen_concat),
    "slice": DIFF(gen_slice),
    "einsum": DIFF(gen_einsum),
    "embedding": DIFF(gen_embedding),
    "one_hot": NOT("integer ids in, a constant 0/1 tensor out"),
    "reshard": DIFF(gen_reshard),
    "all_reduce": DIFF(gen_all_reduce),
    "all_gather": DIFF(gen_all_gather),
    "reduce_scatter": DIFF(gen_reduce_scatter),
    "all_to_all": DIFF(gen_all_to_all),
    "grad": DIFF(gen_hvp),                       # second derivatives: Hessian-vector products
    "value_and_grad": DIFF(gen_value_and_grad),  # differentiated through
    "print": NOT("I/O"),
    "load": NOT("I/O"),
    "arg": NOT("a program argument: a run-time input"),
    "save": NOT("I/O"),
}

# Operators (not built-ins, but element-wise GIR ops and contractions all the same).
OPERATORS = {
    "+": DIFF(gen_arith("+")),
    "-": DIFF(gen_arith("-")),
    "*": DIFF(gen_arith("*")),
    "/": DIFF(gen_arith("/")),
    "%": DIFF(gen_arith("%")),
    "-x": DIFF(gen_neg),
    "@": DIFF(gen_matmul),
    "comparisons, ! && ||": NOT("bool results"),
}

# Language constructs whose GIR ops (call, for, if) the backward pass handles.
CONSTRUCTS = {
    "call": DIFF(gen_call),
    "for": DIFF(gen_for),
    "if": DIFF(gen_if),
}

COERCION = "inserted by layout coercions; exercised by the random layouts"
# Every GIR op of src/ir/ops.def: (the entries whose programs must contain it, or None
# and the reason it needs no adjoint test).
GIR_OPS = {
    "Constant": (None, "a literal: nothing to differentiate"),
    "Create": (None, "creation built-ins: no input"),
    "Load": (None, "I/O"),
    "Arg": (None, "a program argument: a run-time input"),
    "Elementwise": (["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "abs", "max", "min",
                     "select", "cast", "+", "-", "*", "/", "%", "-x"], None),
    "Reduce": (["sum", "mean", "max_over", "softmax", "log_softmax"], None),
    "Contract": (["einsum", "@"], None),
    "AllReduce": (["all_reduce"], None),
    "ReduceScatter": (["reduce_scatter"], None),
    "AllGather": (["all_gather"], None),
    "AllToAll": (["all_to_all"], None),
    "LocalSlice": ("coercion", COERCION),
    "MakePartial": ("coercion", COERCION),
    "Place": ("coercion", COERCION + " (mesh-free weights)"),
    "Reshape": (["reshape"], None),
    "Broadcast": (["broadcast"], None),
    "Slice": (["slice"], None),
    "Pad": (None, "the adjoint of a run-time `slice` (tests/e2e/rt_slice_grad.msh); its own adjoint is that slice"),
    "Concat": (["concat"], None),
    "OneHot": (None, "integer ids in, a constant 0/1 tensor out"),
    "Embedding": (["embedding"], None),
    "Call": (["call"], None),
    "Print": (None, "I/O"),
    "Save": (None, "I/O"),
    "For": (["for"], None),
    "If": (["if"], None),
    "Grad": (["grad", "value_and_grad"], None),
}


# Every element-wise function (the rows of src/ir/ew.def) and reduction kind (enum
# ReduceKind), printed `elementwise NAME` / `reduce NAME` in the GIR: as GIR_OPS.
EW_KINDS = {
    "Add": (["+"], None), "Sub": (["-"], None), "Mul": (["*"], None), "Div": (["/"], None),
    "Mod": (["%"], None), "Max": (["max"], None), "Min": (["min"], None),
    "Eq": (None, "bool result"), "Ne": (None, "bool result"), "Lt": (None, "bool result"),
    "Le": (None, "bool result"), "Gt": (None, "bool result"), "Ge": (None, "bool result"),
    "And": (None, "bool result"), "Or": (None, "bool result"),
    "Neg": (["-x"], None), "Not": (None, "bool result"),
    "Exp": (["exp"], None), "Log": (["log"], None), "Sqrt": (["sqrt"], None), "Rsqrt": (["rsqrt"], None),
    "Tanh": (["tanh"], None), "Cos": (["cos"], None), "Sin": (["sin"], None), "Sigmoid": (["sigmoid"], None), "Relu": (["relu"], None),
    "Gelu": (["gelu"], None), "Softplus": (["softplus"], None), "Abs": (["abs"], None), "IsFinite": (None, "bool result"), "Select": (["select"], None), "Cast": (["cast"], None),
}
REDUCE_KINDS = {"Sum": (["sum"], None), "Mean": (["mean"], None), "Max": (["max_over"], None)}
GIR_H = os.path.join(ROOT, "src", "ir", "gir.h")
EW_DEF = os.path.join(ROOT, "src", "ir", "ew.def")


def read_enum(name):
    if name == "Ew":  # the element-wise functions are the rows of src/ir/ew.def
        with open(EW_DEF) as f:
            return re.findall(r"^MESHC_EW\((\w+),", f.read(), re.M)
    with open(GIR_H) as f:
        m = re.search(r"enum\s+class\s+%s\b[^{]*\{([^}]*)\}" % name, f.read())
    if not m:
        return None
    return [e.strip() for e in re.sub(r"//[^\n]*", "", m.group(1)).split(",") if e.strip()]


def read_defs():
    with open(BUILTINS_DEF) as f:
        builtins = re.findall(r"^\s*MESHC_BUILTIN\(\s*(\w+)\s*,\s*\"([^\"]*)\"\s*\)", f.read(), re.M)
    with open(OPS_DEF) as f:
        ops = re.findall(r"^\s*MESHC_OP\(\s*(\w+)\s*,\s*\"([^\"]*)\"\s*\)", f.read(), re.M)
    return builtins, ops


def check_tables(builtins, ops):
    """Problems: entries of the .def files the table lacks, and stale table entries."""
    problems = []
    names = [b for b, _ in builtins]
    for b, group in builtins:
        if b not in BUILTINS:
            problems.append("built-in `%s` (group %s) of builtins.def has no entry in grad_builtins.py's "
                            "BUILTINS: classify it (a gradient test generator, or the reason it has none)" % (b, group))
    for b in BUILTINS:
        if b not in names:
            problems.append("BUILTINS entry `%s` is not a built-in of builtins.def (stale)" % b)
    op_names = [o for o, _ in ops]
    for o, printed in ops:
        if o not in GIR_OPS:
            problems.append("GIR op %s (`%s`) of ops.def has no entry in grad_builtins.py's GIR_OPS: "
                            "give it an adjoint test (the entries whose programs contain it) or the "
                            "reason it needs none" % (o, printed))
    for o in GIR_OPS:
        if o not in op_names:
            problems.append("GIR_OPS entry %s is not an op of ops.def (stale)" % o)
    for enum, table, tname in (("Ew", EW_KINDS, "EW_KINDS"), ("ReduceKind", REDUCE_KINDS, "REDUCE_KINDS")):
        kinds = read_enum(enum)
        if kinds is None:
            problems.append("no `enum class %s` in %s" % (enum, GIR_H))
            continue
        for e in kinds:
            if e not in table:
                problems.append("%s::%s of gir.h has no entry in grad_builtins.py's %s: give it an adjoint test "
                                "or the reason it needs none" % (enum, e, tname))
        for e in table:
            if e not in kinds:
                problems.append("%s entry %s is not in gir.h's enum %s (stale)" % (tname, e, enum))
    entries = entry_table()
    for tname, table in (("GIR_OPS", GIR_OPS), ("EW_KINDS", EW_KINDS), ("REDUCE_KINDS", REDUCE_KINDS)):
        for o, (needs, _why) in table.items():
            if isinstance(needs, list):
                for n in needs:
                    if n not in entries or entries[n][0] != "differentiable":
                        problems.append("%s[%s] names `%s`, which is not a differentiable entry" % (tname, o, n))
    return problems


def entry_table():
    """name -> (status, generator or reason, kind)."""
    out = {}
    for kind, table in (("built-in", BUILTINS), ("operator", OPERATORS), ("construct", CONSTRUCTS)):
        for n, (status, what) in table.items():
            out[n] = (status, what, kind)
    return out


# ============================================================================ running

def run_cmd(cmd, cwd=None, timeout=300):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), time.time() - t0
    except OSError as e:
        return -1, "", "cannot run %s: %s" % (cmd[0], e), time.time() - t0
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode("utf-8", "replace"), (e.stderr or b"").decode("utf-8", "replace"), \
            time.time() - t0


def clip(text, n=2000):
    text = text.rstrip()
    return text if len(text) <= n else text[:n // 2] + "\n    ...\n" + text[-n // 2:]


def indent(text, prefix="    "):
    return "\n".join(prefix + line for line in text.splitlines())


VARIANTS = (("declared", []), ("one-device", ["--mesh", ONE_DEVICE]))


def build_and_run(meshc, src_path, cases, variant, flags, work):
    """Builds src_path with flags, runs it in a fresh directory holding the cases'
    inputs. Returns (error text or None, run directory)."""
    stem = os.path.splitext(src_path)[0]
    exe = "%s.%s" % (stem, variant)
    rc, out, err, _ = run_cmd([meshc, "build", src_path, "-o", exe] + flags)
    if rc != 0:
        return "meshc build%s failed (status %s):\n%s" % ("".join(" " + f for f in flags), rc, clip(out + err)), None
    rundir = "%s.%s.run" % (stem, variant)
    shutil.rmtree(rundir, ignore_errors=True)
    os.makedirs(rundir)
    for c in cases:
        for name, value in c.files().items():
            np.save(os.path.join(rundir, name), value)
    rc, out, err, _ = run_cmd([exe], cwd=rundir, timeout=120)
    if rc != 0:
        return "the program (%s) failed (status %s):\n%s" % (variant, rc, clip(out + err)), None
    return None, rundir


def compare(case, rundir, ref):
    """Problems of one case's saved loss and gradients (list of str), and the worst
    error ratio (error / tolerance)."""
    loss, grads = ref
    problems, worst = [], 0.0
    want = [("loss", np.float64(loss), "%s_loss.npy" % case.uid)]
    want += [("d/d%s" % n, g, "%s_g_%s.npy" % (case.uid, n)) for n, g in grads.items()]
    for label, ref_v, fname in want:
        path = os.path.join(rundir, fname)
        if not os.path.exists(path):
            problems.append("%s: %s was not saved" % (label, fname))
            continue
        got = np.load(path)
        ref_v = np.asarray(ref_v)
        if label != "loss":
            inp = [i for i in case.inputs if "d/d" + i.name == label][0]
            if got.dtype != inp.value.dtype:
                problems.append("%s: dtype %s, expected %s" % (label, got.dtype, inp.value.dtype))
        if got.shape != ref_v.shape:
            problems.append("%s: shape %s, expected %s" % (label, got.shape, ref_v.shape))
            continue
        gv = got.astype(np.float64)
        err = np.abs(gv - ref_v)
        tol = ATOL + RTOL * np.abs(ref_v)
        bad = ~(err <= tol)
        ratio = float(np.max(err / tol)) if err.size else 0.0
        worst = max(worst, ratio if np.isfinite(ratio) else float("inf"))
        if bad.any():
            idx = np.unravel_index(int(np.argmax(np.where(np.isfinite(err), err, np.inf))), err.shape) \
                if err.ndim else ()
            msg = "%s: %d of %d values off, max error %.3g at %s (got %.6g, expected %.6g)" % (
                label, int(bad.sum()), bad.size, float(np.nanmax(err)) if err.size else 0.0, [int(i) for i in idx],
                float(gv[idx]), float(ref_v[idx]))
            if bad.size <= 64:
                msg += "\n      got:\n%s\n      expected:\n%s" % (
                    indent(np.array2string(gv, precision=5, suppress_small=True), "        "),
                    indent(np.array2string(ref_v, precision=5, suppress_small=True), "        "))
            problems.append(msg)
    return problems, worst


OP_LINE = re.compile(r"^\s+(?:%[^=]*=\s*)?([a-z_]+)\b(?:\s+([a-z_]+)\b)?")
FUNC_LINE = re.compile(r"^func @([^(]+)\(")


def gir_ops(meshc, src_path):
    """{function name: set of printed GIR op names} of the checked (forward) GIR, or
    None when the emission fails."""
    # In the work folder: `build --emit=gir-checked` may leave an executable STEM there.
    rc, out, err, _ = run_cmd([meshc, "build", src_path, "--emit=gir-checked"], cwd=os.path.dirname(src_path))
    if rc != 0:
        return None
    funcs, cur = {}, None
    for line in out.splitlines():
        m = FUNC_LINE.match(line)
        if m:
            cur = funcs.setdefault(m.group(1), set())
            continue
        m = OP_LINE.match(line)
        if m and cur is not None:
            cur.add(m.group(1))
            if m.group(1) in ("elementwise", "reduce") and m.group(2):
                cur.add("%s %s" % (m.group(1), m.group(2)))
    return funcs


def known_bug(case, failure=None):
    """The KNOWN_BUGS entry that explains the case's failure (failure: its text), or,
    with failure None, the entry whose layout predicate matches the case (XPASS)."""
    for b in KNOWN_BUGS:
        names = b["builtin"] if isinstance(b["builtin"], (tuple, list)) else (b["builtin"],)
        if "*" not in names and case.builtin not in names:
            continue
        if b.get("match") is not None and not b["match"](case):
            continue
        if b.get("error") is not None and (failure is None or not re.search(b["error"], failure)):
            continue
        return b
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--meshc", default=os.path.join(ROOT, "build", "meshc"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=3, help="cases per differentiable entry (default 3)")
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--only", default=None, help="comma-separated entries to test")
    ap.add_argument("-j", type=int, default=2, help="parallel builds/runs (default 2)")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    t_start = time.time()
    meshc = os.path.abspath(args.meshc)
    if not os.path.exists(meshc):
        print("no meshc at %s" % meshc)
        return 1

    builtins, ops = read_defs()
    problems = check_tables(builtins, ops)
    for p in problems:
        print("FAIL table: " + p)

    entries = entry_table()
    names = [n for n, e in entries.items() if e[0] == "differentiable"]
    if args.only:
        only = args.only.split(",")
        unknown = [n for n in only if n not in entries]
        if unknown:
            print("unknown entries: %s" % ", ".join(unknown))
            return 2
        names = [n for n in names if n in only]

    # Generate: K programs, program k holds case k of every entry.
    K = max(1, args.cases)
    R = random.Random(args.seed)
    nrng = np.random.default_rng(args.seed)
    V = Vals(nrng)
    programs = []
    uid = 0
    for k in range(K):
        cases = []
        for n in names:
            c = entries[n][1](R, V, k, K)
            c.builtin = n
            c.uid = "c%d" % uid
            uid += 1
            c.finish(nrng)
            cases.append(c)
        programs.append(cases)

    own_work = args.work is None
    work = tempfile.mkdtemp(prefix="grad-builtins-") if own_work else os.path.abspath(args.work)
    if not own_work:
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)

    # References (float64 finite differences), computed while programs build.
    refs = {}

    # Results: case uid -> {variant: (ok, problems, worst)}
    results = {}
    seen_ops = {}        # entry name -> set of GIR ops in its forward functions

    def record_ops(funcs, cases):
        if funcs is None:
            return
        for c in cases:
            s = seen_ops.setdefault(c.builtin, set())
            for fn, opset in funcs.items():
                if fn == c.fname() or fn.startswith("h_%s" % c.uid):
                    s |= opset

    def job(tag, cases, variant, flags):
        src = os.path.join(work, tag + ".msh")
        return variant, build_and_run(meshc, src, cases, variant, flags, work)

    pool = concurrent.futures.ThreadPoolExecutor(max(1, args.j))
    jobs = []
    for k, cases in enumerate(programs):
        tag = "prog%d" % k
        with open(os.path.join(work, tag + ".msh"), "w") as f:
            f.write(program(cases))
        for variant, flags in VARIANTS:
            jobs.append((tag, cases, variant, pool.submit(job, tag, cases, variant, flags)))
        jobs.append((tag, cases, "ops", pool.submit(gir_ops, meshc, os.path.join(work, tag + ".msh"))))
    for cases in programs:
        for c in cases:
            refs[c.uid] = c.reference()

    retry = []       # (cases, variant, flags, error) of programs that failed to build/run
    for tag, cases, variant, fut in jobs:
        if variant == "ops":
            record_ops(fut.result(), cases)
            continue
        _v, (error, rundir) = fut.result()
        if error:
            if args.v:
                print("note: %s (%s) failed as one program; building its cases one by one\n%s"
                      % (tag, variant, indent(error)))
            retry.append((cases, variant, dict(VARIANTS)[variant], error))
            continue
        for c in cases:
            p, worst = compare(c, rundir, refs[c.uid])
            results.setdefault(c.uid, {})[variant] = (not p, p, worst)

    # Programs that failed as a whole: one program per case, to name the failing one.
    single = []
    for cases, variant, flags, _error in retry:
        for c in cases:
            tag = "single_%s" % c.uid
            path = os.path.join(work, tag + ".msh")
            with open(path, "w") as f:
                f.write(program([c]))
            single.append((c, variant, pool.submit(job, tag, [c], variant, flags)))
            if not any(x == c.builtin for x in seen_ops):
                single.append((c, "ops", pool.submit(gir_ops, meshc, path)))
    for c, variant, fut in single:
        if variant == "ops":
            record_ops(fut.result(), [c])
            continue
        _v, (error, rundir) = fut.result()
        if error:
            results.setdefault(c.uid, {})[variant] = (False, [error], float("inf"))
        else:
            p, worst = compare(c, rundir, refs[c.uid])
            results.setdefault(c.uid, {})[variant] = (not p, p, worst)
    pool.shutdown()

    # Report failures.
    failed = bool(problems)
    for cases, variant, flags, error in retry:
        if all(results.get(c.uid, {}).get(variant, (False,))[0] for c in cases):
            failed = True
            print("\nFAIL: a program of %d cases failed (%s) although each case passes alone:\n%s"
                  % (len(cases), variant, indent(error)))
    xfails, xpasses = [], []
    per_entry = {}
    for cases in programs:
        for c in cases:
            res = results.get(c.uid, {})
            ok = all(res.get(v, (False,))[0] for v, _ in VARIANTS)
            bug = known_bug(c, None if ok else "\n".join(p for r in res.values() for p in r[1]))
            st = per_entry.setdefault(c.builtin, {"cases": 0, "pass": 0, "xfail": 0, "worst": 0.0})
            st["cases"] += 1
            st["worst"] = max([st["worst"]] + [r[2] for r in res.values()])
            if ok:
                st["pass"] += 1
                if bug:
                    xpasses.append((c, bug))
                continue
            if bug:
                st["xfail"] += 1
                xfails.append((c, bug))
                if not args.v:
                    continue
            else:
                failed = True
            print("\n%s %s (case %s): %s" % ("XFAIL" if bug else "FAIL", c.builtin, c.uid, c.note))
            print("  layouts: %s; %s" % (c.layouts(), c.mode))
            for v, _ in VARIANTS:
                r = res.get(v)
                if r is None:
                    print("  %s: not run" % v)
                elif not r[0]:
                    print("  %s (worst error/tolerance %.3g):" % (v, r[2]))
                    for p in r[1]:
                        print(indent(p, "    "))
            print("  program:\n" + indent(program([c]), "    | "))

    # GIR op coverage: each differentiable op must be in the forward code of an entry
    # that names it.
    all_seen = set().union(*seen_ops.values()) if seen_ops else set()
    printed = dict(ops)
    coverage = []
    kinds = [(o, printed[o], needs, why) for o, (needs, why) in GIR_OPS.items() if o in printed]
    kinds += [("Ew::" + e, "elementwise " + e.lower(), needs, why) for e, (needs, why) in EW_KINDS.items()]
    kinds += [("ReduceKind::" + e, "reduce " + e.lower(), needs, why) for e, (needs, why) in REDUCE_KINDS.items()]
    for o, pn, needs, why in kinds:
        if needs is None:
            coverage.append((o, "not differentiable: " + why))
        elif needs == "coercion":
            if pn in all_seen:
                coverage.append((o, "seen (%s)" % why))
            else:
                coverage.append((o, "NOT SEEN (%s; try more --cases)" % why))
                print("warning: GIR op %s (`%s`) did not appear in any generated program" % (o, pn))
        else:
            tested = [n for n in needs if n in names]
            if not tested:
                coverage.append((o, "not tested (--only)"))
                continue
            where = [n for n in tested if pn in seen_ops.get(n, set())]
            if where:
                coverage.append((o, "in the programs of " + ", ".join(where)))
            else:
                failed = True
                coverage.append((o, "FAIL: in no program of " + ", ".join(tested)))
                print("FAIL GIR op %s (`%s`): no generated program of %s contains it"
                      % (o, pn, ", ".join(tested)))

    # Summary.
    print("\nGradient tests (seed %d, %d case(s) each, mesh Pod = [a: 2, b: 2] and %s):"
          % (args.seed, K, ONE_DEVICE))
    groups = dict(builtins)
    rows = [("entry", "kind", "cases", "result")]
    for n, (status, what, kind) in entries.items():
        if status != "differentiable":
            rows.append((n, groups.get(n, kind), "-", "not differentiable: " + what))
            continue
        if n not in per_entry:
            rows.append((n, groups.get(n, kind), "-", "skipped (--only)"))
            continue
        st = per_entry[n]
        if st["pass"] == st["cases"]:
            res = "pass"
        elif st["pass"] + st["xfail"] == st["cases"]:
            res = "%d pass, %d XFAIL (known bug)" % (st["pass"], st["xfail"])
        else:
            res = "FAIL (%d of %d)" % (st["cases"] - st["pass"] - st["xfail"], st["cases"])
        rows.append((n, groups.get(n, kind), str(st["cases"]), res + ("" if res != "pass" else
                                                                       "  (worst error/tol %.2g)" % st["worst"])))
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  %-*s  %-*s  %*s  %s" % (w[0], r[0], w[1], r[1], w[2], r[2], r[3]))
    print("\nGIR ops:")
    wo = max(len(o) for o, _ in coverage) if coverage else 0
    for o, s in coverage:
        print("  %-*s  %s" % (wo, o, s))
    for c, bug in xfails:
        print("XFAIL %s (%s): %s" % (c.builtin, c.uid, bug["note"]))
    for c, bug in xpasses:
        print("XPASS %s (%s): known bug \"%s\" did not show; remove it from KNOWN_BUGS if fixed"
              % (c.builtin, c.uid, bug["note"]))
    print("\n%s: %d programs, %d cases, %.1f s" % ("FAILED" if failed else "passed", len(programs),
                                                  sum(len(p) for p in programs), time.time() - t_start))
    if own_work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
