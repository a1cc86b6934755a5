#!/usr/bin/env python3
"""Grammar conformance: the reference recogniser (grammar/mesh.y + lexer.re) and the
hand-written parser (`meshc check --syntax-only`) must agree on accepting or rejecting
every .msh file in the repository (examples, stdlib, tests, fuzz corpus).

A file whose first line contains `conformance: skip` is left out (only for inputs that
test the hand-written parser's hostile-input limits, which the recogniser does not have).
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys

DIRS = ["examples", "stdlib", "tests"]


def collect(root):
    files = []
    for d in DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, d)):
            if "/Output" in dirpath:
                continue
            for n in names:
                if n.endswith(".msh") or "/fuzz/corpus" in dirpath:
                    files.append(os.path.join(dirpath, n))
    return sorted(files)


def skipped(path):
    with open(path, "rb") as f:
        return b"conformance: skip" in f.readline()


def verdict(cmd):
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    if p.returncode not in (0, 1):
        return "crash", p.returncode, p.stderr.decode(errors="replace")[-500:]
    return ("accept" if p.returncode == 0 else "reject"), p.returncode, ""


def check(path, meshc, recognizer):
    a = verdict([meshc, "check", "--syntax-only", "--error-format=json", path])
    b = verdict([recognizer, path])
    return path, a, b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", required=True)
    ap.add_argument("--recognizer", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    files = [f for f in collect(args.root) if not skipped(f)]
    disagreements = []
    accepted = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for path, a, b in pool.map(lambda f: check(f, args.meshc, args.recognizer), files):
            rel = os.path.relpath(path, args.root)
            if a[0] == "crash" or b[0] == "crash":
                disagreements.append(f"{rel}: a tool crashed: meshc={a} recognizer={b}")
            elif a[0] != b[0]:
                disagreements.append(f"{rel}: meshc {a[0]}s, the reference grammar {b[0]}s")
            elif a[0] == "accept":
                accepted += 1
    print(f"conformance: {len(files)} files, {accepted} accepted and {len(files) - accepted} "
          f"rejected by both, {len(disagreements)} disagreements")
    for d in disagreements:
        print("  " + d)
    if not files:
        print("conformance: no files found")
        return 1
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
