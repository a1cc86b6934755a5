#!/usr/bin/env python3
"""Writes Mesh programs at the compiler's limits into DIR, as fuzzer seeds.

Each is small enough for the fuzzer's -max_len (4 KiB) and sits at or just past a limit
the checker enforces with a diagnostic: call chains near the depth limit, meshes with
15 and 16 axes, long names (the "did you mean" suggestions), deep nesting, huge sizes
and device counts, many `where` clauses. tools/test.sh runs the fuzzer from these, the
random-program corpus and tests/fuzz/corpus.

    python3 tests/fuzz/limit_inputs.py DIR
"""
import os
import sys


def call_chain(n):
    fns = ["fn g0(x: f32) -> f32 { x }"]
    fns += ["fn g%d(x: f32) -> f32 { g%d(x) }" % (i, i - 1) for i in range(1, n)]
    return "\n".join(fns) + "\nfn main() { print(g%d(1.0)); }\n" % (n - 1)


def mesh_axes(n):
    axes = ", ".join("a%d: 1" % i for i in range(n))
    return "mesh M = [%s];\nfn main() { let x: Tensor f32 [4] on M = zeros([4]); print(x); }\n" % axes


def long_name(n):
    name = "v" + "x" * n
    return "fn main() {\n    let %s = 1.0;\n    print(%sy);\n}\n" % (name, name)


def nesting(n):
    return "fn main() { print(%s1.0%s); }\n" % ("(" * n, ")" * n)


def huge_sizes():
    return ("mesh M = [a: 4294967296, b: 4294967296, c: 2];\n"
            "fn main() { let x: Tensor f32 [9223372036854775807, 2] on M = zeros([9223372036854775807, 2]); print(x); }\n")


def many_where(n):
    clauses = ", ".join("N %% %d == 0" % (i + 2) for i in range(n))
    return ("fn f(x: Tensor f32 [N]) -> Tensor f32 [N] where %s { x }\n"
            "fn main() { print(f(zeros([6]))); }\n" % clauses)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    programs = {
        "call_chain_60.msh": call_chain(60),
        "mesh_15_axes.msh": mesh_axes(15),
        "mesh_16_axes.msh": mesh_axes(16),
        "long_name_1900.msh": long_name(1900),
        "nesting_300.msh": nesting(300),
        "huge_sizes.msh": huge_sizes(),
        "many_where_40.msh": many_where(40),
    }
    for name, text in programs.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
    print("wrote %d limit programs to %s" % (len(programs), out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
