#!/usr/bin/env python3
"""The GIR text reads back as the module it was printed from, and `meshc opt` runs the same
passes as the driver (docs/cli.md, "The pass list"). For every program under examples/ and
tests/e2e/ that checks:

  1. `opt` of `check --emit=gir-checked` prints the same text (read, verify, print);
  2. `opt --pass=autodiff,combine-collectives` of it prints what `check --emit=gir` prints;
  3. `opt` of `--emit=gir` prints the same text;
  4. `opt --pass=partition` of `--emit=gir` prints what `build --emit=local` prints.

The references are the driver's own outputs for the same program, from the source: the
text form has to carry everything the later passes read.

    python3 tests/conformance/gir_roundtrip.py --meshc build/meshc [-j N]
"""
import argparse
import concurrent.futures
import difflib
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=600)


def first_diff(a, b):
    d = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "expected", "got", lineterm="", n=1))
    return "\n".join(d[:20])


def check_program(meshc, path):
    """A list of failures (empty: it passed), or None when the program does not check."""
    checked = run([meshc, "check", "--emit=gir-checked", str(path)])
    if checked.returncode != 0 or not checked.stdout.strip():
        return None
    derived = run([meshc, "check", "--emit=gir", str(path)])
    if derived.returncode != 0:
        return None
    fails = []

    def opt(text, passes, want, what):
        cmd = [meshc, "opt", "-"]
        if passes:
            cmd.append("--pass=" + passes)
        got = run(cmd, stdin=text)
        if got.returncode != 0:
            fails.append(f"{path}: {what}: meshc opt exited {got.returncode}:\n{got.stderr[-2000:]}")
        elif got.stdout != want:
            fails.append(f"{path}: {what}: the output differs:\n{first_diff(want, got.stdout)}")

    opt(checked.stdout, "", checked.stdout, "gir-checked read back")
    opt(checked.stdout, "autodiff,combine-collectives", derived.stdout, "autodiff and combine-collectives on gir-checked")
    opt(derived.stdout, "", derived.stdout, "gir read back")
    local = run([meshc, "build", "--emit=local", str(path)])
    if local.returncode == 0:
        opt(derived.stdout, "partition", local.stdout, "partition of gir")
    return fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", default=str(ROOT / "build" / "meshc"))
    ap.add_argument("-j", type=int, default=2)
    args = ap.parse_args()
    programs = sorted(ROOT.glob("examples/**/*.msh")) + sorted(ROOT.glob("tests/e2e/**/*.msh"))
    meshc = os.path.abspath(args.meshc)
    failures, checked = [], 0
    # Relative paths, as a user types them: the printed positions name the file.
    os.chdir(ROOT)
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.j) as pool:
        for path, result in zip(programs, pool.map(lambda p: check_program(meshc, p.relative_to(ROOT)), programs)):
            if result is None:
                continue
            checked += 1
            failures += result
    for f in failures:
        print("FAIL", f)
    if checked < 40:
        print(f"FAIL: only {checked} programs checked; expected the examples and the end-to-end programs")
        return 1
    print(f"{checked} programs: GIR read back and passes rerun, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
