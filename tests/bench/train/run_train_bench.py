#!/usr/bin/env python3
"""Training-step benchmark: meshc against JAX on the same MLP, on 1 and on 4 devices.

Model (the same in every program): loss = mean((tanh(x @ w1) @ w2 - y)^2) with
x, y: [B, D], w1: [D, H], w2: [H, D]; B = 2048, D = 256, H = 1024 by default. Modes:

  dp_sgd      data-parallel SGD step (batch split over `data`, weights replicated,
              gradient all_reduce), p - 0.1 * g                       (dp_sgd.msh)
  zero3_adam  ZeRO-3 Adam step (weights and Adam moments split by rows over `data`,
              weights all_gathered for use, gradients reduce_scattered; Adam of
              std/optim.msh, lr 0.001)                                (zero3_adam.msh)
  forward     the loss alone, no gradient, in dp_sgd's layout         (dp_forward.msh)

The Mesh programs are the .msh files beside this script. Each runs its step N times in
a `for` loop inside `main` and prints the loss at the end (as f64). The script
substitutes the sizes (main's load annotations) and N, and builds each program with
`meshc build -O2 --mesh Pod=data:DEVICES` for N = K and N = 2K (--steps K). Every
device is a thread of the simulated mesh; `--mesh-threads` (OpenBLAS threads per
device) defaults to max(1, cores // devices), the runtime's own default.

JAX runs the same step (jax.jit of the step function; shardings from jax.sharding:
x and y PartitionSpec('data', None); weights replicated for dp_sgd and forward,
PartitionSpec('data', None) for zero3_adam and its Adam moments) on as many host
devices (XLA_FLAGS=--xla_force_host_platform_device_count=DEVICES, set before jax is
imported), from the same .npy files. One JAX process per device count stays alive for
the whole run.

Timing. meshc: both programs run with `--trace`; a step is the interval between the
starts of the first occurrences, in consecutive steps, of an event that occurs c times
per step on device 0 and nowhere else (found by comparing the K- and 2K-step traces;
e.g. the backward's `contract mn,kn->mk`, once per step), and a run's figure is the
median of its 2K - 1 intervals. JAX:
K steps, each waited for (`block_until_ready`), after a warm-up of 2K steps; a run's
figure is their median. meshc and JAX runs alternate --repeat times (which goes first
alternates too); the headline figure is the best run's median (as the other
benchmarks here), the median over runs is printed too. Also printed: the throughput
(meshc (T(2K) - T(K)) / K of the programs' wall times, which cancels start-up and
loading; JAX K steps dispatched back to back / K) and CPU time per step (all threads;
from getrusage for meshc, process_time in the JAX process).

Correctness: the losses after K and after 2K steps (forward: the loss of the initial
weights) of meshc and of JAX must agree to --tol (relative, default 1e-4), and both
are checked against a float64 NumPy implementation of the same training (hand-written
backward). A mismatch makes the script exit 1.

Where meshc's time goes (--breakdown, default dp_sgd on 1 device): in the 2K-step trace
of the run with the best step, device 0's events that start between the first and the
last occurrence of the step's marker event (2K - 1 whole steps), total duration per
event kind (name, and the einsum of a contraction) per step; what no event covers is
"untraced" (allocation, loop overhead, code outside the runtime's events, and time the
thread was descheduled between events).

JAX is looked for in --jax-python, then tests/bench/.venv (created only for
benchmarks: `python3 -m venv tests/bench/.venv && tests/bench/.venv/bin/pip install
jax`), then in the running Python; without it the full run says so and reports meshc
alone (exit 0).

    python3 tests/bench/train/run_train_bench.py --meshc build/meshc [--repeat 5]
        [--devices 1,4] [--modes dp_sgd zero3_adam forward] [--steps 8]
        [--batch 2048 --dim 256 --hidden 1024] [--jax-python PY] [--json out.json]
        [--breakdown dp_sgd:1 zero3_adam:4 ...]
    python3 tests/bench/train/run_train_bench.py --meshc build/meshc --smoke
        # tiny sizes, one round, no JAX; checks meshc's losses against NumPy (~10 s)
"""
import argparse
import datetime
import json
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
VENV_PYTHON = os.path.join(ROOT, "tests", "bench", ".venv", "bin", "python")
MODES = ["dp_sgd", "zero3_adam", "forward"]
SOURCES = {"dp_sgd": "dp_sgd.msh", "zero3_adam": "zero3_adam.msh", "forward": "dp_forward.msh"}
# The sizes as written in the .msh files' `main` (B, D, H) and what they stand for.
WRITTEN = {"[2048, 256]": "[{B}, {D}]", "[256, 1024]": "[{D}, {H}]", "[1024, 256]": "[{H}, {D}]"}
LOOP = re.compile(r"for step in 0\.\.\d+ \{")
SGD_LR = 0.1
ADAM_LR = 0.001
FULL = dict(B=2048, D=256, H=1024, K=8)
SMOKE = dict(B=64, D=16, H=32, K=2)


