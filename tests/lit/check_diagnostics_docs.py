#!/usr/bin/env python3
"""Checks docs/diagnostics.md against the compiler: each `## CODE: title` section has
the title that src/support/diagnostic_codes.def gives the code (a code without a section
is reported by tests/conformance/check_diag_coverage.py), and each section's example
program (its ```mesh block) makes `meshc check example.msh` print exactly the section's
```text block (run in an empty folder, with MESHC_STDLIB=/opt/meshc/stdlib so that
paths in notes are the same everywhere). A section without an example must still show
its code in a ```text block.
Usage: check_diagnostics_docs.py --meshc PATH --root REPO"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def sections(text):
    """{code: (title, [(lang, body), ...])} from `## CODE: title` sections."""
    result = {}
    current = None
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^## ([EW]\d{4}): (.*)$", line)
        if m:
            current = m.group(1)
            result[current] = (m.group(2), [])
        elif line.startswith("## "):
            current = None
        elif line.startswith("```") and current:
            lang = line[3:].strip()
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            result[current][1].append((lang, "\n".join(body)))
        i += 1
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshc", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    table = open(os.path.join(args.root, "src/support/diagnostic_codes.def")).read()
    titles = dict(re.findall(r'^MESHC_DIAG\((\w+), \w+, "(.*)"\)', table, re.M))
    docs = sections(open(os.path.join(args.root, "docs/diagnostics.md"), encoding="utf-8").read())
    failures = []
    for code, title in titles.items():
        if code not in docs:
            continue  # check_diag_coverage.py reports codes without a section
        doc_title, blocks = docs[code]
        if doc_title != title:
            failures.append(f"{code}: the heading says `{doc_title}`, the table `{title}`")
        programs = [body for lang, body in blocks if lang == "mesh"]
        outputs = [body for lang, body in blocks if lang == "text"]
        if not outputs or f"[{code}]" not in outputs[0]:
            failures.append(f"{code}: no ```text block showing [{code}]")
            continue
        if not programs:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "example.msh"), "w", encoding="utf-8") as f:
                f.write(programs[0] + "\n")
            env = dict(os.environ, MESHC_STDLIB="/opt/meshc/stdlib")
            # An example whose first line is `// $ meshc check FLAGS example.msh` runs with
            # those flags (the checker's diagnostics need --emit=gir or --strict-comm).
            command = ["check", "example.msh"]
            first = programs[0].split("\n", 1)[0]
            m = re.match(r"^// \$ meshc (.+)$", first)
            if m:
                command = m.group(1).split()
            proc = subprocess.run([os.path.abspath(args.meshc), *command], cwd=tmp, env=env,
                                  capture_output=True, text=True)
        got = proc.stderr.rstrip("\n")
        if got != outputs[0]:
            failures.append(f"{code}: the example prints\n{got}\n--- but the docs show\n{outputs[0]}")
    for code in docs:
        if code not in titles:
            failures.append(f"{code}: documented, but not in diagnostic_codes.def")
    if failures:
        print("\n\n".join(failures))
        return 1
    print(f"docs/diagnostics.md: {len(docs)} codes documented, examples agree with meshc")
    return 0


if __name__ == "__main__":
    sys.exit(main())
