#!/usr/bin/env python3
"""Communication of training steps, three ways, checked against each other.

For each program in tests/e2e/comm/ (data parallel SGD, ZeRO-3, a 3-layer Megatron MLP
with data parallelism):
  1. the analytic communication of one training step, computed here from the shapes
     (what a minimal plan sends: DP one all_reduce of the gradients, ZeRO-3 a forward
     all_gather and a backward reduce_scatter per parameter, Megatron one forward
     all_reduce over `model` per layer and one backward per layer but the first; at most
     one scalar all_reduce for the loss, which may travel with the gradients);
  2. what `meshc explain --format=json` lists for the step (`value_and_grad(loss)`), and
     its program totals (every instance times its runs per run of main);
  3. what a `--trace` of device 0 records when the program runs: the number of
     collectives and their buffer bytes must equal explain's program totals.
The program also runs with every mesh axis rebound to 1, and prints the same loss.

    python3 tests/e2e/comm_counts.py --meshc build/meshc [--work DIR]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
F32 = 4
COLLECTIVES = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def step_collectives(doc):
    fns = [f for f in doc["functions"] if f["name"] == "loss" and f["derived"] == "value_and_grad"]
    assert len(fns) == 1, f"one value_and_grad(loss) instance, found {len(fns)}"
    out = []
    for c in fns[0]["collectives"]:
        out.append((c["kind"], tuple(c["axes"]), c["bytes"], c["pass"]))
    return sorted(out)


def expected_dp():
    # Mesh [data: 4]; w1 [16, 32], w2 [32, 8] replicated: every gradient and the loss in
    # one all_reduce over data.
    grads = (16 * 32 + 32 * 8) * F32
    return sorted([("all_reduce", ("data",), grads + F32, "backward")])


def expected_zero3():
    # Mesh [data: 4]; w1 [16, 32] and w2 [32, 8] split over data: gathered whole in the
    # forward pass, their gradients reduce-scattered back; the loss summed once.
    out = []
    for shape in ((16, 32), (32, 8)):
        full = shape[0] * shape[1] * F32
        out.append(("all_gather", ("data",), full, "forward"))
        out.append(("reduce_scatter", ("data",), full, "backward"))
    out.append(("all_reduce", ("data",), F32, "forward"))
    return sorted(out)


def expected_megatron():
    # Mesh [data: 2, model: 2]; batch 16 over data, D 8, H 16 over model, 3 layers.
    layers, b, d, h, data, model = 3, 16, 8, 16, 2, 2
    act = (b // data) * d * F32
    out = [("all_reduce", ("model",), act, "forward")] * layers
    out += [("all_reduce", ("model",), act, "backward")] * (layers - 1)
    params = layers * 2 * (d * h // model) * F32
    out.append(("all_reduce", ("data",), params + F32, "backward"))
    return sorted(out)


PROGRAMS = [("dp_sgd", expected_dp), ("zero3_sgd", expected_zero3), ("megatron_dp", expected_megatron)]


def program_totals(doc):
    """Collectives and buffer bytes of one run of main, from explain's instances."""
    count = 0.0
    nbytes = 0.0
    for f in doc["functions"]:
        for c in f["collectives"]:
            count += f["runs"] * c["count"]
            nbytes += f["runs"] * c["count"] * c["bytes"]
    assert doc["program"]["exact"], "every loop bound is a constant here"
    assert abs(doc["program"]["collectives"] - count) < 1e-9, (doc["program"], count)
    return count, nbytes


def trace_totals(path):
    with open(path) as fh:
        t = json.load(fh)
    events = t["traceEvents"] if isinstance(t, dict) else t
    mine = [e for e in events if e.get("ph") == "X" and e.get("tid") == 0 and e.get("name") in COLLECTIVES]
    return len(mine), sum(e["args"]["bytes"] for e in mine)