# ---------------------------------------------------------------- the Mesh programs

def program(mode, B, D, H, steps):
    with open(os.path.join(HERE, SOURCES[mode])) as f:
        src = f.read()
    pattern = re.compile("|".join(re.escape(k) for k in WRITTEN))
    found = pattern.findall(src)
    if len(found) < 4:
        raise SystemExit(f"{SOURCES[mode]}: expected the load annotations {list(WRITTEN)} in main")
    src = pattern.sub(lambda m: WRITTEN[m.group(0)].format(B=B, D=D, H=H), src)
    src, n = LOOP.subn(f"for step in 0..{steps} {{", src)
    if n != 1:
        raise SystemExit(f"{SOURCES[mode]}: expected one `for step in 0..N {{` loop, found {n}")
    return src


def run(cmd, cwd=None, what=None, env=None):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"{what or cmd[0]} failed (status {p.returncode}): {shlex.join(cmd)}\n"
                         f"{p.stdout[-3000:]}{p.stderr[-3000:]}")
    return p.stdout


def build(meshc, tmp, mode, devices, sizes, steps):
    name = f"{mode}_d{devices}_n{steps}"
    src = os.path.join(tmp, name + ".msh")
    exe = os.path.join(tmp, name)
    with open(src, "w") as f:
        f.write(program(mode, sizes["B"], sizes["D"], sizes["H"], steps))
    # The program imports std.optim: the standard library is found beside meshc's
    # source tree (or $MESHC_STDLIB), not beside the generated file.
    run([meshc, "build", "-O2", src, "--mesh", f"Pod=data:{devices}", "-o", exe],
        what=f"meshc build {name}")
    return exe


def parse_loss(out, what):
    m = re.search(r"^loss (\S+)$", out, re.M)
    if not m:
        raise SystemExit(f"{what}: no `loss` line in its output:\n{out}")
    return float(m.group(1))


def run_mesh(exe, tmp, threads, trace=None):
    """-> (wall s, CPU s of the process (user + system, all threads), printed loss)."""
    cmd = [exe, f"--mesh-threads={threads}"] + ([f"--trace={trace}"] if trace else [])
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = run(cmd, cwd=tmp, what=os.path.basename(exe))
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, parse_loss(out, os.path.basename(exe))


