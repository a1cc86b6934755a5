#!/usr/bin/env python3
"""Checks a .msh file's diagnostics against annotations in the file itself.

Annotations (in comments):
    // expected-error@+1 E0201 {{unknown name `foo`}}
    // expected-error E0104 {{expected `;`}}          (same line)
    // expected-error@-2:5 E0104 {{...}}              (line offset and column)
    // expected-note@+1 {{first definition}}          (a note of some diagnostic)
    // expected-warning@+1 W0001 {{splits nothing}}    (a warning: W codes)
The code is optional; the text in {{ }} must be a substring of the message. Every
error and warning must be expected and every expectation met, else exit 1 with a report.
Usage: verify_diagnostics.py --meshc PATH FILE [-- extra meshc args]
"""
import argparse
import json
import re
import subprocess
import sys

ANNOT = re.compile(
    r"expected-(error|warning|note)(?:@([+-]\d+)(?::(\d+))?)?\s*([EW]\d{4})?\s*\{\{(.*?)\}\}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", required=True)
    ap.add_argument("file")
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args()

    expectations = []
    with open(args.file, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            for m in ANNOT.finditer(line):
                kind, offset, col, code, text = m.groups()
                target = lineno + (int(offset) if offset else 0)
                expectations.append(dict(kind=kind, line=target, col=int(col) if col else None,
                                         code=code, text=text, src=lineno))

    cmd = [args.meshc, "check", "--error-format=json", *args.extra, args.file]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        print(f"meshc exited {proc.returncode} (expected 0 or 1)\n{proc.stderr}")
        return 1
    actual = []
    for raw in proc.stdout.splitlines():
        if not raw.startswith('{"severity"'):
            continue  # other output on stdout (--emit=gir)
        d = json.loads(raw)
        actual.append(dict(kind=d["severity"], line=d["line"], col=d["col"], code=d["code"],
                           message=d["message"], file=d["file"]))
        for n in d["notes"]:
            # A note without a location belongs to its diagnostic's line.
            line = n["line"] if n["line"] is not None else d["line"]
            actual.append(dict(kind="note", line=line, col=n["col"], code=None,
                               message=n["message"], file=n["file"]))

    failures = []
    unmatched = list(range(len(actual)))
    for e in expectations:
        found = None
        for i in unmatched:
            a = actual[i]
            if a["kind"] != e["kind"] or a["line"] != e["line"]:
                continue
            if e["col"] is not None and a["col"] != e["col"]:
                continue
            if e["code"] and a["code"] != e["code"]:
                continue
            if e["text"] not in a["message"]:
                continue
            found = i
            break
        if found is None:
            failures.append(f"line {e['src']}: expected {e['kind']} {e['code'] or ''} at line "
                            f"{e['line']} {{{{{e['text']}}}}} was not reported")
        else:
            unmatched.remove(found)
    for i in unmatched:
        a = actual[i]
        if a["kind"] == "note":
            continue  # notes are checked only when expected
        failures.append(f"unexpected {a['kind']} {a['code']} at {a['line']}:{a['col']}: {a['message']}")
    if proc.returncode == 1 and not any(a["kind"] == "error" for a in actual):
        failures.append("meshc exited 1 without reporting an error")
    if proc.returncode == 0 and any(a["kind"] == "error" for a in actual):
        failures.append("meshc exited 0 despite errors")
    if failures:
        print("\n".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
