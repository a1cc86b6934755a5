#!/usr/bin/env python3
"""The inferred effect of `main` (`meshc explain --effects`: bytes each device sends over
each axis, found by walking the calls) equals the program's list of collectives as
`meshc explain --format=json` counts them (each function instance's collectives, times
its run count per run of `main`, summed per axis): two computations of one figure, one
through the call graph, one through the run counts. Checked on every example and
end-to-end program whose run counts are exact (constant loop bounds). This is the issue's
"the effect of the GPT's training step equals its list of collectives, byte for byte"
for every program at once. The GPT's loop runs a number of steps given at run time, so
there each derived function (`value_and_grad(loss)`: the step's forward and backward,
calls inlined) is compared with its own list of collectives instead.

    python3 tests/conformance/effects_vs_explain.py --meshc build/meshc
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_json(meshc, args):
    p = subprocess.run([meshc, *args], capture_output=True, text=True, timeout=600, cwd=ROOT)
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", default=str(ROOT / "build" / "meshc"))
    args = ap.parse_args()
    meshc = os.path.abspath(args.meshc)
    programs = sorted(ROOT.glob("examples/**/*.msh")) + sorted(ROOT.glob("tests/e2e/*.msh"))
    failures, compared, instances, gpt_steps = [], 0, 0, 0
    for path in programs:
        rel = str(path.relative_to(ROOT))
        explain = run_json(meshc, ["explain", "--format=json", rel])
        effects = run_json(meshc, ["explain", "--effects", "--format=json", rel])
        if not explain or not effects:
            continue
        by_label = {}
        for e in effects["effects"]:
            by_label.setdefault(e["function"], []).append(e)
        # A derived function (the training step's forward and backward) inlines its
        # calls: its effect is its own list of collectives, byte for byte.
        for f in explain["functions"]:
            if not f.get("derived"):
                continue
            cands = by_label.get(f["label"], [])
            if len(cands) != 1 or not cands[0]["exact"]:
                continue
            own = {}
            for c in f["collectives"]:
                for axis in c["axes"]:
                    own[axis] = own.get(axis, 0.0) + c["count"] * c["sent_bytes"]
            own = {x: y for x, y in own.items() if y > 0}
            got = cands[0]["bytes_per_axis"]
            instances += 1
            if "gpt" in rel:
                gpt_steps += 1
            if set(got) != set(own) or not all(close(got[x], own[x]) for x in got):
                failures.append(f"{rel}: {f['label']}'s effect {got}, its collectives {own}")
        # The whole program: main's effect against the run-count sum.
        mains = by_label.get("main", [])
        if len(mains) != 1 or not mains[0]["exact"] or not all(f["runs_exact"] for f in explain["functions"]):
            continue
        total = {}
        for f in explain["functions"]:
            for c in f["collectives"]:
                for axis in c["axes"]:
                    total[axis] = total.get(axis, 0.0) + f["runs"] * c["count"] * c["sent_bytes"]
        total = {a: b for a, b in total.items() if b > 0}
        got = mains[0]["bytes_per_axis"]
        compared += 1
        if set(got) != set(total) or not all(close(got[a], total[a]) for a in got):
            failures.append(f"{rel}: main's effect {got}, explain's collectives per run {total}")
    for f in failures:
        print("FAIL", f)
    if compared < 30 or gpt_steps < 3:
        print(f"FAIL: only {compared} programs and {gpt_steps} GPT training steps compared")
        return 1
    print(f"{compared} programs: main's effect equals explain's collectives per run of main; "
          f"{instances} derived functions ({gpt_steps} GPT training steps): effect = own collectives; "
          f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
