#!/usr/bin/env python3
"""GPT training-step benchmark: meshc against JAX and PyTorch on the GPT of
examples/gpt/model.msh, each on 8 and on 1 device (PyTorch: one process).

Configurations (the sizes written in the .msh entry points):
  default  examples/gpt/gpt.msh       L 4, d 256, 4 heads of 64, MLP 1024, seq 128, batch 16
  tiny     examples/gpt/gpt_tiny.msh  L 2, d 64, 4 heads of 16, MLP 256, seq 32, batch 4
(vocabulary 256 bytes in both).

Runners, each a separate process from the same initial parameters (init.safetensors,
GPT-2 initialisation of examples/gpt/prepare.py) and the same token files (a synthetic
word-like byte corpus written here), for --steps steps of the program's training loop
(AdamW, wd 0.1 on the matrices, global-norm clipping at 1, warm-up + cosine schedule,
lr 1e-3: the program's defaults; the windows of each step from the program's hash):

  meshc:8  the program built on its mesh Pod = [data: 2, model: 4] (8 simulated devices,
           threads of one process; --mesh-threads = the runtime's default)
  meshc:1  the program built with `--mesh Pod=data:1,model:1`
  jax:8    jax.jit of the same step (a port of tests/gpt/gpt_torch.py: same model,
           AdamW, clipping and schedule math) on 8 XLA host devices
           (XLA_FLAGS=--xla_force_host_platform_device_count=8), mesh (data 2, model 4):
           batch P('data'), the parameters and AdamW moments sharded as the Mesh types
           say (heads, MLP hidden and vocabulary over 'model', ZeRO-3's D over 'data'),
           q/k/v and the MLP hidden constrained to heads/hidden over 'model'
  jax:1    the same on 1 host device
  torch:1  PyTorch float32 (tests/gpt/gpt_torch.py's model, torch.optim.AdamW,
           clip_grad_norm_), one process, torch's default threads (--torch-threads),
           /usr/bin/python3

Timing. meshc: the program prints `step S loss L` after each step's forward and
backward; the script timestamps the lines as they arrive (stdout is a pipe), a step is
the interval between consecutive lines (the optimizer of one step and the windows,
forward and backward of the next), validation and checkpoints are pushed past the run
(--val-every, --ckpt-every). JAX/PyTorch: each step waited for (block_until_ready /
.item()). The first --warmup steps of every run are dropped (JAX: they include the
compilation); a run's figure is the median of the rest. Runs of all runners alternate
--repeat times (the order reverses every round); the headline figure is the best run's
median, the median over runs is given too. Peak RSS: GNU time's maximum resident set
size of each runner's process (/usr/bin/time -f %M), which includes the interpreter and libraries for JAX/PyTorch and
the whole program for meshc (loading the token files, the final validation, the
generated sample and the checkpoint).

Correctness: the losses of the first --check steps of every run must agree with
PyTorch's float32 run (if PyTorch is found), and all runners with each other, to
--tol (relative, default 1e-4), or the script exits 1.

Where meshc's time goes (--breakdown, default meshc:8 and meshc:1): one extra run of
each with `--trace`: the events (name, plus the einsum of a contraction) between the
starts of step --warmup and of the last step, on device 0 and summed over all devices,
ms per step. A step starts at a marker event: the kind occurring exactly --steps times
on device 0 (a contraction of the backward, so not in the final validation or sample).

    python3 tests/bench/gpt/run_gpt_bench.py --meshc build/meshc [--config default tiny]
        [--repeat 3] [--steps 8] [--json out.json]
    python3 tests/bench/gpt/run_gpt_bench.py --meshc build/meshc --smoke
        # tiny config, 3 steps, meshc 8 + 1 devices (+ PyTorch if found), no JAX
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import shutil
import tempfile
import time
from collections import defaultdict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
VENV_PYTHON = os.path.join(ROOT, "tests", "bench", ".venv", "bin", "python")
TORCH_PYTHON = "/usr/bin/python3"
sys.path.insert(0, os.path.join(ROOT, "examples", "gpt"))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpt"))
from gpt_data import corpus  # noqa: E402

CONFIGS = {
    "default": dict(src="gpt.msh", L=4, V=256, S=128, D=256, H=4, F=1024, B=16, NT=2400000, NV=120000, PLEN=16),
    "tiny": dict(src="gpt_tiny.msh", L=2, V=256, S=32, D=64, H=4, F=256, B=4, NT=20000, NV=4000, PLEN=8),
}
# The program's defaults (model.msh `train`), passed explicitly to every runner.
LR, WARMUP, WD, CLIP, SEED = 1e-3, 10, 0.1, 1.0, 0
RUNNERS = ["meshc:8", "meshc:1", "jax:8", "jax:1", "torch:1"]


# ------------------------------------------------------------------ data

def make_data(work, c):
    import prepare
    rng = np.random.default_rng(13)
    tokens = corpus(c["NT"] + c["NV"], rng)
    np.save(os.path.join(work, "train.npy"), tokens[:c["NT"]])
    np.save(os.path.join(work, "val.npy"), tokens[c["NT"]:])
    prompt = np.full((2, c["S"]), 32, np.int64)
    prompt[:, :c["PLEN"]] = tokens[:c["PLEN"], 0]
    np.save(os.path.join(work, "prompt.npy"), prompt)
    init = prepare.init_params(c, 0)
    prepare.write_safetensors(os.path.join(work, "init.safetensors"), init)
    np.savez(os.path.join(work, "init.npz"), **init)


def load_data(work):
    z = np.load(os.path.join(work, "init.npz"))
    init = {k: z[k] for k in z.files}
    return init, np.load(os.path.join(work, "train.npy")).reshape(-1)


def lr_at(step, warmup, total, peak, floor):
    import math
    if step < warmup:
        return peak * min((step + 1) / max(warmup, 1), 1.0)
    progress = min(max((step - warmup) / max(total - warmup, 1), 0.0), 1.0)
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def train_batch(tokens, step, B, S):
    n = len(tokens)
    starts = [((SEED * 1000003 + step * B + b) * 2654435761) % (n - S - 1) for b in range(B)]
    ids = np.stack([tokens[a:a + S] for a in starts])
    tg = np.stack([tokens[a + 1:a + 1 + S] for a in starts])
    return ids, tg


# ------------------------------------------------------------------ workers (own processes)

def worker_torch(work, steps, threads):
    import torch
    import gpt_torch
    if threads > 0:
        torch.set_num_threads(threads)
    init, tokens = load_data(work)
    p = {k: torch.tensor(v, dtype=torch.float32, requires_grad=True) for k, v in init.items()}
    B = json.load(open(os.path.join(work, "config.json")))["B"]
    S = p["0.wpe"].shape[0]
    opt = torch.optim.AdamW([{"params": [p[k] for k in gpt_torch.MATS], "weight_decay": WD},
                             {"params": [p[k] for k in gpt_torch.VECS], "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.999), eps=1e-8)
    losses, times = [], []
    for step in range(steps):
        t0 = time.perf_counter()
        ids, tg = (torch.from_numpy(a) for a in train_batch(tokens, step, B, S))
        opt.zero_grad()
        loss = gpt_torch.loss(p, ids, tg)
        loss.backward()
        losses.append(loss.item())
        torch.nn.utils.clip_grad_norm_(list(p.values()), CLIP)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, WARMUP, steps - 1, LR, LR * 0.1)
        opt.step()
        p["0.wte"].detach().sum().item()
        times.append(time.perf_counter() - t0)
    return dict(losses=losses, times=times, threads=torch.get_num_threads(), version=torch.__version__)


def worker_jax(work, steps, devices):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=%d" % devices).strip()
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    init, tokens = load_data(work)
    B = json.load(open(os.path.join(work, "config.json")))["B"]
    L, D, H, K = init["0.wq"].shape
    S = init["0.wpe"].shape[0]
    mats = ["0.wte", "0.wpe", "0.wq", "0.wk", "0.wv", "0.wo", "0.w1", "0.w2"]
    if devices == 8:
        mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
        spec = {"0.wte": P("model", "data"), "0.wpe": P(None, "data"),
                "0.wq": P(None, "data", "model"), "0.wk": P(None, "data", "model"),
                "0.wv": P(None, "data", "model"), "0.wo": P(None, "model", None, "data"),
                "0.w1": P(None, "data", "model"), "0.w2": P(None, "model", "data"),
                "1.b1": P(None, "model")}
        sh = lambda name: NamedSharding(mesh, spec.get(name, P()))  # noqa: E731
        batch_sh = NamedSharding(mesh, P("data", None))
        heads = NamedSharding(mesh, P("data", "model", None, None))      # [B, H, S, K]
        hidden = NamedSharding(mesh, P("data", None, "model"))           # [B, S, F]
        resid = NamedSharding(mesh, P("data", None, None))               # [B, S, D]
        con = jax.lax.with_sharding_constraint
    else:
        dev = jax.devices()[0]
        sh = lambda name: jax.sharding.SingleDeviceSharding(dev)  # noqa: E731
        batch_sh = sh(None)
        heads = hidden = resid = None
        con = lambda x, s: x  # noqa: E731

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        xc = x - mu
        var = (xc * xc).mean(-1, keepdims=True)
        return xc * jax.lax.rsqrt(var + 1e-5) * g + b

    causal = jnp.tril(jnp.ones((S, S), bool))

    def loss_fn(p, ids, tg):
        x = con(p["0.wte"][ids] + p["0.wpe"][:S], resid)
        for l in range(L):
            a = ln(x, p["1.ln1_g"][l], p["1.ln1_b"][l])
            q = con(jnp.einsum("bsd,dhk->bhsk", a, p["0.wq"][l]), heads)
            k = con(jnp.einsum("bsd,dhk->bhsk", a, p["0.wk"][l]), heads)
            v = con(jnp.einsum("bsd,dhk->bhsk", a, p["0.wv"][l]), heads)
            att = jnp.einsum("bhqk,bhsk->bhqs", q, k) / np.float32(np.sqrt(K))
            att = jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
            ctx = jnp.einsum("bhqs,bhsk->bhqk", att, v)
            x = con(x + jnp.einsum("bhsk,hkd->bsd", ctx, p["0.wo"][l]), resid)
            m = ln(x, p["1.ln2_g"][l], p["1.ln2_b"][l])
            hid = con(jax.nn.gelu(m @ p["0.w1"][l] + p["1.b1"][l], approximate=True), hidden)
            x = con(x + hid @ p["0.w2"][l] + p["1.b2"][l], resid)
        x = ln(x, p["1.lnf_g"], p["1.lnf_b"])
        z = x @ p["0.wte"].T
        lse = jax.nn.logsumexp(z, axis=-1)
        picked = jnp.take_along_axis(z, tg[..., None], axis=-1)[..., 0]
        return (lse - picked).mean()

    def step_fn(p, m, v, ids, tg, lr, bc1, bc2):
        loss, g = jax.value_and_grad(loss_fn)(p, ids, tg)
        norm = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree_util.tree_leaves(g)))
        coef = jnp.minimum(CLIP / (norm + 1e-6), 1.0)
        newp, newm, newv = {}, {}, {}
        for k in p:
            gk = g[k] * coef
            mk = 0.9 * m[k] + 0.1 * gk
            vk = 0.999 * v[k] + 0.001 * gk * gk
            pk = p[k] * (1 - lr * WD) if k in mats else p[k]
            newp[k] = pk - (lr / bc1) * mk / (jnp.sqrt(vk) / jnp.sqrt(bc2) + 1e-8)
            newm[k], newv[k] = mk, vk
        return loss, newp, newm, newv

    shard = {k: sh(k) for k in init}
    p = {k: jax.device_put(init[k], shard[k]) for k in init}
    m = {k: jax.device_put(np.zeros_like(init[k]), shard[k]) for k in init}
    v = {k: jax.device_put(np.zeros_like(init[k]), shard[k]) for k in init}
    rep = sh("scalar") if devices == 8 else sh(None)
    step = jax.jit(step_fn, donate_argnums=(0, 1, 2),
                   out_shardings=(rep, shard, shard, shard))
    losses, times = [], []
    for i in range(steps):
        t0 = time.perf_counter()
        ids, tg = train_batch(tokens, i, B, S)
        ids = jax.device_put(ids.astype(np.int32), batch_sh)
        tg = jax.device_put(tg.astype(np.int32), batch_sh)
        lr = lr_at(i, WARMUP, steps - 1, LR, LR * 0.1)
        loss, p, m, v = step(p, m, v, ids, tg, np.float32(lr), np.float32(1 - 0.9 ** (i + 1)),
                             np.float32(1 - 0.999 ** (i + 1)))
        jax.block_until_ready((loss, p))
        losses.append(float(loss))
        times.append(time.perf_counter() - t0)
    return dict(losses=losses, times=times, version=jax.__version__, devices=len(jax.devices()))


# ------------------------------------------------------------------ running

TIME = "/usr/bin/time"


def timed(cmd, rss_file):
    """cmd under GNU time writing the peak RSS (KiB) to rss_file. (Not ru_maxrss of our
    own child: Linux carries the forking process's high-water RSS across exec, so a child
    of this script would report at least this script's size.)"""
    if os.path.exists(TIME):
        return [TIME, "-f", "%M", "-o", rss_file] + cmd
    return cmd


def wait_rss(p, rss_file):
    """Waits for Popen p; -> peak RSS in MiB (GNU time's, else ru_maxrss, an upper bound)."""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    try:
        with open(rss_file) as f:
            return int(f.read().split()[-1]) / 1024.0
    except (OSError, ValueError, IndexError):
        return ru.ru_maxrss / 1024.0


def run_worker(python, kind, work, steps, devices, torch_threads=0):
    cmd = [python, os.path.abspath(__file__), "--worker", kind, "--work", work,
           "--steps", str(steps), "--devices", str(devices), "--torch-threads", str(torch_threads)]
    rss_file = os.path.join(work, "rss.txt")
    p = subprocess.Popen(timed(cmd, rss_file), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.stdout.read(), p.stderr.read()
    rss = wait_rss(p, rss_file)
    if p.returncode != 0:
        raise SystemExit("%s:%d failed (status %d): %s\n%s" % (kind, devices, p.returncode,
                                                               shlex.join(cmd), (out + err)[-3000:]))
    res = json.loads(out.strip().splitlines()[-1])
    res["rss_mib"] = rss
    return res


STEP_LINE = re.compile(r"^step (\d+) loss (\S+)$")


def run_meshc(exe, work, steps, c, trace=None):
    cmd = [exe, "--steps=%d" % steps, "--val-every=1000000", "--ckpt-every=1000000",
           "--val-batches=1", "--prompt-len=%d" % c["PLEN"], "--lr=%g" % LR, "--warmup=%d" % WARMUP,
           "--wd=%g" % WD, "--clip=%g" % CLIP, "--seed=%d" % SEED,
           "--ckpt=" + os.path.join(work, "ckpt_out.safetensors")]
    if trace:
        cmd.append("--trace=" + trace)
    rss_file = os.path.join(work, "rss.txt")
    p = subprocess.Popen(timed(cmd, rss_file), cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, bufsize=1)
    losses, stamps, lines = [], [], []
    for line in p.stdout:
        now = time.perf_counter()
        lines.append(line)
        mm = STEP_LINE.match(line.strip())
        if mm:
            losses.append(float(mm.group(2)))
            stamps.append(now)
    err = p.stderr.read()
    rss = wait_rss(p, rss_file)
    if p.returncode != 0 or len(losses) != steps:
        raise SystemExit("%s failed (status %d, %d step lines): %s\n%s%s" % (
            os.path.basename(exe), p.returncode, len(losses), shlex.join(cmd), "".join(lines)[-2000:], err[-2000:]))
    # times[i] = interval ending at step i's line (times[0]: start-up to the first line)
    times = [None] + [b - a for a, b in zip(stamps, stamps[1:])]
    return dict(losses=losses, times=times, rss_mib=rss)


def build(meshc, work, c, devices):
    exe = os.path.join(work, "%s_d%d" % (c["src"][:-4], devices))
    if os.path.exists(exe):
        return exe, 0.0
    cmd = [meshc, "build", os.path.join(ROOT, "examples", "gpt", c["src"]), "-o", exe]
    if devices == 1:
        cmd += ["--mesh", "Pod=data:1,model:1"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("meshc build failed: %s\n%s" % (shlex.join(cmd), (r.stdout + r.stderr)[-3000:]))
    return exe, time.perf_counter() - t0


def find_python(args, module):
    cands = ([args.jax_python] if module == "jax" and args.jax_python else []) + \
            ([VENV_PYTHON] if module == "jax" else [TORCH_PYTHON]) + [sys.executable]
    for py in cands:
        if py and os.path.exists(py) and subprocess.call(
                [py, "-c", "import %s, numpy" % module], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL) == 0:
            return py
    return None


# ------------------------------------------------------------------ the trace breakdown

def breakdown(trace, steps, warmup):
    """Per-step totals (ms) of the trace's event kinds (name, plus the einsum of a
    contraction), on device 0 and summed over all devices, between the starts of step
    `warmup` and of the last step. A step starts at its marker: the event kind occurring
    exactly `steps` times on device 0 (once per step, in the backward, so not in the
    final validation or generation), the longest such. None if there is none."""
    with open(trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    per_tid = defaultdict(list)
    for e in events:
        spec = (e.get("args") or {}).get("spec")
        kind = "%s %s" % (e["name"], spec) if spec else e["name"]
        per_tid[e.get("tid", 0)].append((kind, e["ts"] * 1e-6, e["dur"] * 1e-6))
    ev0 = sorted(per_tid[min(per_tid)], key=lambda x: x[1])
    # A marker: the kind whose count on device 0 is `steps` exactly (once per step, not
    # in the final validation / generation), the longest such.
    cnt, tot = defaultdict(int), defaultdict(float)
    for k, _, d in ev0:
        cnt[k] += 1
        tot[k] += d
    markers = [k for k in cnt if cnt[k] == steps]
    if not markers:
        return None
    marker = max(markers, key=lambda k: tot[k])
    starts = [t for k, t, _ in ev0 if k == marker]
    lo, hi = starts[warmup], starts[-1]
    nsteps = steps - 1 - warmup
    out = {"marker": marker, "steps": nsteps, "step_ms": (hi - lo) / nsteps * 1e3, "dev0": {}, "all": {}}
    for tid, evs in per_tid.items():
        for k, t, d in evs:
            if lo <= t < hi:
                out["all"][k] = out["all"].get(k, 0.0) + d / nsteps * 1e3
                if tid == min(per_tid):
                    out["dev0"][k] = out["dev0"].get(k, 0.0) + d / nsteps * 1e3
    out["devices"] = len(per_tid)
    return out


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--meshc", default=os.environ.get("MESHC", os.path.join(ROOT, "build", "meshc")))
    ap.add_argument("--config", nargs="+", default=["default"], choices=sorted(CONFIGS))
    ap.add_argument("--runners", nargs="+", default=RUNNERS, choices=RUNNERS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2, help="steps dropped from each run's timing")
    ap.add_argument("--check", type=int, default=3, help="steps whose losses must agree")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--breakdown", nargs="*", default=["meshc:8", "meshc:1"])
    ap.add_argument("--jax-python", default=None)
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="torch.set_num_threads for the PyTorch runner (0: torch's default)")
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        res = worker_torch(args.work, args.steps, args.torch_threads) if args.worker == "torch" else \
            worker_jax(args.work, args.steps, args.devices)
        print(json.dumps(res))
        return 0

    if args.smoke:
        args.config, args.repeat, args.steps, args.warmup, args.check = ["tiny"], 1, 3, 1, 3
        args.runners = ["meshc:8", "meshc:1", "torch:1"]
        args.breakdown = ["meshc:8"]   # the trace parsing too
    pythons = {"jax": find_python(args, "jax"), "torch": find_python(args, "torch")}
    runners = []
    for r in args.runners:
        kind = r.split(":")[0]
        if kind != "meshc" and pythons[kind] is None:
            print("note: %s not found, %s skipped" % (kind, r))
            continue
        runners.append(r)
    if not os.path.exists(args.meshc):
        print("meshc not found at %s" % args.meshc)
        return 1
    failures = []
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                          "loadavg_start": os.getloadavg()},
              "meshc": args.meshc, "steps": args.steps, "warmup": args.warmup,
              "repeat": args.repeat, "configs": {}}
    try:
        report["commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                          capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    for cname in args.config:
        c = CONFIGS[cname]
        work = os.path.join(args.work, cname) if args.work else tempfile.mkdtemp(prefix="meshc-gptbench-")
        os.makedirs(work, exist_ok=True)
        make_data(work, c)
        with open(os.path.join(work, "config.json"), "w") as f:
            json.dump(c, f)
        exes, builds = {}, {}
        for r in runners:
            if r.startswith("meshc"):
                d = int(r.split(":")[1])
                exes[r], builds[r] = build(args.meshc, work, c, d)
        runs = defaultdict(list)
        for rnd in range(args.repeat):
            order = runners if rnd % 2 == 0 else runners[::-1]
            for r in order:
                kind, d = r.split(":")
                t0 = time.perf_counter()
                if kind == "meshc":
                    res = run_meshc(exes[r], work, args.steps, c)
                else:
                    res = run_worker(pythons[kind], kind, work, args.steps, int(d), args.torch_threads)
                res["wall_s"] = time.perf_counter() - t0
                res["step_ms"] = statistics.median(res["times"][args.warmup:]) * 1e3
                runs[r].append(res)
                print("[%s round %d] %-8s %8.1f ms/step (median of %d), peak RSS %7.1f MiB, losses %s" % (
                    cname, rnd, r, res["step_ms"], len(res["times"][args.warmup:]), res["rss_mib"],
                    " ".join("%.6f" % x for x in res["losses"][:args.check])), flush=True)
        # correctness
        ref_name = "torch:1" if "torch:1" in runs else runners[0]
        ref = runs[ref_name][0]["losses"][:args.check]
        worst = 0.0
        for r, rs in runs.items():
            for res in rs:
                for i, (a, b) in enumerate(zip(res["losses"][:args.check], ref)):
                    rel = abs(a - b) / abs(b)
                    worst = max(worst, rel)
                    if not rel <= args.tol:
                        failures.append("%s %s step %d: loss %.7f, %s %.7f (relative %.2g)" % (
                            cname, r, i, a, ref_name, b, rel))
        summary = {}
        for r, rs in runs.items():
            meds = [x["step_ms"] for x in rs]
            summary[r] = {"best_ms": min(meds), "median_ms": statistics.median(meds),
                          "runs_ms": meds, "peak_rss_mib": max(x["rss_mib"] for x in rs),
                          "losses": rs[0]["losses"][:args.check],
                          "extra": {k: v for k, v in rs[0].items() if k in ("threads", "version", "devices")}}
            if r in builds:
                summary[r]["build_s"] = builds[r]
        ratios = {}
        for d in ("8", "1"):
            a, b = summary.get("meshc:" + d), summary.get("jax:" + d)
            if a and b:
                ratios["meshc/jax:" + d] = {"best": a["best_ms"] / b["best_ms"], "median": a["median_ms"] / b["median_ms"]}
            t = summary.get("torch:1")
            if a and t:
                ratios["meshc:%s/torch:1" % d] = {"best": a["best_ms"] / t["best_ms"], "median": a["median_ms"] / t["median_ms"]}
        print("\n%s: ms per step (best run's median / median over %d runs), peak RSS; losses agree to %.2g relative (%s)"
              % (cname, args.repeat, worst, ref_name))
        print("| runner | best ms | median ms | peak RSS MiB | losses (first %d steps) |" % args.check)
        print("|---|---:|---:|---:|---|")
        for r in runners:
            s = summary[r]
            print("| %s | %.1f | %.1f | %.0f | %s |" % (r, s["best_ms"], s["median_ms"], s["peak_rss_mib"],
                                                       " ".join("%.6f" % x for x in s["losses"])))
        for k, v in ratios.items():
            print("%s: %.2f (best) %.2f (median)" % (k, v["best"], v["median"]))
        bds = {}
        for r in args.breakdown or []:
            if r not in exes:
                continue
            tr = os.path.join(work, "trace_%s.json" % r.replace(":", "_"))
            run_meshc(exes[r], work, args.steps, c, trace=tr)
            bd = breakdown(tr, args.steps, args.warmup)
            if bd is None:
                failures.append("%s %s: no per-step marker event in the trace" % (cname, r))
                continue
            bds[r] = {"marker": bd["marker"], "step_ms_traced": bd["step_ms"], "devices": bd["devices"],
                      "dev0_top": sorted(bd["dev0"].items(), key=lambda kv: -kv[1])[:25],
                      "all_devices_top": sorted(bd["all"].items(), key=lambda kv: -kv[1])[:25]}
            print("\n%s %s breakdown (traced run, %.1f ms/step; marker %s), ms per step on device 0 "
                  "[summed over %d devices]:" % (cname, r, bd["step_ms"], bd["marker"], bd["devices"]))
            covered = sum(bd["dev0"].values())
            for k, ms in sorted(bd["dev0"].items(), key=lambda kv: -kv[1])[:20]:
                print("  %8.2f ms %5.1f%%  [%8.2f]  %s" % (ms, 100 * ms / bd["step_ms"], bd["all"].get(k, 0.0), k))
            print("  %8.2f ms %5.1f%%  untraced on device 0" % (bd["step_ms"] - covered,
                                                              100 * (bd["step_ms"] - covered) / bd["step_ms"]))
        report["configs"][cname] = {"sizes": c, "summary": summary, "ratios": ratios,
                                    "worst_loss_rel": worst, "loss_reference": ref_name, "breakdown": bds,
                                    "runs": {r: [{"step_ms": x["step_ms"], "times": x["times"],
                                                  "rss_mib": x["rss_mib"], "wall_s": x["wall_s"]} for x in rs]
                                             for r, rs in runs.items()}}
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    report["machine"]["loadavg_end"] = os.getloadavg()
    report["pythons"] = pythons
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