def trace_events(path):
    """Device 0's complete events as (kind, start s, duration s); kind is the event's
    name, plus the einsum for a contraction."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    out = []
    for e in events:
        if e.get("ph") != "X" or e.get("tid", 0) != 0:
            continue
        spec = (e.get("args") or {}).get("spec")
        out.append((f"{e['name']} {spec}" if spec else e["name"], e["ts"] * 1e-6, e["dur"] * 1e-6))
    out.sort(key=lambda ev: ev[1])
    return out


def totals(events):
    tot, cnt = defaultdict(float), defaultdict(int)
    for kind, _, dur in events:
        tot[kind] += dur
        cnt[kind] += 1
    return tot, cnt


def step_marker(ev_k, ev_2k, K):
    """(kind, c): an event kind that occurs c times per step and nowhere else: c K times
    in the K-step trace and 2 c K times in the 2K-step one (the smallest c, then the
    longest such event, for a steady start); None if there is none."""
    tk, ck = totals(ev_k)
    t2, c2 = totals(ev_2k)
    kinds = [(c2[k] // (2 * K), k) for k in c2
             if c2[k] % (2 * K) == 0 and c2[k] > 0 and ck.get(k) == c2[k] // 2]
    if not kinds:
        return None
    c, kind = min(kinds, key=lambda ck_: (ck_[0], -t2[ck_[1]]))
    return kind, c


def marker_starts(events, marker):
    kind, c = marker
    return [t for k, t, _ in events if k == kind][::c]


def step_times(events, marker):
    """Per-step times: the intervals between the starts of the marker event's first
    occurrence in consecutive steps."""
    starts = marker_starts(events, marker)
    return [b - a for a, b in zip(starts, starts[1:])]


# ---------------------------------------------------------------- data and references

def make_data(tmp, B, D, H):
    rng = np.random.default_rng(2026)
    x = rng.standard_normal((B, D), dtype=np.float32)
    t1 = rng.standard_normal((D, H), dtype=np.float32) / np.float32(np.sqrt(D))
    t2 = rng.standard_normal((H, D), dtype=np.float32) / np.float32(np.sqrt(H))
    y = (np.tanh(x @ t1) @ t2).astype(np.float32)           # targets from a teacher
    w1 = (rng.standard_normal((D, H), dtype=np.float32) / np.float32(np.sqrt(D))).astype(np.float32)
    w2 = (rng.standard_normal((H, D), dtype=np.float32) / np.float32(np.sqrt(H))).astype(np.float32)
    data = dict(x=x, y=y, w1=w1, w2=w2)
    for k, v in data.items():
        np.save(os.path.join(tmp, k + ".npy"), v)
    return data


def reference_losses(data, mode, steps_list):
    """float64 NumPy: the loss after each number of steps in steps_list."""
    x, y = data["x"].astype(np.float64), data["y"].astype(np.float64)
    w1, w2 = data["w1"].astype(np.float64), data["w2"].astype(np.float64)
    n = y.size

    def loss_grad(w1, w2):
        h = np.tanh(x @ w1)
        err = h @ w2 - y
        dpred = 2.0 * err / n
        dw2 = h.T @ dpred
        da = (dpred @ w2.T) * (1.0 - h * h)
        return float(np.mean(err * err)), x.T @ da, dw2

    if mode == "forward":
        return {k: loss_grad(w1, w2)[0] for k in steps_list}
    m = [np.zeros_like(w1), np.zeros_like(w2)]
    v = [np.zeros_like(w1), np.zeros_like(w2)]
    b1t = b2t = 1.0
    out = {}
    for step in range(1, max(steps_list) + 1):
        _, g1, g2 = loss_grad(w1, w2)
        if mode == "dp_sgd":
            w1, w2 = w1 - SGD_LR * g1, w2 - SGD_LR * g2
        else:
            b1t *= 0.9
            b2t *= 0.999
            new = []
            for i, (w, g) in enumerate(((w1, g1), (w2, g2))):
                m[i] = 0.9 * m[i] + 0.1 * g
                v[i] = 0.999 * v[i] + 0.001 * g * g
                new.append(w - ADAM_LR * (m[i] / (1 - b1t)) / (np.sqrt(v[i] / (1 - b2t)) + 1e-8))
            w1, w2 = new
        if step in steps_list:
            out[step] = loss_grad(w1, w2)[0]
    return out


# ---------------------------------------------------------------- JAX

JAX_CHILD = r"""
import json, os, sys, time
devices, B, D, H, K = (int(a) for a in sys.argv[1:6])
tmp, modes = sys.argv[6], sys.argv[7].split(",")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count={devices}").strip()
import re
import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
jax.config.update("jax_platforms", "cpu")
mesh = Mesh(np.array(jax.devices()[:devices]), ("data",))
def S(*spec): return NamedSharding(mesh, P(*spec))
ROWS, REP = S("data", None), S()
load = lambda n, s: jax.device_put(np.load(os.path.join(tmp, n + ".npy")), s)
x, y = load("x", ROWS), load("y", ROWS)

