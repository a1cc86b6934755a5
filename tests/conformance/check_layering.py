#!/usr/bin/env python3
"""Layering test: every `#include "folder/..."` in src/ and runtime/ must follow an allowed
arrow. Layers only point down (docs/architecture.md, "Folders"); an include that points up
or sideways, or from a folder not listed here, fails this test. Also: code generation
declares the runtime's functions only from runtime/include/meshrt.h (one ABI declaration).

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
    "pipeline": {"support", "syntax", "solver", "ir", "sema", "transform", "spmd"},
    "autopar": {"support", "syntax", "solver", "ir", "sema", "transform", "spmd", "pipeline"},
    "lsp": {"support", "syntax", "solver", "ir", "sema", "transform", "spmd", "pipeline", "autopar"},
    "driver": {"support", "syntax", "solver", "ir", "sema", "transform", "autopar", "spmd", "codegen", "pipeline",
               "lsp"},
}
SRC_FOLDERS = set(ALLOWED)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def runtime_abi(root):
    """The runtime's ABI has one declaration, runtime/include/meshrt.h: code generation
    declares every runtime function from it (MESHC_RUNTIME / MESHC_ABI_TYPE in
    src/codegen/runtime_abi.h), never with a signature of its own."""
    bad = []
    declared = set()
    calls = []
    header = (root / "runtime" / "include" / "meshrt.h").read_text()
    for path in sorted((root / "src" / "codegen").rglob("*")):
        if path.suffix not in (".h", ".cpp"):
            continue
        text = path.read_text(errors="replace")
        rel = path.relative_to(root)
        declared |= set(re.findall(r"MESHC_RUNTIME\((meshrt_\w+)\)", text))
        declared |= set(re.findall(r"MESHC_ABI_TYPE\(\s*\w+\s*,\s*(meshrt_\w+)\)", text))
        for m in re.finditer(r'getOrInsertFunction\(\s*"(meshrt_\w+)"\s*,\s*([^;]*)', text):
            if "MESHC_ABI_TYPE" not in m.group(2):
                bad.append(f"{rel}: declares {m.group(1)} with a signature of its own (use MESHC_ABI_TYPE: meshrt.h is the one declaration)")
        calls += [(rel, name) for name in re.findall(r'\bcall\(\s*"(meshrt_\w+)"', text)]
    for rel, name in calls:
        if name not in declared:
            bad.append(f"{rel}: calls {name}, which is not declared from meshrt.h (MESHC_RUNTIME)")
    for name in sorted(declared):
        if not re.search(r"\b%s\s*\(" % name, header):
            bad.append(f"src/codegen: {name} is not a function of runtime/include/meshrt.h")
    return bad


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
    bad += runtime_abi(root)
    for line in bad:
        print(line)
    print(f"layering: {checked} includes checked, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
