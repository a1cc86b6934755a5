#!/usr/bin/env python3
"""Random well-typed Mesh programs against a float64 NumPy interpreter of the same program.

Each *case* is one function (plus, for autodiff cases, the loss function it
differentiates) built from a random sequence of typed steps over a pool of values:
element-wise functions and operators with broadcasting, `select`, reductions
(`sum`/`mean`/`max_over` over a dim or all, `softmax`/`log_softmax`), contractions
(`@` on vectors, matrices and batches, random `einsum` specs with batch, contracted,
summed and permuted indices) whose second operand is a fresh parameter with its own
random layout (so operands' splits conflict), shape ops (`transpose`, `reshape` merging
or factoring dims, `broadcast`, `slice`, `concat`), annotated `let`s with random layouts
(dims split over one, two or three axes in any order) and `partial {..}` sets, `reshard`,
every explicit collective (`all_reduce`, `reduce_scatter`, `all_gather`, `all_to_all`,
over one axis or a group), `if` expressions on rank-0 (often pending) conditions with
differently laid out branches, `for` loops over `var`s (with an `if` on the induction
variable, run-time slice starts and seeds), `var`s assigned in differently laid out
`if`/`else` branches, calls of helper functions with their own parameter and result
layouts, f64 round trips, creations in a body (`random_uniform`, `iota`, a `reshard` of
one), and `grad` /
`value_and_grad` of a random loss (reference: central finite differences of the float64
interpreter). Parameters get random layouts (or no mesh), `main` creates the inputs with
`random_normal`/`random_uniform` (Philox, re-implemented in e2e_lib) in yet another
layout, and the result type is a random layout, possibly `partial`.

Many cases go into one .msh file (`--per-file`), which is built twice: on its declared
mesh and with the mesh rebound to all-1 sizes (`--mesh NAME=axis:1,...`); both runs
save every case's result (`save`; every third value case also `print`s it) and must
match the reference (f32 program vs float64
reference, with tolerance) and each other. A file that fails to build or run is split
in halves until the failing cases stand alone. Every failure is reported as a
minimal standalone .msh holding just that case, the commands to reproduce it, and the
expected and actual values (`--keep DIR` also writes them to DIR).

Meshes (`--meshes`): pod = [data: 2, model: 2], hex = [data: 2, model: 3] (a size-3
axis), box = [a: 2, b: 3, c: 2] (three axes), the default; also quad = [data: 4,
model: 2] and ring = [x: 6]. Everything is deterministic given
`--seed`; a case is named MESH:INDEX and `--case MESH:INDEX` regenerates only it.

Known compiler bugs are listed in KNOWN_FAILURES: a failing case that an entry matches
is an XFAIL (not a failure); with `--skip-known` (the ctest configuration) cases that
an entry's `match` selects are generated but not built.

Usage:
  random_programs.py --meshc build/meshc [--count N] [--seed S] [--meshes pod,hex,box]
                     [--per-file K] [-j N] [--keep DIR] [--work DIR] [--skip-known]
                     [--case MESH:INDEX] [-v]
Exit status: 0 passed (XFAILs allowed), 1 a failure, 2 usage.
"""

import sys

sys.dont_write_bytecode = True

import argparse  # noqa: E402
import concurrent.futures  # noqa: E402
import math  # noqa: E402
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
    print("random_programs.py needs numpy for %s (pip install numpy)" % sys.executable)
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from e2e_lib import gelu_tanh, log_softmax, random_normal, random_uniform, sigmoid, softmax  # noqa: E402


class Mesh:
    def __init__(self, key, name, axes):
        self.key, self.name, self.axes = key, name, tuple(axes)
        self.size = dict(axes)
        self.names = [a for a, _ in axes]

    def decl(self):
        return "mesh %s = [%s];" % (self.name, ", ".join("%s: %d" % a for a in self.axes))

    def all_one(self):
        return ["--mesh", "%s=%s" % (self.name, ",".join("%s:1" % a for a in self.names))]

    def prod(self, axes):
        p = 1
        for a in axes:
            p *= self.size[a]
        return p


MESHES = {
    "pod": Mesh("pod", "Pod", [("data", 2), ("model", 2)]),
    "hex": Mesh("hex", "Hex", [("data", 2), ("model", 3)]),
    "box": Mesh("box", "Box", [("a", 2), ("b", 3), ("c", 2)]),
    # not in the default set:
    "quad": Mesh("quad", "Quad", [("data", 4), ("model", 2)]),
    "ring": Mesh("ring", "Ring", [("x", 6)]),
}

SIZES = (2, 3, 4, 6, 12)
MAX_ELEMS = 288
RTOL = 1e-3            # the program computes in f32, the reference in float64
ATOL = 2e-4            # times max(1, max |reference|)
GRAD_RTOL, GRAD_ATOL = 3e-3, 1e-3
FD_EPS = 1e-6          # central finite differences in float64

# Known meshc bugs. A failing case is an XFAIL when an entry's `match` (a predicate on
# the Case: .features, .kind, .mesh.key, .text()) holds and, if given, its `error` regex
# is found in the failure text. Rejections and internal errors are found by `meshc check
# --emit=gir` before any build, so they cost nothing; `--skip-known` (ctest) does not
# build the cases selected by an entry *without* `error` (a wrong-value class, which only
# its construct identifies). Remove an entry once the bug is fixed (its cases then XPASS).
# Fixed (their cases now pass): reshard of a mesh-free value and of a var first bound to
# one (placed on the program's only mesh), run-time slice starts and seeds (run-time
# scalars), and grad through a product with a pending factor (the cotangent is completed
# first).
KNOWN_FAILURES = [
]


# ============================================================================ types

def ax_str(axes):
    return axes[0] if len(axes) == 1 else "(" + ", ".join(axes) + ")"


class Layout:
    """dims: {dim: [axes major->minor]}, partial: [axes]; free: no mesh at all."""

    def __init__(self, dims=None, partial=None, free=False):
        self.dims = {d: list(a) for d, a in (dims or {}).items() if a}
        self.partial = list(partial or [])
        self.free = free

    def used(self):
        return [a for axes in self.dims.values() for a in axes] + self.partial

    def literal(self):
        return "{" + ", ".join("%d: %s" % (d, ax_str(a)) for d, a in sorted(self.dims.items())) + "}"

    def type(self, mesh, shape, dtype="f32"):
        s = "Tensor %s [%s]" % (dtype, ", ".join(str(n) for n in shape))
        if self.free:
            return s
        s += " on " + mesh.name
        if self.dims:
            s += " with " + self.literal()
        if self.partial:
            s += " partial {" + ", ".join(self.partial) + "}"
        return s


def rand_layout(R, mesh, shape, p_split=0.6, p_partial=0.0, p_free=0.0):
    if R.random() < p_free:
        return Layout(free=True)
    axes = list(mesh.names)
    R.shuffle(axes)
    dims, part = {}, []
    for a in axes:
        if shape and R.random() < p_split:
            d = R.randrange(len(shape))
            cur = dims.get(d, [])
            if shape[d] % (mesh.prod(cur) * mesh.size[a]) == 0:
                dims[d] = cur + [a]
                continue
        if R.random() < p_partial:
            part.append(a)
    return Layout(dims, part)


# ============================================================================ cases

class Val:
    def __init__(self, name, shape, value, leaf=False, free=False):
        self.name, self.shape, self.value, self.leaf = name, tuple(shape), value, leaf
        self.free = free        # on no mesh yet (mesh-free parameters and what only they make)
        self.var_of_free = False  # a `var` whose first value was mesh-free (placed by the docs' rule)


class E:
    """An expression: its text, its float64 NumPy evaluation env -> array, and its shape."""

    def __init__(self, text, fn, shape):
        self.text, self.fn, self.shape = text, fn, tuple(shape)


