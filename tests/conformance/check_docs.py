#!/usr/bin/env python3
"""docs-links: the documentation stands alone and stays complete.

Checks that
  - every code of src/support/diagnostic_codes.def has a row in the index of
    docs/diagnostics.md that links to its section;
  - every relative link in docs/*.md and README.md resolves: the file exists and, for
    a `#anchor` into a Markdown file, a heading of that file has that anchor;
  - every built-in of src/sema/builtins.def has an entry in the reference of built-in
    functions of docs/language.md (a row whose first cell is the name in backticks);
  - no tracked file (except tests/fuzz/corpus) cites a design document that is not in
    the repository (the upper-case language and architecture drafts, or the shared folder beside it).
"""
import argparse
import os
import re
import subprocess
import sys

LINK = re.compile(r'(?<!!)\[[^\]]*\]\(([^)\s]+)\)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
FENCE = re.compile(r'^\s*(```|~~~)')


def anchor_of(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link keeps its text
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def anchors(path):
    seen = {}
    result = set()
    in_fence = False
    with open(path, encoding='utf-8') as f:
        for line in f:
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            m = HEADING.match(line)
            if not m:
                continue
            a = anchor_of(m.group(2))
            n = seen.get(a, 0)
            seen[a] = n + 1
            result.add(a if n == 0 else f'{a}-{n}')
    return result


def links(path):
    """(line number, target) of each Markdown link outside code blocks and spans."""
    in_fence = False
    with open(path, encoding='utf-8') as f:
        for no, line in enumerate(f, 1):
            if FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            line = re.sub(r'`[^`]*`', '', line)
            for m in LINK.finditer(line):
                yield no, m.group(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--root', required=True)
    root = os.path.abspath(ap.parse_args().root)
    errors = []
    rel = lambda p: os.path.relpath(p, root)

    # 1. The diagnostics index.
    codes_def = open(os.path.join(root, 'src/support/diagnostic_codes.def')).read()
    codes = re.findall(r'^MESHC_DIAG\((E\d{4}|W\d{4})\s*,', codes_def, re.M)
    diag_md = os.path.join(root, 'docs/diagnostics.md')
    text = open(diag_md, encoding='utf-8').read()
    m = re.search(r'^## Index\n(.*?)(?=^## )', text, re.M | re.S)
    index = m.group(1) if m else ''
    if not m:
        errors.append('docs/diagnostics.md: no "## Index" section')
    for code in codes:
        if not re.search(r'^\| \[' + code + r'\]\(#' + code.lower() + r'-', index, re.M):
            errors.append(f'docs/diagnostics.md: {code} is not in the index')

    # 2. Relative links in docs/*.md and README.md.
    docs = [os.path.join(root, 'README.md')]
    docs += sorted(os.path.join(root, 'docs', n) for n in os.listdir(os.path.join(root, 'docs'))
                   if n.endswith('.md'))
    anchor_cache = {}
    for doc in docs:
        for no, target in links(doc):
            if re.match(r'^[a-z][a-z0-9+.-]*:', target):  # http:, https:, mailto:
                continue
            file_part, _, frag = target.partition('#')
            dest = doc if not file_part else os.path.normpath(
                os.path.join(os.path.dirname(doc), file_part))
            where = f'{rel(doc)}:{no}: link `{target}`'
            if not dest.startswith(root + os.sep) and dest != root:
                errors.append(f'{where} leaves the repository')
                continue
            if not os.path.exists(dest):
                errors.append(f'{where}: {rel(dest)} does not exist')
                continue
            if frag and dest.endswith('.md'):
                if dest not in anchor_cache:
                    anchor_cache[dest] = anchors(dest)
                if frag not in anchor_cache[dest]:
                    errors.append(f'{where}: {rel(dest)} has no heading with anchor #{frag}')

    # 3. Every built-in documented in docs/language.md.
    builtins = re.findall(r'^MESHC_BUILTIN\((\w+),', open(
        os.path.join(root, 'src/sema/builtins.def')).read(), re.M)
    lang = open(os.path.join(root, 'docs/language.md'), encoding='utf-8').read()
    m = re.search(r'^## Built-in functions\n(.*?)(?=^## |\Z)', lang, re.M | re.S)
    if not m:
        errors.append('docs/language.md: no "## Built-in functions" section')
    else:
        for b in builtins:
            if not re.search(r'^\| `' + b + r'[`(]', m.group(1), re.M):
                errors.append(f'docs/language.md: built-in `{b}` has no row in "Built-in functions"')

    # 4. No tracked file points outside the repository.
    files = subprocess.run(['git', '-C', root, 'ls-files', '-z'], check=True,
                           capture_output=True).stdout.decode().split('\0')
    bad = re.compile(rb'LANGUAGE\.md|ARCHITECTURE\.md|\.\./shared')
    for name in files:
        if not name or name.startswith('tests/fuzz/corpus/'):
            continue
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            continue
        with open(path, 'rb') as f:
            for no, line in enumerate(f, 1):
                if bad.search(line):
                    errors.append(f'{name}:{no}: cites a document outside the repository')

    for e in errors:
        print(e)
    if errors:
        print(f'docs-links: {len(errors)} problems')
        return 1
    print(f'docs-links: {len(codes)} codes, {len(docs)} documents, {len(builtins)} built-ins: ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
