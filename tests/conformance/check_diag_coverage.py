#!/usr/bin/env python3
"""Fails when a diagnostic code in src/support/diagnostic_codes.def has no lit test
(an `expected-error ... E0xxx` annotation or a CHECK line naming it under tests/lit/)
or no entry in docs/diagnostics.md (a `## E0xxx` heading)."""
import argparse
import os
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    table = open(os.path.join(args.root, "src/support/diagnostic_codes.def")).read()
    codes = re.findall(r"^MESHC_DIAG\((\w+),", table, re.M)
    tested = set()
    for dirpath, _, names in os.walk(os.path.join(args.root, "tests/lit")):
        for n in names:
            if not n.endswith((".msh", ".gir")):
                continue
            text = open(os.path.join(dirpath, n), encoding="utf-8", errors="replace").read()
            tested.update(re.findall(r"expected-(?:error|warning)\S*\s+([EW]\d{4})", text))
            tested.update(re.findall(r"CHECK[-A-Z]*:.*?\b([EW]\d{4})\b", text))
            # FileCheck lines under any prefix (`// OVER: error[E0709]: ...`).
            tested.update(re.findall(r"^// [A-Z][A-Z0-9_]*(?:-[A-Z]+)?:.*?\b(?:error|warning)\[([EW]\d{4})\]", text, re.M))
    docs = open(os.path.join(args.root, "docs/diagnostics.md")).read()
    documented = set(re.findall(r"^##+\s+([EW]\d{4})", docs, re.M))
    missing_tests = [c for c in codes if c not in tested]
    missing_docs = [c for c in codes if c not in documented]
    print(f"diagnostic coverage: {len(codes)} codes, {len(codes) - len(missing_tests)} tested, "
          f"{len(codes) - len(missing_docs)} documented")
    if missing_tests:
        print("codes without a lit test: " + ", ".join(missing_tests))
    if missing_docs:
        print("codes without a docs/diagnostics.md entry: " + ", ".join(missing_docs))
    return 1 if missing_tests or missing_docs else 0


if __name__ == "__main__":
    sys.exit(main())