def loss(p, x, y):
    w1, w2 = p
    err = jnp.tanh(x @ w1) @ w2 - y
    return jnp.mean(err * err)

def sgd_step(state, x, y):
    p = state
    g = jax.grad(loss)(p, x, y)
    return tuple(w - SGD_LR * gw for w, gw in zip(p, g))

def adam_step(state, x, y):
    p, s = state
    g = jax.grad(loss)(p, x, y)
    ps, ss = [], []
    for w, gw, (m, v, b1t, b2t) in zip(p, g, s):
        m = 0.9 * m + (1.0 - 0.9) * gw
        v = 0.999 * v + (1.0 - 0.999) * gw * gw
        b1t, b2t = b1t * 0.9, b2t * 0.999
        ps.append(w - ADAM_LR * (m / (1.0 - b1t)) / (jnp.sqrt(v / (1.0 - b2t)) + 1e-8))
        ss.append((m, v, b1t, b2t))
    return tuple(ps), tuple(ss)

def collectives(compiled):
    text = compiled.as_text()
    ops = re.findall(r"= [^=]*? (all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?\(", text)
    return {k: ops.count(k) for k in sorted(set(ops))}

loss_fn = jax.jit(loss)
setup = {}
for mode in modes:
    if mode == "forward":
        state = (load("w1", REP), load("w2", REP))
        step = jax.jit(lambda st, x, y: loss(st, x, y))
        losses = {K: float(step(state, x, y)), 2 * K: float(step(state, x, y))}
        info = collectives(step.lower(state, x, y).compile())
    else:
        if mode == "dp_sgd":
            state = (load("w1", REP), load("w2", REP))
            step = jax.jit(sgd_step, out_shardings=(REP, REP))
        else:
            p = (load("w1", ROWS), load("w2", ROWS))
            z = lambda w: jax.device_put(jnp.zeros(w.shape, w.dtype), ROWS)
            one = jax.device_put(jnp.float32(1.0), REP)
            state = (p, tuple((z(w), z(w), one, one) for w in p))
            step = jax.jit(adam_step, out_shardings=((ROWS, ROWS), tuple((ROWS, ROWS, REP, REP) for _ in p)))
        info = collectives(step.lower(state, x, y).compile())
        losses = {}
        for i in range(1, 2 * K + 1):          # the first 2K steps are the warm-up too
            state = step(state, x, y)
            if i in (K, 2 * K):
                losses[i] = float(loss_fn(state if mode == "dp_sgd" else state[0], x, y))
    setup[mode] = (step, state)
    print(json.dumps(dict(mode=mode, losses=losses, collectives=info)), flush=True)
print(json.dumps(dict(ready=True, version=jax.__version__, devices=len(jax.devices()))), flush=True)

def one_step(mode, state):
    if mode == "forward":
        return state, step_fns[mode](state, x, y)
    out = step_fns[mode](state, x, y)
    return out, out