def trace_sites(path):
    """The source positions (line, col) device 0's trace gives its collectives and
    contractions (`args.at`, file:line:col); every such event must carry one."""
    with open(path) as fh:
        t = json.load(fh)
    events = t["traceEvents"] if isinstance(t, dict) else t
    collectives, contractions = set(), set()
    for e in events:
        if e.get("ph") != "X" or e.get("tid") != 0 or e.get("name") not in COLLECTIVES | {"contract"}:
            continue
        at = e.get("args", {}).get("at", "")
        m = re.search(r"\.msh:(\d+):(\d+)$", at)
        assert m, f"trace event {e['name']} has no source location: {e.get('args')}"
        (contractions if e["name"] == "contract" else collectives).add((int(m.group(1)), int(m.group(2))))
    return collectives, contractions


def explain_sites(doc):
    """The positions of the collectives explain lists in the instances that run."""
    return {(c["line"], c["col"]) for f in doc["functions"] if f["runs"] > 0 for c in f["collectives"]}


def loss_of(output):
    m = re.search(r"loss\s+([-0-9.eE+]+)", output)
    assert m, output
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", required=True)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    meshc = os.path.abspath(args.meshc)
    work = args.work or tempfile.mkdtemp(prefix="comm-counts-")
    os.makedirs(work, exist_ok=True)
    failures = 0
    for name, expected in PROGRAMS:
        src = os.path.join(HERE, "comm", name + ".msh")
        try:
            doc = json.loads(run([meshc, "explain", "--format=json", src]))
            got = step_collectives(doc)
            want = expected()
            assert got == want, f"step communication\n  explain:  {got}\n  analytic: {want}"
            count, nbytes = program_totals(doc)
            exe = os.path.join(work, name)
            run([meshc, "build", src, "-o", exe])
            trace = os.path.join(work, name + ".trace.json")
            out = run([exe, f"--trace={trace}"], cwd=work)
            tcount, tbytes = trace_totals(trace)
            assert (tcount, tbytes) == (count, nbytes), \
                f"device 0's trace has {tcount} collectives of {tbytes} bytes; explain lists {count} of {nbytes}"
            # Each collective and contraction event says where in the source it is.
            tsites, csites = trace_sites(trace)
            assert tsites == explain_sites(doc), \
                f"the trace's collectives are at {sorted(tsites)}; explain's at {sorted(explain_sites(doc))}"
            assert csites, "the trace has contractions, each with its source position"
            # Each iteration of main's step loop is a "step" region of the trace.
            trips = re.search(r"^    for \w+ in (\d+)\.\.(\d+)", open(src).read(), re.M)
            with open(trace) as fh:
                t = json.load(fh)
            steps = [e for e in (t["traceEvents"] if isinstance(t, dict) else t)
                     if e.get("name") == "step" and e.get("tid") == 0 and e.get("ph") == "X"]
            assert trips and len(steps) == int(trips.group(2)) - int(trips.group(1)), \
                f"device 0's trace has {len(steps)} step regions for the loop {trips.group(0) if trips else None}"
            # The same source on one device: no collective runs, the loss agrees.
            meshes = re.findall(r"^mesh (\w+) = \[([^\]]*)\]", open(src).read(), re.M)
            rebind = []
            for mesh, axes in meshes:
                names = [a.split(":")[0].strip() for a in axes.split(",")]
                rebind += ["--mesh", mesh + "=" + ",".join(n + ":1" for n in names)]
            exe1 = exe + "-1"
            run([meshc, "build", src, "-o", exe1] + rebind)
            out1 = run([exe1], cwd=work)
            l, l1 = loss_of(out), loss_of(out1)
            assert abs(l - l1) <= 1e-4 * max(1.0, abs(l1)), f"loss {l} on the mesh, {l1} on one device"
            print(f"PASS   {name}: {len(got)} collectives per step ({sum(1 for g in got if g[3] == 'backward')} backward), "
                  f"{int(count)} per run of main = device 0's trace; loss {l} (one device {l1})")
        except AssertionError as e:
            failures += 1
            print(f"FAIL   {name}: {e}")
    print(f"comm counts: {len(PROGRAMS) - failures} of {len(PROGRAMS)} pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
