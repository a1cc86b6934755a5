#!/usr/bin/env python3
"""Layering test: every `#include "folder/..."` in src/ and runtime/ must follow an allowed
arrow. Layers only point down (docs/architecture.md, "Folders"); an include that points up
or sideways, or from a folder not listed here, fails this test.

    python3 tests/conformance/check_layering.py [--root DIR]
"""
import argparse
import pathlib
import re
import sys

# folder -> folders it may include (itself always allowed)
ALLOWED = {
    "support": set(),
    "syntax": {"support"},
    "solver": {"support"},
    "ir": {"support", "solver"},
    "sema": {"support", "syntax", "solver", "ir"},
    "transform": {"support", "solver", "ir"},
    "spmd": {"support", "ir"},
    "codegen": {"support", "ir", "spmd"},
    "autopar": {"support", "syntax", "solver", "ir", "sema", "transform"},
    "lsp": {"support", "syntax", "solver", "ir", "sema", "transform", "autopar"},
    "driver": {"support", "syntax", "solver", "ir", "sema", "transform", "autopar", "spmd", "codegen", "lsp"},
}
SRC_FOLDERS = set(ALLOWED)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[2]))
    root = pathlib.Path(ap.parse_args().root)
    bad = []
    checked = 0
    for path in sorted((root / "src").rglob("*")):
        if path.suffix not in (".h", ".cpp", ".def"):
            continue
        folder = path.relative_to(root / "src").parts[0]
        if folder not in ALLOWED:
            bad.append(f"{path.relative_to(root)}: folder src/{folder} has no entry in the allowed arrows")
            continue
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            target = inc.split("/")[0]
            if "/" not in inc or target not in SRC_FOLDERS:
                continue  # a header of the same folder by bare name, or a library
            checked += 1
            if target != folder and target not in ALLOWED[folder]:
                bad.append(f"{path.relative_to(root)}: includes \"{inc}\" ({folder} -> {target} is not an allowed arrow)")
    # The runtime is linked into every program: it includes nothing from src/.
    for path in sorted((root / "runtime").rglob("*")):
        if path.suffix not in (".h", ".cpp", ".cu", ".def"):
            continue
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            checked += 1
            if inc.split("/")[0] in SRC_FOLDERS:
                bad.append(f"{path.relative_to(root)}: includes \"{inc}\" (runtime/ includes nothing from src/)")
    for line in bad:
        print(line)
    print(f"layering: {checked} includes checked, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