def n_elems(shape):
    return int(np.prod(shape)) if shape else 1


def lit(x):
    """A float literal that means exactly x (as parsed in float64)."""
    return repr(float(x))


class Case:
    def __init__(self, mesh, index, seed):
        self.mesh, self.index = mesh, index
        self.sizes = SIZES + ((8,) if max(mesh.size.values()) >= 4 else ())
        self.cid = "%s_%d" % (mesh.key, index)
        self.label = "%s:%d" % (mesh.key, index)
        self.R = random.Random("%d/%s/%d" % (seed, mesh.key, index))
        self.params = []        # (name, shape, layout, main layout, dist, seed, value)
        self.lines = []         # body lines (without indentation)
        self.steps = []         # fn(env) evaluating the body in order
        self.pool = []
        self.env = {}
        self.features = set()
        self.nvar = 0
        self.seed_next = self.R.randrange(1, 1 << 20)
        self.kind = None        # "value", "grad", "value_and_grad"
        self.outputs = []       # (file, kind) kind: "value", "loss", "grad"
        self.ret_type = None
        self.loss_expr = None
        self.helpers = []       # extra function text (the loss of autodiff cases)
        self.main_lines = []
        self.ref = None

    # ------------------------------------------------------------------ basics
    def fresh(self, prefix="v"):
        self.nvar += 1
        return "%s%d" % (prefix, self.nvar)

    def new_seed(self):
        self.seed_next += self.R.randrange(1, 1000)
        return self.seed_next

    def add_param(self, shape, leaf_layout=None):
        R = self.R
        name = self.fresh("p")
        lay = leaf_layout or rand_layout(R, self.mesh, shape, p_partial=0.15, p_free=0.1)
        main_lay = rand_layout(R, self.mesh, shape, p_partial=0.1, p_free=0.1) if R.random() < 0.6 else lay
        dist = R.choice(["normal", "uniform"])
        seed = self.new_seed()
        value = (random_normal if dist == "normal" else random_uniform)(seed, list(shape))
        if dist == "uniform":
            value = value  # values in [0, 1)
        self.params.append((name, tuple(shape), lay, main_lay, dist, seed, value))
        self.env[name] = value
        v = Val(name, shape, value, leaf=True, free=lay.free)
        self.pool.append(v)
        if lay.partial:
            self.features.add("partial-param")
        return v

    def emit(self, line, step):
        self.lines.append(line)
        self.steps.append(step)
        step(self.env)

    def let(self, e, layout=None, feature=None):
        """`let vN[: TYPE] = EXPR;` and the value joins the pool."""
        val = e.fn(self.env)
        m = float(np.max(np.abs(val))) if np.size(val) else 0.0
        if not np.all(np.isfinite(val)) or m > 40.0:
            k = 2.0 ** -math.ceil(math.log2(m / 4.0)) if np.all(np.isfinite(val)) else 0.0
            f = e.fn
            e = E("tanh(%s)" % e.text, lambda env, f=f: np.tanh(f(env)), e.shape) if k == 0.0 else \
                E("(%s) * %s" % (e.text, lit(k)), lambda env, f=f, k=k: f(env) * k, e.shape)
        name = self.fresh()
        ann = ""
        if layout is not None:
            ann = ": " + layout.type(self.mesh, e.shape)
            if layout.partial:
                self.features.add("partial-annotation")
            if any(len(a) > 1 for a in layout.dims.values()):
                self.features.add("multi-axis-split")
        f = e.fn
        self.emit("let %s%s = %s;" % (name, ann, e.text), lambda env, f=f, name=name: env.__setitem__(name, f(env)))
        v = Val(name, e.shape, self.env[name], free=layout is None and self.mesh_free(e.text))
        self.pool.append(v)
        if feature:
            self.features.add(feature)
        return v

    def mesh_free(self, text):
        """Whether an expression uses only mesh-free values (and literals, creations)."""
        by_name = {v.name: v for v in self.pool}
        used = [by_name[w] for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text) if w in by_name]
        return all(v.free for v in used)

    def pick(self, pred=None, recent=True):
        cands = [v for v in self.pool if pred is None or pred(v)]
        if not cands:
            return None
        if recent and self.R.random() < 0.6:
            return cands[-1]
        return self.R.choice(cands)

    def rand_shape(self, rank=None):
        R = self.R
        rank = R.choice([1, 2, 2, 2, 3]) if rank is None else rank
        while True:
            s = tuple(R.choice(self.sizes) for _ in range(rank))
            if n_elems(s) <= MAX_ELEMS:
                return s

    def operand(self, shape, allow_pool=True, creation=True):
        """A value of `shape`: from the pool, a new parameter, or a creation written in the body."""
        R = self.R
        if allow_pool:
            v = self.pick(lambda v: v.shape == tuple(shape), recent=False)
            if v is not None and R.random() < 0.4:
                return E(v.name, lambda env, n=v.name: env[n], shape)
        r = R.random()
        if creation and r < 0.2:
            seed = self.new_seed()
            val = random_uniform(seed, list(shape)) - 0.5
            self.features.add("creation")
            return E("(random_uniform(%d, [%s]) - 0.5)" % (seed, ", ".join(map(str, shape))),
                     lambda env, val=val: val, shape)
        if creation and r < 0.25 and shape:
            ax = R.randrange(len(shape))
            val = np.broadcast_to(
                np.arange(shape[ax], dtype=np.float64).reshape([-1 if i == ax else 1 for i in range(len(shape))]),
                shape) * 0.25
            self.features.add("creation")
            return E("(iota([%s], axis: %d) * 0.25)" % (", ".join(map(str, shape)), ax),
                     lambda env, val=val: val, shape)
        p = self.add_param(shape)
        return E(p.name, lambda env, n=p.name: env[n], shape)

    # ------------------------------------------------------------------ steps
    def step_unary(self):
        x = self.pick()
        fns = [
            ("tanh(%s)", np.tanh), ("sigmoid(%s)", sigmoid), ("relu(%s)", lambda a: np.maximum(a, 0.0)),
            ("gelu(%s)", gelu_tanh), ("abs(%s)", np.abs), ("-%s", np.negative),
            ("exp(tanh(%s))", lambda a: np.exp(np.tanh(a))), ("sqrt(abs(%s) + 1.0)", lambda a: np.sqrt(np.abs(a) + 1)),
            ("log(abs(%s) + 1.0)", lambda a: np.log(np.abs(a) + 1)),
            ("rsqrt(abs(%s) + 1.0)", lambda a: 1 / np.sqrt(np.abs(a) + 1)),
            ("cast(tanh(cast(%s, f64)) * 2.0, f32)", lambda a: np.tanh(a) * 2.0),
            ("%s * 1.5", lambda a: a * 1.5), ("%s - 0.25", lambda a: a - 0.25),
        ]
        t, f = self.R.choice(fns)
        if self.kind != "value" and t.startswith(("relu", "abs")) and np.any(self.env[x.name] == 0.0):
            t, f = fns[0]       # a kink hit exactly: the derivative there is a convention, not FD's
        self.maybe_let(E(t % x.name, lambda env, n=x.name, f=f: f(env[n]), x.shape), "elementwise")

    def maybe_let(self, e, feature=None, p_ann=0.3):
        R = self.R
        lay = None
        if R.random() < p_ann:
            lay = rand_layout(R, self.mesh, e.shape, p_partial=0.2)
        return self.let(e, lay, feature)

    def step_binary(self):
        R = self.R
        x = self.pick()
        shape = x.shape
        k = R.randrange(len(shape) + 1) if R.random() < 0.4 else 0
        yshape = shape[k:]
        if R.random() < 0.12:
            c = R.choice([0.5, 2.0, -1.25, 3.0])
            y = E(lit(c), lambda env, c=c: np.float64(c), ())
        else:
            y = self.operand(yshape)
        ops = [("+", np.add), ("-", np.subtract), ("*", np.multiply)]
        r = R.random()
        if r < 0.6:
            t, f = R.choice(ops)
            a, b = (x.name, y.text) if R.random() < 0.7 else (y.text, x.name)
            fa = (lambda env, n=x.name: env[n])
            fy = y.fn
            fa_, fb_ = (fa, fy) if a == x.name else (fy, fa)
            e = E("%s %s %s" % (a, t, b), lambda env, fa_=fa_, fb_=fb_, f=f: f(fa_(env), fb_(env)), shape)
        elif r < 0.75:
            e = E("%s / (abs(%s) + 1.0)" % (x.name, y.text),
                  lambda env, n=x.name, fy=y.fn: env[n] / (np.abs(fy(env)) + 1.0), shape)
        else:
            t, f = R.choice([("max", np.maximum), ("min", np.minimum)])
            if self.kind != "value" and np.any(self.env[x.name] == y.fn(self.env)):
                t, f = "max", None     # a tie: its derivative is a convention (first operand), not FD's
                e = E("%s + %s" % (x.name, y.text), lambda env, n=x.name, fy=y.fn: env[n] + fy(env), shape)
            if f is not None:
                e = E("%s(%s, %s)" % (t, x.name, y.text), lambda env, n=x.name, fy=y.fn, f=f: f(env[n], fy(env)),
                      shape)
        self.maybe_let(e, "broadcast-binary" if len(yshape) < len(shape) else "binary")

    def step_select(self):
        R = self.R
        x = self.pick()
        cands = [v for v in self.pool if v.leaf and x.shape[len(x.shape) - len(v.shape):] == v.shape]
        if not cands:
            c = self.add_param(x.shape[R.randrange(len(x.shape) + 1):] if x.shape else ())
        else:
            c = R.choice(cands)
        y = self.operand(x.shape)
        self.maybe_let(E("select(%s > 0.0, %s, %s)" % (c.name, x.name, y.text),
                         lambda env, c=c.name, n=x.name, fy=y.fn: np.where(env[c] > 0.0, env[n], fy(env)),
                         x.shape), "select")

    def step_reduce(self):
        R = self.R
        x = self.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            return self.step_unary()
        r = len(x.shape)
        kind = R.choice(["sum", "sum", "mean", "max_over", "softmax", "log_softmax"])
        ax = R.randrange(r)
        axtxt = str(ax - r) if R.random() < 0.3 else str(ax)
        if kind in ("softmax", "log_softmax"):
            f = softmax if kind == "softmax" else log_softmax
            return self.maybe_let(E("%s(%s, axis: %s)" % (kind, x.name, axtxt),
                                    lambda env, n=x.name, f=f, ax=ax: f(env[n], axis=ax), x.shape), kind)
        whole = R.random() < 0.25 or r == 1
        if kind == "max_over" and self.kind != "value":
            # tied maxima (from iota, broadcast, ...) get the cotangent each (docs/language.md),
            # which finite differences do not model
            xv = self.env[x.name]
            m = np.max(xv) if whole else np.max(xv, axis=ax, keepdims=True)
            if np.any(np.sum(xv == m, axis=None if whole else ax) > 1):
                kind = "sum"
        f = {"sum": np.sum, "mean": np.mean, "max_over": np.max}[kind]
        if whole:
            return self.maybe_let(E("%s(%s)" % (kind, x.name), lambda env, n=x.name, f=f: np.asarray(f(env[n])), ()),
                                  kind)
        shape = x.shape[:ax] + x.shape[ax + 1:]
        return self.maybe_let(E("%s(%s, axis: %s)" % (kind, x.name, axtxt),
                                lambda env, n=x.name, f=f, ax=ax: f(env[n], axis=ax), shape), kind)

    def step_matmul(self):
        R = self.R
        x = self.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            return self.step_unary()
        s = x.shape
        n = R.choice(self.sizes)
        if len(s) == 1:
            yshape = (s[0], n)
        elif len(s) == 3 and R.random() < 0.5:
            yshape = (s[0], s[2], n)
        elif R.random() < 0.2:
            yshape = (s[-1],)
        else:
            yshape = (s[-1], n)
        out = np.matmul(np.zeros(s), np.zeros(yshape)).shape
        if n_elems(out) > MAX_ELEMS:
            return self.step_reduce()
        y = self.operand(yshape)
        if R.random() < 0.5:
            self.features.add("contraction-conflict")
        return self.maybe_let(E("%s @ %s" % (x.name, y.text),
                                lambda env, n=x.name, fy=y.fn: np.matmul(env[n], fy(env)), out), "matmul")

    def step_einsum(self):
        R = self.R
        x = self.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            return self.step_unary()
        letters = list("ijklmnopqrstuvw")
        R.shuffle(letters)
        xl = letters[:len(x.shape)]
        size = dict(zip(xl, x.shape))
        yl = [l for l in xl if R.random() < 0.6]
        fresh = letters[len(x.shape):]
        for _ in range(R.choice([0, 1, 1, 2])):
            if len(yl) < 3:
                l = fresh.pop()
                size[l] = R.choice(self.sizes)
                yl.insert(R.randrange(len(yl) + 1), l)
        if not yl:
            l = fresh.pop()
            size[l] = R.choice(self.sizes)
            yl = [l]
        R.shuffle(yl)
        allv = list(dict.fromkeys(xl + yl))
        out = []
        for l in allv:
            shared = l in xl and l in yl
            if R.random() < (0.5 if shared else 0.9):
                out.append(l)
        R.shuffle(out)
        oshape = tuple(size[l] for l in out)
        if n_elems(oshape) > MAX_ELEMS:
            return self.step_reduce()
        y = self.operand(tuple(size[l] for l in yl))
        spec = "%s,%s->%s" % ("".join(xl), "".join(yl), "".join(out))
        return self.maybe_let(E('einsum("%s", %s, %s)' % (spec, x.name, y.text),
                                lambda env, n=x.name, fy=y.fn, spec=spec: np.einsum(spec, env[n], fy(env)), oshape),
                              "einsum")

    def step_transpose(self):
        R = self.R
        x = self.pick(lambda v: len(v.shape) >= 2)
        if x is None:
            return self.step_reshape()
        perm = list(range(len(x.shape)))
        while perm == sorted(perm):
            R.shuffle(perm)
        shape = tuple(x.shape[p] for p in perm)
        return self.maybe_let(E("transpose(%s, [%s])" % (x.name, ", ".join(map(str, perm))),
                                lambda env, n=x.name, perm=perm: np.transpose(env[n], perm), shape), "transpose")

    def step_reshape(self):
        R = self.R
        x = self.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            return self.step_unary()
        s = list(x.shape)
        opts = []
        for i in range(len(s) - 1):
            opts.append(s[:i] + [s[i] * s[i + 1]] + s[i + 2:])
        for i, n in enumerate(s):
            for f in range(2, n):
                if n % f == 0 and len(s) < 4:
                    opts.append(s[:i] + [f, n // f] + s[i + 1:])
        if len(s) > 1:
            opts.append([n_elems(s)])
        if not opts:
            return self.step_unary()
        new = R.choice(opts)
        return self.maybe_let(E("reshape(%s, [%s])" % (x.name, ", ".join(map(str, new))),
                                lambda env, n=x.name, new=new: np.reshape(env[n], new), new), "reshape")

    def step_broadcast(self):
        R = self.R
        x = self.pick(lambda v: len(v.shape) <= 2)
        if x is None:
            return self.step_unary()
        new = (R.choice(self.sizes),) + x.shape
        if n_elems(new) > MAX_ELEMS:
            return self.step_unary()
        return self.maybe_let(E("broadcast(%s, [%s])" % (x.name, ", ".join(map(str, new))),
                                lambda env, n=x.name, new=new: np.broadcast_to(env[n], new).copy(), new), "broadcast")

    def step_slice(self):
        R = self.R
        x = self.pick(lambda v: any(n > 1 for n in v.shape))
        if x is None:
            return self.step_unary()
        ax = R.choice([i for i, n in enumerate(x.shape) if n > 1])
        n = x.shape[ax]
        size = R.randrange(1, n)
        start = R.randrange(0, n - size + 1)
        shape = x.shape[:ax] + (size,) + x.shape[ax + 1:]
        axtxt = str(ax - len(x.shape)) if R.random() < 0.3 else str(ax)
        return self.maybe_let(E("slice(%s, axis: %s, start: %d, size: %d)" % (x.name, axtxt, start, size),
                                lambda env, n=x.name, ax=ax, st=start, sz=size:
                                np.take(env[n], range(st, st + sz), axis=ax), shape), "slice")

    def step_concat(self):
        R = self.R
        x = self.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            return self.step_unary()
        ax = R.randrange(len(x.shape))
        m = R.choice(self.sizes)
        yshape = x.shape[:ax] + (m,) + x.shape[ax + 1:]
        shape = x.shape[:ax] + (x.shape[ax] + m,) + x.shape[ax + 1:]
        if n_elems(shape) > MAX_ELEMS:
            return self.step_slice()
        y = self.operand(yshape)
        parts = [(x.name, lambda env, n=x.name: env[n]), (y.text, y.fn)]
        if R.random() < 0.4:
            parts.reverse()
        return self.maybe_let(E("concat([%s, %s], axis: %d)" % (parts[0][0], parts[1][0], ax),
                                lambda env, p=parts, ax=ax: np.concatenate([p[0][1](env), p[1][1](env)], axis=ax),
                                shape), "concat")

    def step_annotate(self):
        x = self.pick()
        lay = rand_layout(self.R, self.mesh, x.shape, p_partial=0.35)
        self.let(E(x.name, lambda env, n=x.name: env[n], x.shape), lay, "annotated-let")

    def step_reshard(self):
        R = self.R
        x = self.pick()
        lay = rand_layout(R, self.mesh, x.shape)
        if R.random() < 0.1:
            # a creation, placed by the reshard (its first use that needs a layout)
            seed = self.new_seed()
            val = random_uniform(seed, list(x.shape)) - 0.5
            self.features.add("reshard-meshfree")
            self.let(E("reshard(random_uniform(%d, [%s]) - 0.5, %s)" % (seed, ", ".join(map(str, x.shape)),
                                                                        lay.literal()),
                       lambda env, val=val: val, x.shape), None, "reshard")
            return
        if x.free:
            self.features.add("reshard-meshfree")
        if x.var_of_free:
            self.features.add("reshard-var-of-meshfree")
        self.let(E("reshard(%s, %s)" % (x.name, lay.literal()), lambda env, n=x.name: env[n], x.shape),
                 None if R.random() < 0.6 else lay, "reshard")

    def _group(self, avail):
        R = self.R
        k = 1 if R.random() < 0.7 or len(avail) < 2 else 2
        g = R.sample(avail, k)
        return g

    def step_collective(self):
        R = self.R
        mesh = self.mesh
        kind = R.choice(["all_reduce", "reduce_scatter", "all_gather", "all_to_all"])
        x = self.pick()
        shape = x.shape
        ident = (lambda env, n=x.name: env[n])
        if kind in ("all_reduce", "reduce_scatter"):
            group = self._group(mesh.names)
            rest = [a for a in mesh.names if a not in group]
            pre = Layout()
            if kind == "reduce_scatter":
                dims = [d for d in range(len(shape)) if shape[d] % mesh.prod(group) == 0]
                if not dims:
                    kind = "all_reduce"
                else:
                    d = R.choice(dims)
            for a in rest:
                if R.random() < 0.5 and shape:
                    dd = R.randrange(len(shape))
                    cur = pre.dims.get(dd, [])
                    extra = mesh.prod(group) if kind == "reduce_scatter" and dd == d else 1
                    if shape[dd] % (mesh.prod(cur) * mesh.size[a] * extra) == 0:
                        pre.dims[dd] = cur + [a]
                        continue
                if R.random() < 0.3:
                    pre.partial.append(a)
            pre.partial = group + pre.partial
            R.shuffle(pre.partial)
            t = self.let(E(x.name, ident, shape), pre)
            post = Layout(pre.dims, [a for a in pre.partial if a not in group])
            if kind == "all_reduce":
                text = "all_reduce(%s, over: %s)" % (t.name, ax_str(group))
            else:
                dtxt = str(d - len(shape)) if R.random() < 0.3 else str(d)
                text = "reduce_scatter(%s, over: %s, dim: %s)" % (t.name, ax_str(group), dtxt)
                post.dims[d] = post.dims.get(d, []) + group
        elif kind == "all_gather":
            dims = [d for d in range(len(shape)) if shape[d] % 2 == 0 or shape[d] % 3 == 0]
            if not dims:
                return self.step_annotate()
            d = R.choice(dims)
            pre = rand_layout(R, mesh, shape, p_partial=0.2)
            fits = [a for a in mesh.names if a not in pre.used() or a in pre.dims.get(d, [])]
            fits = [a for a in fits if shape[d] % (mesh.prod([b for b in pre.dims.get(d, []) if b != a])
                                                   * mesh.size[a]) == 0]
            if not fits:
                return self.step_annotate()
            a = R.choice(fits)
            pre.dims[d] = [b for b in pre.dims.get(d, []) if b != a] + [a]
            group = [a]
            # sometimes gather the two minor axes at once
            if len(pre.dims[d]) >= 2 and R.random() < 0.4:
                group = pre.dims[d][-2:]
            t = self.let(E(x.name, ident, shape), pre)
            post = Layout({k: (v[:-len(group)] if k == d else v) for k, v in pre.dims.items()}, pre.partial)
            dtxt = str(d - len(shape)) if R.random() < 0.3 else str(d)
            text = "all_gather(%s, over: %s, dim: %s)" % (t.name, ax_str(group), dtxt)
        else:
            if len(shape) < 2:
                return self.step_annotate()
            pairs = [(d1, d2, a) for d1 in range(len(shape)) for d2 in range(len(shape)) if d1 != d2
                     for a in mesh.names if shape[d1] % mesh.size[a] == 0 and shape[d2] % mesh.size[a] == 0]
            if not pairs:
                return self.step_annotate()
            d1, d2, a = R.choice(pairs)
            pre = Layout({d1: [a]}, [])
            for b in mesh.names:
                if b == a or R.random() < 0.4:
                    continue
                dd = R.randrange(len(shape))
                cur = pre.dims.get(dd, [])
                need = mesh.prod(cur) * mesh.size[b] * (mesh.size[a] if dd == d2 else 1)
                if shape[dd] % need == 0:
                    if dd == d1:
                        pre.dims[dd] = [b] + cur      # `a` stays the minor-most axis of d1
                    else:
                        pre.dims[dd] = cur + [b]
                elif R.random() < 0.3:
                    pre.partial.append(b)
            t = self.let(E(x.name, ident, shape), pre)
            post = Layout({k: [b for b in v if b != a] for k, v in pre.dims.items()}, pre.partial)
            post.dims[d2] = post.dims.get(d2, []) + [a]
            t1 = str(d1 - len(shape)) if R.random() < 0.3 else str(d1)
            t2 = str(d2 - len(shape)) if R.random() < 0.3 else str(d2)
            text = "all_to_all(%s, over: %s, from: %s, to: %s)" % (t.name, a, t1, t2)
        self.let(E(text, lambda env, n=t.name: env[n], shape), post if R.random() < 0.5 else None, kind)

    def step_if(self):
        R = self.R
        c = self.pick(lambda v: len(v.shape) >= 1)
        x = self.pick()
        if c is None:
            return self.step_unary()
        red = R.choice(["sum", "mean", "max_over"])
        cv = float({"sum": np.sum, "mean": np.mean, "max_over": np.max}[red](self.env[c.name]))
        margin = 0.2 * (1.0 + abs(cv))
        thr = round(cv + (margin if R.random() < 0.5 else -margin), 3)
        op = R.choice([">", "<"])
        cond_txt = "%s(%s) %s %s" % (red, c.name, op, lit(thr))
        f = {"sum": np.sum, "mean": np.mean, "max_over": np.max}[red]

        def cond(env, c=c.name, f=f, op=op, thr=thr):
            v = float(f(env[c]))
            return v > thr if op == ">" else v < thr
        y = self.operand(x.shape)
        branches = []
        for _ in range(2):
            t, fn = R.choice([("tanh(%s)", np.tanh), ("%s * 2.0", lambda a: a * 2.0), ("%s - 1.0", lambda a: a - 1.0)])
            u, gn = R.choice([("%s + %s", np.add), ("%s * %s", np.multiply), ("max(%s, %s)", np.maximum)])
            a = "(%s)" % (t % x.name) if not t.startswith("tanh") else t % x.name
            branches.append(("%s" % (u % (a, y.text)),
                             lambda env, n=x.name, fn=fn, gn=gn, fy=y.fn: gn(fn(env[n]), fy(env))))
        name = self.fresh()
        ann = ""
        if R.random() < 0.3:
            ann = ": " + rand_layout(R, self.mesh, x.shape, p_partial=0.2).type(self.mesh, x.shape)
        if R.random() < 0.5:
            # blocks whose values are laid out differently
            bl = []
            for b, _ in branches:
                lay = rand_layout(R, self.mesh, x.shape, p_partial=0.25)
                tmp = self.fresh("b")
                bl.append("{ let %s: %s = %s; %s }" % (tmp, lay.type(self.mesh, x.shape), b, tmp))
            text = "let %s%s = if %s %s else %s;" % (name, ann, cond_txt, bl[0], bl[1])
        else:
            text = "let %s%s = if %s { %s } else { %s };" % (name, ann, cond_txt, branches[0][0], branches[1][0])
        b0, b1 = branches[0][1], branches[1][1]
        self.emit(text, lambda env, name=name, cond=cond, b0=b0, b1=b1:
                  env.__setitem__(name, b0(env) if cond(env) else b1(env)))
        self.pool.append(Val(name, x.shape, self.env[name], free=not ann and self.mesh_free(text)))
        self.features.add("if")

    def step_for(self):
        R = self.R
        x = self.pick()
        k = R.randrange(0, 4)
        acc = self.fresh("acc")
        ann = ""
        if R.random() < 0.4:
            ann = ": " + rand_layout(R, self.mesh, x.shape, p_partial=0.15).type(self.mesh, x.shape)
        lines = ["var %s%s = %s;" % (acc, ann, x.name)]
        body_kind = R.choices(["axpy", "matmul", "iter", "ifi", "rt_slice", "rt_seed"], [5, 5, 5, 5, 1, 1])[0]
        if body_kind == "rt_slice" and len(x.shape) >= 1:
            # docs/language.md, "Run-time scalars and program arguments": a run-time scalar (the loop variable) as a `slice` start
            n0 = x.shape[0]
            y = self.operand((n0 + k,) + x.shape[1:], creation=False)
            lines.append("for i in 0..%d { %s = %s * 0.5 + slice(%s, axis: 0, start: i, size: %d); }"
                         % (k, acc, acc, y.text, n0))
            self.features.add("runtime-slice-start")

            def upd(env, a, i, fy=y.fn, n0=n0):
                return a * 0.5 + fy(env)[i:i + n0]
        elif body_kind == "rt_seed":
            # docs/language.md, "Run-time scalars and program arguments": a run-time scalar as the seed of a random creation
            seed = self.new_seed()
            shp = ", ".join(map(str, x.shape))
            lines.append("for i in 0..%d { %s = %s * 0.5 + random_uniform(i + %d, [%s]); }" % (k, acc, acc, seed, shp))
            self.features.add("runtime-seed")

            def upd(env, a, i, seed=seed, shape=x.shape):
                return a * 0.5 + random_uniform(i + seed, list(shape))
        elif body_kind == "matmul" and len(x.shape) >= 1:
            m = x.shape[-1]
            w = self.operand((m, m), creation=False)
            lines.append("for i in 0..%d { %s = tanh(%s @ %s); }" % (k, acc, acc, w.text))

            def upd(env, a, i, fw=w.fn):
                return np.tanh(np.matmul(a, fw(env)))
        elif body_kind == "iter":
            lines.append("for i in 0..%d { %s = %s * 0.5 + cast(i, f32) * 0.25; }" % (k, acc, acc))

            def upd(env, a, i):
                return a * 0.5 + i * 0.25
        elif body_kind == "ifi":
            lines.append("for i in 1..%d { if i %% 2 == 0 { %s = %s * 0.5; } else { %s = tanh(%s) - 0.5; } }"
                         % (k + 1, acc, acc, acc, acc))

            def upd(env, a, i):
                return a * 0.5 if i % 2 == 0 else np.tanh(a) - 0.5
        else:
            y = self.operand(x.shape[R.randrange(len(x.shape) + 1):] if x.shape else ())
            lines.append("for i in 0..%d { %s = %s * 0.5 + tanh(%s); }" % (k, acc, acc, y.text))

            def upd(env, a, i, fy=y.fn):
                return a * 0.5 + np.tanh(fy(env))
        lo = 1 if body_kind == "ifi" else 0

        def step(env, acc=acc, n=x.name, k=k, upd=upd, lo=lo):
            a = env[n]
            for i in range(lo, lo + k):
                a = upd(env, a, i)
            env[acc] = a
        text = " ".join(lines)
        self.emit(text, step)
        self.pool.append(Val(acc, x.shape, self.env[acc]))
        self.pool[-1].var_of_free = not ann and (x.free or x.var_of_free)
        self.features.add("for")

    def step_call(self):
        """A helper function with its own parameter and result layouts (maybe partial)."""
        R = self.R
        x = self.pick()
        shape = x.shape
        pl = rand_layout(R, self.mesh, shape, p_partial=0.25)
        body, f, oshape = R.choice([
            ("tanh(a) * 2.0", lambda a: np.tanh(a) * 2.0, shape),
            ("a * 3.0", lambda a: a * 3.0, shape),
            ("a + a", lambda a: a + a, shape),
            ("sum(a, axis: 0)", lambda a: np.sum(a, axis=0), shape[1:]),
            ("a @ transpose(a, [1, 0])", lambda a: a @ a.T, shape[:1] * 2),
        ] if len(shape) == 2 else [
            ("tanh(a) * 2.0", lambda a: np.tanh(a) * 2.0, shape),
            ("a * 3.0", lambda a: a * 3.0, shape),
            ("a - 0.5", lambda a: a - 0.5, shape),
        ])
        rl = rand_layout(R, self.mesh, oshape, p_partial=0.3)
        h = "%s_h%d" % (self.cid, len(self.helpers))
        self.helpers.append("fn %s(a: %s) -> %s {\n    %s\n}\n" % (h, pl.type(self.mesh, shape),
                                                                    rl.type(self.mesh, oshape), body))
        self.maybe_let(E("%s(%s)" % (h, x.name), lambda env, n=x.name, f=f: f(env[n]), oshape), "call")

    def step_ifvar(self):
        """`var w = x; if c { w = ..; } else { w = ..; }` with the branches in different layouts."""
        R = self.R
        x = self.pick()
        c = self.pick(lambda v: v.leaf)
        w = self.fresh("w")
        la = rand_layout(R, self.mesh, x.shape, p_partial=0.2)
        lb = rand_layout(R, self.mesh, x.shape, p_partial=0.2)
        cv = float(np.sum(self.env[c.name]))
        thr = round(cv + (0.2 if R.random() < 0.5 else -0.2) * (1.0 + abs(cv)), 3)
        text = ("var %s = %s; if sum(%s) > %s { let ta: %s = tanh(%s); %s = ta; } else "
                "{ let tb: %s = %s * 0.5; %s = tb - 1.0; }"
                % (w, x.name, c.name, lit(thr), la.type(self.mesh, x.shape), x.name, w,
                   lb.type(self.mesh, x.shape), x.name, w))

        def step(env, w=w, n=x.name, c=c.name, thr=thr):
            env[w] = np.tanh(env[n]) if float(np.sum(env[c])) > thr else env[n] * 0.5 - 1.0
        self.emit(text, step)
        self.pool.append(Val(w, x.shape, self.env[w]))
        self.pool[-1].var_of_free = x.free or x.var_of_free
        self.features.add("if-var")

    STEPS = [
        ("unary", 10), ("binary", 12), ("select", 3), ("reduce", 8), ("matmul", 8), ("einsum", 8),
        ("transpose", 4), ("reshape", 5), ("broadcast", 3), ("slice", 4), ("concat", 4), ("annotate", 8),
        ("reshard", 4), ("collective", 10), ("if", 4), ("for", 4), ("call", 4), ("ifvar", 3),
    ]

    def generate(self):
        R = self.R
        self.kind = R.choices(["value", "grad", "value_and_grad"], [0.7, 0.15, 0.15])[0]
        if self.kind != "value":
            self.features.add(self.kind)
        self.add_param(self.rand_shape())
        names = [s for s, _ in self.STEPS]
        weights = [w for _, w in self.STEPS]
        for _ in range(R.randint(2, 7)):
            getattr(self, "step_" + R.choices(names, weights)[0])()
        last = self.pool[-1]
        if self.kind == "value":
            self.ret_shape = last.shape
            self.ret_layout = rand_layout(R, self.mesh, last.shape, p_partial=0.25)
            if self.ret_layout.partial:
                self.features.add("partial-result")
            self.result = last.name
        else:
            lf = R.choice([("sum(%s)", np.sum), ("mean(%s * %s)", lambda a: np.mean(a * a)),
                           ("sum(tanh(%s))", lambda a: np.sum(np.tanh(a)))])
            self.loss_expr = lf[0].replace("%s", last.name)
            self.loss_fn = (lambda env, n=last.name, f=lf[1]: float(f(env[n])))
            p0 = self.params[0]
            self.ret_shape = p0[1]
            self.ret_layout = p0[2] if R.random() < 0.6 else rand_layout(R, self.mesh, p0[1], p_partial=0.2)

    # ------------------------------------------------------------------ reference
    def evaluate(self, inputs):
        env = dict(inputs)
        for s in self.steps:
            s(env)
        return env

    def reference(self):
        """{file: (kind, float64 array)}."""
        inputs = {p[0]: p[6] for p in self.params}
        if self.kind == "value":
            env = self.evaluate(inputs)
            out = {"%s.npy" % self.cid: ("value", np.asarray(env[self.result], dtype=np.float64))}
            if self.printed():
                out["stdout:%s" % self.cid] = ("print", out["%s.npy" % self.cid][1])
            return out
        p0 = self.params[0]

        def loss(x):
            i2 = dict(inputs)
            i2[p0[0]] = x
            return self.loss_fn(self.evaluate(i2))
        x0 = np.array(p0[6], dtype=np.float64)
        g = np.zeros_like(x0)
        flat, gflat = x0.reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + FD_EPS
            up = loss(x0)
            flat[i] = old - FD_EPS
            down = loss(x0)
            flat[i] = old
            gflat[i] = (up - down) / (2 * FD_EPS)
        out = {"%s_g.npy" % self.cid: ("grad", g)}
        if self.kind == "value_and_grad":
            out["%s_l.npy" % self.cid] = ("loss", np.asarray(loss(x0)))
        return out

    # ------------------------------------------------------------------ text
    def functions(self):
        m = self.mesh
        params = ", ".join("%s: %s" % (p[0], p[2].type(m, p[1])) for p in self.params)
        args = ", ".join(p[0] for p in self.params)
        body = "".join("    %s\n" % line for line in self.lines)
        rt = self.ret_layout.type(m, self.ret_shape)
        helpers = "".join(h + "\n" for h in self.helpers)
        if self.kind == "value":
            return helpers + "fn %s(%s) -> %s {\n%s    %s\n}\n" % (self.cid, params, rt, body, self.result)
        f = helpers + "fn %s_loss(%s) -> f32 {\n%s    %s\n}\n" % (self.cid, params, body, self.loss_expr)
        if self.kind == "grad":
            g = "fn %s(%s) -> %s {\n    grad(%s_loss)(%s)\n}\n" % (self.cid, params, rt, self.cid, args)
        else:
            g = "fn %s(%s) -> (f32, %s) {\n    value_and_grad(%s_loss)(%s)\n}\n" % (
                self.cid, params, rt, self.cid, args)
        return f + "\n" + g

    def main_body(self):
        m = self.mesh
        out = []
        for name, shape, _lay, mlay, dist, seed, _v in self.params:
            out.append("let %s_%s: %s = random_%s(%d, [%s]);" % (self.cid, name, mlay.type(m, shape), dist, seed,
                                                                 ", ".join(map(str, shape))))
        args = ", ".join("%s_%s" % (self.cid, p[0]) for p in self.params)
        if self.kind == "value" and self.printed():
            out.append("let %s_r = %s(%s);" % (self.cid, self.cid, args))
            out.append('save("%s.npy", %s_r);' % (self.cid, self.cid))
            out.append('print("%s", %s_r);' % (self.cid, self.cid))
        elif self.kind == "value":
            out.append('save("%s.npy", %s(%s));' % (self.cid, self.cid, args))
        elif self.kind == "grad":
            out.append('save("%s_g.npy", %s(%s));' % (self.cid, self.cid, args))
        else:
            out.append("let (%s_l, %s_g) = %s(%s);" % (self.cid, self.cid, self.cid, args))
            out.append('save("%s_l.npy", %s_l);' % (self.cid, self.cid))
            out.append('save("%s_g.npy", %s_g);' % (self.cid, self.cid))
        return out

    def text(self):
        return program(self.mesh, [self])

    def printed(self):
        """Every third value case also prints its result (a nested list or a summary)."""
        return self.index % 3 == 0


def program(mesh, cases):
    parts = ["// generated by tests/e2e/random_programs.py", mesh.decl(), ""]
    for c in cases:
        parts.append("// case %s: %s" % (c.label, ", ".join(sorted(c.features))))
        parts.append(c.functions())
    parts.append("fn main() {")
    for c in cases:
        parts.extend("    " + line for line in c.main_body())
    parts.append("}")
    return "\n".join(parts) + "\n"


def make_case(mesh, index, seed):
    c = Case(mesh, index, seed)
    c.generate()
    return c


# ============================================================================ running

def run_cmd(cmd, cwd=None, timeout=300, stdout=True):
    """(status, stdout + stderr) (stdout=False: stderr only); status None on a timeout."""
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return p.returncode, (p.stdout.decode("utf-8", "replace") if stdout else "") + \
            p.stderr.decode("utf-8", "replace")
    except OSError as e:
        return -1, "cannot run %s: %s" % (cmd[0], e)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % timeout


def clip(text, n=3000):
    text = text.rstrip()
    return text if len(text) <= n else text[:n // 2] + "\n    ...\n" + text[-n // 2:]


def indent(text, prefix="    "):
    return "\n".join(prefix + line for line in text.splitlines())


VARIANTS = ("declared", "all-1")


def build_and_run(meshc, work, tag, mesh, cases, variant):
    """(error text or None, {file: array})."""
    d = os.path.join(work, "%s.%s" % (tag, variant))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    src = os.path.join(d, "prog.msh")
    with open(src, "w") as f:
        f.write(program(mesh, cases))
    flags = mesh.all_one() if variant == "all-1" else []
    rc, out = run_cmd([meshc, "build", src, "-o", os.path.join(d, "prog")] + flags, cwd=d)
    if rc != 0:
        return "meshc build%s failed (status %s):\n%s" % ("".join(" " + f for f in flags), rc, clip(out)), {}
    rundir = os.path.join(d, "run")
    os.makedirs(rundir)
    rc, out = run_cmd([os.path.join(d, "prog")], cwd=rundir, timeout=120)
    if rc != 0:
        return "the program failed (status %s):\n%s" % (rc, clip(out)), {}
    res = {"stdout": out.splitlines()}
    for fn in os.listdir(rundir):
        if fn.endswith(".npy"):
            try:
                res[fn] = np.load(os.path.join(rundir, fn))
            except Exception as e:  # noqa: BLE001
                res[fn] = e
    shutil.rmtree(d, ignore_errors=True)
    return None, res


def fmt(a):
    a = np.asarray(a)
    return np.array2string(a, precision=5, suppress_small=True, threshold=80, max_line_width=110)


NUM = r"[-+]?(?:inf|nan|\d+(?:\.\d*)?(?:e[-+]?\d+)?)"


def compare_print(want, lines, cid):
    """Problems of the printed line `CID VALUE` (`%.6g` numbers: a nested list, a rank-0
    number, or the summary `<f32[..] sum=.. min=.. max=..>` above 64 elements)."""
    mine = [ln for ln in lines if ln.split(" ", 1)[0] == cid]
    if len(mine) != 1:
        return ["%d printed lines start with %r, expected 1" % (len(mine), cid)]
    text = mine[0][len(cid) + 1:]
    if text.startswith("<"):
        m = re.match(r"<f32\[([0-9, ]*)\] sum=(%s) min=(%s) max=(%s)>$" % (NUM, NUM, NUM), text)
        if not m:
            return ["printed %r, expected a summary <f32[..] sum=.. min=.. max=..>" % text]
        shape = tuple(int(x) for x in m.group(1).split(",") if x.strip())
        if shape != want.shape:
            return ["printed shape %s, expected %s" % (shape, want.shape)]
        got = np.array([float(m.group(i)) for i in (2, 3, 4)])
        ref = np.array([want.sum(), want.min(), want.max()])
        tol = np.array([ATOL * want.size, ATOL, ATOL]) * max(1.0, float(np.max(np.abs(want)))) + 1e-5 * np.abs(ref) \
            + RTOL * np.abs(ref)
        if np.all(np.abs(got - ref) <= tol):
            return []
        return ["printed %r, expected sum=%.6g min=%.6g max=%.6g" % (text, ref[0], ref[1], ref[2])]
    if want.size > 64:
        return ["printed %r, expected a summary (%d elements)" % (text, want.size)]
    nums = [float(x) for x in re.findall(NUM, text)]
    if len(nums) != want.size:
        return ["printed %r: %d numbers, expected %d" % (text, len(nums), want.size)]
    got = np.array(nums).reshape(want.shape)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    if np.all(np.abs(got - want) <= ATOL * scale + (RTOL + 1e-5) * np.abs(want)):
        return []
    return ["printed %r, expected %s" % (text, fmt(want))]


def compare(want, got, kind):
    """Problems (list of str) of one output against its expectation (float64 array)."""
    if isinstance(got, Exception):
        return ["unreadable .npy: %s" % got]
    if got.dtype != np.float32:
        return ["dtype %s, expected float32" % got.dtype]
    if got.shape != want.shape:
        return ["shape %s, expected %s" % (got.shape, want.shape)]
    rtol, atol = (GRAD_RTOL, GRAD_ATOL) if kind in ("grad", "loss") else (RTOL, ATOL)
    g = got.astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    err = np.abs(g - want)
    bad = ~(err <= atol * scale + rtol * np.abs(want))
    if not bad.any():
        return []
    idx = np.unravel_index(int(np.argmax(np.where(np.isfinite(err), err, np.inf))), err.shape) if err.ndim else ()
    return ["%d of %d values off, max error %.3g at %s (got %.6g, expected %.6g)\n  expected:\n%s\n  actual:\n%s" % (
        int(bad.sum()), bad.size, float(np.nanmax(err)), [int(i) for i in idx], float(g[idx]), float(want[idx]),
        indent(fmt(want), "    "), indent(fmt(g), "    "))]


def known(case, failure=None):
    """The KNOWN_FAILURES entry explaining `failure` (its text), or with failure None the
    entry whose `match` selects the case (for XPASS and --skip-known)."""
    for k in KNOWN_FAILURES:
        if not k["match"](case):
            continue
        if failure is not None and k.get("error") and not re.search(k["error"], failure):
            continue
        return k
    return None


def precheck(meshc, work, tag, mesh, cases):
    """`meshc check --emit=gir` (types, layouts, autodiff, the GIR verifier; no linking)
    of the program and, when it fails, of each case alone. Returns ({cid: error} of the
    cases rejected alone, the whole program's error when no case alone explains it)."""
    d = os.path.join(work, tag + ".check")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)

    def chk(cs, name):
        src = os.path.join(d, name + ".msh")
        with open(src, "w") as f:
            f.write(program(mesh, cs))
        rc, out = run_cmd([meshc, "check", "--emit=gir", src], cwd=d, stdout=False)
        return None if rc == 0 else "meshc check --emit=gir failed (status %s):\n%s" % (rc, clip(out))
    whole = chk(cases, "all")
    bad = {}
    if whole is not None and len(cases) > 1:
        for c in cases:
            e = chk([c], c.cid)
            if e is not None:
                bad[c.cid] = e
    elif whole is not None:
        bad[cases[0].cid] = whole
    shutil.rmtree(d, ignore_errors=True)
    return bad, (whole if whole is not None and not bad else None)


def check_case(case, ref, results):
    """Problems of a case given {variant: (error, outputs)}."""
    problems = []
    for v in VARIANTS:
        err, outs = results[v]
        if err:
            problems.append("[%s] %s" % (v, err))
            continue
        for fn, (kind, want) in ref.items():
            if kind == "print":
                for p in compare_print(want, outs.get("stdout", []), case.cid):
                    problems.append("[%s] printed %s: %s" % (v, case.cid, p))
                continue
            if fn not in outs:
                problems.append("[%s] %s was not saved" % (v, fn))
                continue
            for p in compare(want, outs[fn], kind):
                problems.append("[%s] %s (%s) vs the NumPy reference: %s" % (v, fn, kind, p))
    if not any(results[v][0] for v in VARIANTS):
        for fn, (kind, _w) in ref.items():
            if kind == "print":
                continue        # each printed line is compared with the reference (%.6g)
            a, b = results["declared"][1].get(fn), results["all-1"][1].get(fn)
            if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape:
                for p in compare(b.astype(np.float64), a, kind):
                    problems.append("declared vs all-1 %s: %s" % (fn, p.split("\n")[0]))
    return problems


def report(case, problems, meshc, keep):
    src = case.text()
    fname = "random_%s.msh" % case.cid
    lines = ["  features: %s" % ", ".join(sorted(case.features))]
    for p in problems:
        lines.append(indent(p, "  "))
    lines.append("  reproduce (in an empty directory):")
    lines.append("    %s build %s -o prog && ./prog" % (meshc, fname))
    lines.append("    %s build %s -o prog1 %s && ./prog1" % (meshc, fname, " ".join(case.mesh.all_one())))
    lines.append("  expected:")
    for fn, (kind, want) in case.ref.items():
        lines.append("    %s (%s):\n%s" % (fn, kind, indent(fmt(want), "      ")))
    lines.append("  %s:\n%s" % (fname, indent(src, "    | ")))
    text = "\n".join(lines)
    if keep:
        os.makedirs(keep, exist_ok=True)
        with open(os.path.join(keep, fname), "w") as f:
            f.write(src)
        with open(os.path.join(keep, "random_%s.txt" % case.cid), "w") as f:
            f.write(text + "\n")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--meshc", default=os.path.join(ROOT, "build", "meshc"))
    ap.add_argument("--count", type=int, default=100, help="cases per mesh (default 100)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--meshes", default="pod,hex,box", help="from: %s" % ",".join(MESHES))
    ap.add_argument("--per-file", type=int, default=25, help="cases per program (default 25)")
    ap.add_argument("--case", default=None, help="only case MESH:INDEX (e.g. box:17)")
    ap.add_argument("--keep", default=None, help="write failing cases' programs and reports to DIR")
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--skip-known", action="store_true", help="do not build cases KNOWN_FAILURES selects")
    ap.add_argument("--print", dest="print_case", action="store_true", help="print the --case program and exit")
    ap.add_argument("--corpus", default=None,
                    help="write each case as a standalone program into DIR (a fuzzer seed corpus) and exit")
    ap.add_argument("-j", type=int, default=2, help="parallel builds/runs (default 2)")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    meshc = os.path.abspath(args.meshc)
    if not os.path.exists(meshc):
        print("no meshc at %s (--meshc)" % meshc)
        return 2
    keep = os.path.abspath(args.keep) if args.keep else None

    # Generate.
    todo = []          # (mesh, [cases])
    if args.case:
        mk, _, idx = args.case.partition(":")
        if mk not in MESHES or not idx.isdigit():
            print("--case MESH:INDEX, MESH one of %s" % ",".join(MESHES))
            return 2
        c = make_case(MESHES[mk], int(idx), args.seed)
        if args.print_case:
            sys.stdout.write(c.text())
            return 0
        todo.append((MESHES[mk], [c]))
    else:
        for mk in args.meshes.split(","):
            if mk not in MESHES:
                print("unknown mesh %s (--meshes: %s)" % (mk, ",".join(MESHES)))
                return 2
            todo.append((MESHES[mk], [make_case(MESHES[mk], i, args.seed) for i in range(args.count)]))
    if args.corpus:
        os.makedirs(args.corpus, exist_ok=True)
        n = 0
        for mesh, cases in todo:
            for c in cases:
                with open(os.path.join(args.corpus, "%s_%s.msh" % (c.label.replace(":", "_"), args.seed)), "w") as f:
                    f.write(c.text())
                n += 1
        print("wrote %d programs to %s" % (n, args.corpus))
        return 0
    skipped = []
    groups = []        # (tag, mesh, cases)
    for mesh, cases in todo:
        batch = []
        for c in cases:
            k = known(c)
            if k is not None and args.skip_known and not k.get("error"):
                skipped.append((c, k))      # a wrong-value class: not built in CI
                continue
            batch.append(c)
        for i in range(0, len(batch), max(1, args.per_file)):
            part = batch[i:i + args.per_file]
            groups.append(("%s_f%d" % (mesh.key, i // args.per_file), mesh, part))
    ncases = sum(len(g[2]) for g in groups)

    own_work = args.work is None
    work = tempfile.mkdtemp(prefix="random-programs-") if own_work else os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    pool = concurrent.futures.ThreadPoolExecutor(max(1, args.j))
    results = {}       # cid -> {variant: (error, outputs)}
    whole_failures = []
    # Cases the checker rejects (alone) are failures without a build; the others are built.
    pre = [(g, pool.submit(precheck, meshc, work, g[0], g[1], g[2])) for g in groups]
    for _tag, _mesh, cases in groups:
        for c in cases:
            c.ref = c.reference()
    built = []
    for (tag, mesh, cases), fut in pre:
        bad, whole = fut.result()
        if whole is not None:
            whole_failures.append((tag, "declared", cases, whole))
        for c in cases:
            if c.cid in bad:
                results[c.cid] = {v: (bad[c.cid], {}) for v in VARIANTS}
        rest = [c for c in cases if c.cid not in bad]
        if rest:
            built.append((tag, mesh, rest))
    futs = [(g, v, pool.submit(build_and_run, meshc, work, g[0], g[1], g[2], v)) for g in built for v in VARIANTS]
    # A program that fails as a whole is split in halves (and so on) until the failing
    # cases stand alone: the failures are then each one case's.
    rnd = 0
    split = []
    while futs:
        retry = []
        for (tag, mesh, cases), v, fut in futs:
            err, outs = fut.result()
            if err and len(cases) > 1:
                if args.v:
                    print("note: %s (%s) failed as a whole; splitting it:\n%s" % (tag, v, indent(err)))
                split.append((tag, v, cases, err))
                h = (len(cases) + 1) // 2
                retry += [(("%s_%d%s" % (tag, rnd, k), mesh, part), v)
                          for k, part in (("a", cases[:h]), ("b", cases[h:]))]
                continue
            for c in cases:
                results.setdefault(c.cid, {})[v] = (err, outs)
        rnd += 1
        futs = [(g, v, pool.submit(build_and_run, meshc, work, g[0], g[1], g[2], v)) for g, v in retry]
    pool.shutdown()
    for tag, v, cases, err in split:
        if not any(results[c.cid][v][0] for c in cases):
            whole_failures.append((tag, v, cases, err))

    failed, xfails, xpasses, npass = [], [], [], 0
    by_feature = {}
    for _tag, _mesh, cases in groups:
        for c in cases:
            problems = check_case(c, c.ref, results[c.cid])
            for f in c.features:
                by_feature.setdefault(f, [0, 0])[0] += 1
            k = known(c, "\n".join(problems)) if problems else known(c)
            if not problems:
                npass += 1
                if k and not k.get("error"):
                    xpasses.append((c, k))      # selected by its construct alone, yet it passed
                continue
            for f in c.features:
                by_feature[f][1] += 1
            if k:
                xfails.append((c, k))
                if args.v:
                    print("\nXFAIL %s (%s)\n%s" % (c.label, k["id"], report(c, problems, meshc, keep)))
                continue
            failed.append(c)
            print("\nFAIL case %s (seed %d)\n%s" % (c.label, args.seed, report(c, problems, meshc, keep)))
    if args.v:
        print("\nfeature: cases (failing)")
        for f in sorted(by_feature):
            print("  %-22s %5d (%d)" % (f, by_feature[f][0], by_feature[f][1]))
    for tag, v, cases, err in whole_failures:
        print("\nFAIL: program %s (%s) of cases %s failed, but no case fails alone:\n%s"
              % (tag, v, " ".join(c.label for c in cases), indent(err)))
    for c, k in xfails:
        print("XFAIL %s: %s: %s" % (c.label, k["id"], k["bug"]))
    for c, k in xpasses:
        print("XPASS %s: known failure %s did not show (remove it from KNOWN_FAILURES if fixed)" % (c.label, k["id"]))
    for c, k in skipped:
        if args.v:
            print("skipped %s (known failure %s)" % (c.label, k["id"]))
    print("\n%s: %d cases on %s (seed %d, %d programs x %d builds): %d passed, %d failed, %d XFAIL, %d skipped "
          "(known), %.1f s" % ("FAILED" if failed or whole_failures else "passed", ncases,
                               ",".join(m.key for m, _ in todo), args.seed,
                               len(groups), len(VARIANTS), npass, len(failed), len(xfails), len(skipped),
                               time.time() - t0))
    if failed:
        print("failing cases: %s (rerun one: --case MESH:INDEX --seed %d)" % (" ".join(c.label for c in failed),
                                                                               args.seed))
    if own_work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed or whole_failures else 0


if __name__ == "__main__":
    sys.exit(main())