for line in sys.stdin:
    mode = line.strip()
    if not mode:
        break
    step, state = setup[mode]
    step_fns = {mode: step}
    jax.block_until_ready(state)
    # K steps dispatched back to back, one wait at the end (throughput, CPU time) ...
    c0 = time.process_time()
    t0 = time.perf_counter()
    outs = []
    for _ in range(K):
        state, out = one_step(mode, state)
        outs.append(out)
    jax.block_until_ready(outs)
    total = time.perf_counter() - t0
    cpu = time.process_time() - c0
    # ... then K steps each waited for: the median step.
    per = []
    for _ in range(K):
        t0 = time.perf_counter()
        state, out = one_step(mode, state)
        jax.block_until_ready(out)
        per.append(time.perf_counter() - t0)
    setup[mode] = (step, state)
    per.sort()
    print(json.dumps(dict(step=per[len(per) // 2] if len(per) % 2 else (per[len(per) // 2 - 1] + per[len(per) // 2]) / 2,
                          thru=total / K, cpu=cpu / K)), flush=True)
""".replace("SGD_LR", repr(SGD_LR)).replace("ADAM_LR", repr(ADAM_LR))


def jax_python(explicit):
    cands = [explicit] if explicit else [VENV_PYTHON, sys.executable]
    for py in cands:
        if py and os.path.exists(py) and subprocess.run([py, "-c", "import jax"], capture_output=True).returncode == 0:
            return py
    if explicit:
        raise SystemExit(f"--jax-python {explicit}: cannot import jax there")
    return None


class JaxChild:
    def __init__(self, py, devices, sizes, tmp, modes):
        env = dict(os.environ)
        self.p = subprocess.Popen([py, "-c", JAX_CHILD, str(devices), str(sizes["B"]), str(sizes["D"]),
                                   str(sizes["H"]), str(sizes["K"]), tmp, ",".join(modes)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.setup = {}
        while True:
            msg = self._read()
            if msg.get("ready"):
                self.version = msg["version"]
                if msg["devices"] != devices:
                    raise SystemExit(f"JAX child: {msg['devices']} host devices, wanted {devices}")
                break
            self.setup[msg["mode"]] = dict(losses={int(k): v for k, v in msg["losses"].items()},
                                           collectives=msg["collectives"])

    def _read(self):
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit(f"the JAX child exited (status {self.p.wait()})")
        return json.loads(line)

    def time_step(self, mode):
        self.p.stdin.write(mode + "\n")
        self.p.stdin.flush()
        return self._read()

    def close(self):
        try:
            self.p.stdin.write("\n")
            self.p.stdin.flush()
        except OSError:
            pass
        self.p.wait()


# ---------------------------------------------------------------- report

def machine():
    info = dict(platform=platform.platform(), cpus=os.cpu_count(), numpy=np.__version__)
    try:
        with open("/proc/cpuinfo") as f:
            models = re.findall(r"^model name\s*:\s*(.*)$", f.read(), re.M)
        info["cpu"] = models[0] if models else platform.processor()
    except OSError:
        pass
    try:
        info["loadavg"] = os.getloadavg()
    except OSError:
        pass
    return info


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--meshc", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--devices", default="1,4", help="comma-separated device counts (default 1,4)")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=MODES)
    ap.add_argument("--steps", type=int, help=f"K: programs of K and 2K steps (default {FULL['K']})")
    ap.add_argument("--batch", type=int, help=f"B (default {FULL['B']})")
    ap.add_argument("--dim", type=int, help=f"D (default {FULL['D']})")
    ap.add_argument("--hidden", type=int, help=f"H (default {FULL['H']})")
    ap.add_argument("--mesh-threads", type=int, help="--mesh-threads of meshc's programs "
                    "(default max(1, cores // devices))")
    ap.add_argument("--jax-python", help="a Python that has jax (default: tests/bench/.venv, then this one)")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--breakdown", nargs="*", default=None, metavar="MODE:DEVICES",
                    help="meshc trace breakdowns to print (default dp_sgd:1; none with no argument)")
    ap.add_argument("--tol", type=float, default=1e-4, help="relative loss agreement (default 1e-4)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round, no JAX: proves the script works")
    ap.add_argument("--json")
    args = ap.parse_args()

    base = SMOKE if args.smoke else FULL
    sizes = dict(B=args.batch or base["B"], D=args.dim or base["D"], H=args.hidden or base["H"],
                 K=args.steps or base["K"])
    K = sizes["K"]
    if K < 2:
        raise SystemExit("--steps must be at least 2")
    repeat = 1 if args.smoke else args.repeat
    devices = [int(d) for d in args.devices.split(",") if d.strip()]
    for d in devices:
        for k in ("B", "D", "H"):
            if sizes[k] % d:
                raise SystemExit(f"{k} = {sizes[k]} is not a multiple of {d} devices")
    modes = args.modes
    breakdown = ["dp_sgd:1"] if args.breakdown is None else args.breakdown
    breakdown = [b for b in breakdown if b.split(":")[0] in modes and int(b.split(":")[1]) in devices]
    cores = os.cpu_count() or 1
    threads = {d: args.mesh_threads or max(1, cores // d) for d in devices}
    meshc = os.path.abspath(args.meshc)
    py = None if (args.no_jax or args.smoke) else jax_python(args.jax_python)
    if py is None and not (args.no_jax or args.smoke):
        print("JAX not found (tests/bench/.venv, this Python): meshc figures only. To compare, run\n"
              "  python3 -m venv tests/bench/.venv && tests/bench/.venv/bin/pip install jax")

    cases = [(mode, d) for d in devices for mode in modes]
    failures = []
    mesh = {c: defaultdict(list) for c in cases}      # step, thru, cpu: one figure per repetition
    jx = {c: defaultdict(list) for c in cases}
    mesh_losses, traces, markers = {}, defaultdict(list), {}
    loads = [os.getloadavg()[0]]
    children = {}
    jax_version = None
    with tempfile.TemporaryDirectory(prefix="meshc-train-bench-") as tmp:
        data = make_data(tmp, sizes["B"], sizes["D"], sizes["H"])
        refs = {mode: reference_losses(data, mode, [K, 2 * K]) for mode in modes}
        exes = {(m, d, n): build(meshc, tmp, m, d, sizes, n) for (m, d) in cases for n in (K, 2 * K)}
        try:
            if py:
                for d in devices:
                    children[d] = JaxChild(py, d, sizes, tmp, modes)
                    jax_version = children[d].version

            def mesh_once(c, r):
                mode, d = c
                tr = [os.path.join(tmp, f"trace_{mode}_{d}_{n}.json") for n in (K, 2 * K)]
                tk, ck, lk = run_mesh(exes[(mode, d, K)], tmp, threads[d], trace=tr[0])
                t2k, c2k, l2k = run_mesh(exes[(mode, d, 2 * K)], tmp, threads[d], trace=tr[1])
                ev = [trace_events(t) for t in tr]
                if r == 0:
                    mesh_losses[c] = {K: lk, 2 * K: l2k}
                    markers[c] = step_marker(ev[0], ev[1], K)
                if any(b == f"{c[0]}:{c[1]}" for b in breakdown):
                    traces[c].append(ev)
                elif (lk, l2k) != (mesh_losses[c][K], mesh_losses[c][2 * K]):
                    failures.append(f"meshc {mode} on {d} device(s): the loss changed between runs")
                mesh[c]["thru"].append((t2k - tk) / K)
                mesh[c]["cpu"].append((c2k - ck) / K)
                if markers[c]:
                    mesh[c]["step"].append(statistics.median(step_times(ev[1], markers[c])))

            def jax_once(c, r):
                if c[1] in children:
                    msg = children[c[1]].time_step(c[0])
                    for k in ("step", "thru", "cpu"):
                        jx[c][k].append(msg[k])

            for r in range(repeat):
                for c in cases:
                    for f in ((mesh_once, jax_once) if r % 2 == 0 else (jax_once, mesh_once)):
                        f(c, r)
                loads.append(os.getloadavg()[0])
        finally:
            for ch in children.values():
                ch.close()

    # ---- losses
    print(f"MLP B={sizes['B']} D={sizes['D']} H={sizes['H']}, K = {K}; {repeat} alternating repetitions; "
          f"meshc -O2" + (f", JAX {jax_version}" if py else ", no JAX") + f"; {cores} cores, --mesh-threads "
          + ", ".join(f"{threads[d]} at {d} device{'s' if d > 1 else ''}" for d in devices))
    print()
    print("losses after K and 2K steps (forward: the initial weights' loss)")
    print(f"{'mode':<11} {'dev':>3} {'steps':>5} {'meshc':>14} {'jax':>14} {'numpy f64':>14} {'meshc/jax-1':>12} {'meshc/np-1':>11}")
    loss_rows = []
    for mode, d in cases:
        for n in (K, 2 * K):
            ml = mesh_losses[(mode, d)][n]
            jl = children[d].setup[mode]["losses"][n] if d in children else None
            nl = refs[mode][n]
            dj = rel(ml, jl) if jl is not None else None
            dn = rel(ml, nl)
            if (dj is not None and not dj <= args.tol) or not dn <= args.tol:
                failures.append(f"{mode} on {d} device(s) after {n} steps: meshc {ml!r}, jax {jl!r}, numpy {nl!r}")
            loss_rows.append(dict(mode=mode, devices=d, steps=n, meshc=ml, jax=jl, numpy=nl))
            print(f"{mode:<11} {d:>3} {n:>5} {ml:>14.9g} {(f'{jl:.9g}' if jl is not None else '-'):>14} {nl:>14.9g} "
                  f"{(f'{dj:.1e}' if dj is not None else '-'):>12} {dn:>11.1e}")

    # ---- times
    best = lambda xs: min(xs) * 1e3 if xs else None
    med = lambda xs: statistics.median(xs) * 1e3 if xs else None
    fmt = lambda v, w, p=2: f"{v:>{w}.{p}f}" if v is not None else f"{'-':>{w}}"
    print()
    print("ms per step. step: the median step of a run (meshc: intervals between the starts of an event that")
    print("marks each step, in the program's trace; JAX: K steps, each waited for); best: the best run's,")
    print("median: the median over the runs. thru: meshc (T(2K) - T(K)) / K of the programs' wall times, JAX")
    print("K steps dispatched back to back / K (best run); cpu: CPU time of all threads per step (median run).")
    print(f"{'mode':<11} {'dev':>3} {'meshc best':>10} {'jax best':>9} {'ratio':>6} {'meshc med':>10} {'jax med':>8}"
          f" {'ratio':>6} {'thru m':>7} {'thru j':>7} {'cpu m':>6} {'cpu j':>6}")
    results = []
    for c in cases:
        mode, d = c
        ms, js = mesh[c]["step"], jx[c]["step"]
        m, j, mm, jm = best(ms), best(js), med(ms), med(js)
        row = dict(mode=mode, devices=d, meshc_ms=m, jax_ms=j, ratio=(m / j if m and j else None),
                   meshc_median_ms=mm, jax_median_ms=jm, ratio_median=(mm / jm if mm and jm else None),
                   meshc_thru_ms=best(mesh[c]["thru"]), jax_thru_ms=best(jx[c]["thru"]),
                   meshc_cpu_ms=med(mesh[c]["cpu"]), jax_cpu_ms=med(jx[c]["cpu"]),
                   meshc_runs_ms=[v * 1e3 for v in ms], jax_runs_ms=[v * 1e3 for v in js],
                   meshc_marker=list(markers[c]) if markers.get(c) else None,
                   jax_collectives=children[d].setup[mode]["collectives"] if d in children else None)
        results.append(row)
        print(f"{mode:<11} {d:>3} {fmt(m, 10)} {fmt(j, 9)} {fmt(row['ratio'], 6)} {fmt(mm, 10)} {fmt(jm, 8)}"
              f" {fmt(row['ratio_median'], 6)} {fmt(row['meshc_thru_ms'], 7, 1)} {fmt(row['jax_thru_ms'], 7, 1)}"
              f" {fmt(row['meshc_cpu_ms'], 6, 1)} {fmt(row['jax_cpu_ms'], 6, 1)}")
    print(f"load average (1 min) before and after each repetition: {', '.join(f'{l:.1f}' for l in loads)}")
    mk = lambda m: "none (no step figure)" if not m else m[0] + (f" (the first of {m[1]} per step)" if m[1] > 1 else "")
    print("meshc step marker events: " + "; ".join(f"{m}@{d}: {mk(markers.get((m, d)))}" for m, d in cases))
    if children:
        print("collectives in XLA's compiled step: " + "; ".join(
            f"{r['mode']}@{r['devices']}: " + (", ".join(f"{k} {v}" for k, v in r["jax_collectives"].items()) or "none")
            for r in results if r["jax_collectives"] is not None))

    # ---- where meshc's time goes: one 2K-step trace (the run with the best step), the
    # events that start between the marker's first and last occurrence (2K - 1 whole steps)
    breakdowns = {}
    for b in breakdown:
        mode, d = b.split(":")[0], int(b.split(":")[1])
        marker = markers[(mode, d)]
        if not marker or not traces[(mode, d)]:
            print(f"\nno breakdown for {b}: no event occurs once per step")
            continue
        ev = min((t[1] for t in traces[(mode, d)]), key=lambda e: statistics.median(step_times(e, marker)))
        starts = marker_starts(ev, marker)
        lo, hi, nsteps = starts[0], starts[-1], len(starts) - 1
        window = [e for e in ev if lo <= e[1] < hi]
        tot, cnt = totals(window)
        step = (hi - lo) / nsteps
        rows = sorted(((k, tot[k] / nsteps, cnt[k] / nsteps) for k in tot), key=lambda row: -row[1])
        traced = sum(p for _, p, _ in rows)
        breakdowns[b] = dict(step_ms=step * 1e3, untraced_ms=(step - traced) * 1e3, steps=nsteps,
                             median_step_ms=statistics.median(step_times(ev, marker)) * 1e3,
                             events=[dict(event=k, ms=p * 1e3, count=c) for k, p, c in rows])
        print()
        print(f"meshc, {mode} on {d} device{'s' if d > 1 else ''}: where a step goes (device 0's trace of the "
              f"{2 * K}-step run with the best step: {nsteps} whole steps, mean step {step * 1e3:.2f} ms)")
        print(f"  {'ms/step':>8} {'share':>6} {'events':>6}  event")
        for kind, per, c in rows:
            print(f"  {per * 1e3:>8.2f} {per / step * 100:>5.1f}% {c:>6.2g}  {kind}")
        print(f"  {(step - traced) * 1e3:>8.2f} {(step - traced) / step * 100:>5.1f}% {'':>6}  untraced "
              "(between events: allocation, loop, code outside the runtime's events, descheduled)")

    if failures:
        print()
        print("FAILED (loss tolerance %g relative):" % args.tol)
        for f in failures:
            print("  " + f)
    if args.smoke:
        print("smoke: ok (tiny sizes: the figures above say nothing about speed)" if not failures else "smoke: FAILED")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(date=datetime.date.today().isoformat(),
                           command="python3 " + shlex.join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
                           meshc=run([meshc, "--version"]).strip(), sizes=sizes, repeat=repeat,
                           mesh_threads=threads, jax=jax_version, machine=machine(), loadavg_1min=loads,
                           losses=loss_rows, results=results, breakdowns=breakdowns), f, indent=2)
            f.write("\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
