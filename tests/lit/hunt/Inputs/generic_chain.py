#!/usr/bin/env python3
"""generic_chain.py N: a chain of N generic functions, k0 calls k1 ... (each [N]-generic),
called from main."""
import sys

n = int(sys.argv[1])
for i in range(n - 1):
    print(f"fn k{i}(x: Tensor f32 [N]) -> Tensor f32 [N] {{ k{i + 1}(x) }}")
print(f"fn k{n - 1}(x: Tensor f32 [N]) -> Tensor f32 [N] {{ x }}")
print("fn main() { print(sum(k0(zeros([4])))); }")
