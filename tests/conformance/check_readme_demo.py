#!/usr/bin/env python3
"""The README quotes what `tools/demo.sh` prints (the block after "What `tools/demo.sh`
prints ends with:"): that quote must be exactly the end of what tools/demo-run.sh
(the demo after its build) prints today.
Usage: check_readme_demo.py --root REPO --build BUILD_DIR"""
import argparse
import os
import subprocess
import sys
import tempfile


def quoted_block(readme):
    lines = readme.split("\n")
    start = next(i for i, l in enumerate(lines) if "prints ends with:" in l)
    block = []
    for line in lines[start + 1:]:
        if line.strip() == "" and block and not block[-1].strip() == "":
            block.append(line)
            continue
        if line.startswith("    "):
            block.append(line[4:])
        elif line.strip() == "":
            continue
        else:
            break
    while block and block[-1].strip() == "":
        block.pop()
    return block


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    args = ap.parse_args()
    want = quoted_block(open(os.path.join(args.root, "README.md"), encoding="utf-8").read())
    with tempfile.TemporaryDirectory() as work:
        proc = subprocess.run(["bash", os.path.join(args.root, "tools/demo-run.sh"), args.build, work],
                              capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAIL: tools/demo-run.sh exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return 1
    got = proc.stdout.rstrip("\n").split("\n")
    tail = got[-len(want):] if want else []
    if tail != want:
        print("FAIL: the README's quoted demo output differs from what tools/demo-run.sh prints")
        for i, (w, g) in enumerate(zip(want, tail)):
            if w != g:
                print(f"line {i + 1}:\n  README: {w}\n  demo:   {g}")
        if len(want) > len(got):
            print(f"the demo prints {len(got)} lines, the README quotes {len(want)}")
        return 1
    print(f"README: the {len(want)} quoted lines are what the demo prints")
    return 0


if __name__ == "__main__":
    sys.exit(main())
