#!/usr/bin/env python3
"""Writes a long Mesh program to standard output: LAYERS Megatron MLP layers written out
inline in `main` (as tests/bench/check_bench.py does), every third one a call of a
function instead, and a gelu in every other one. Large enough for `meshc build` to
compile it in parts (parallel_codegen.msh)."""
import sys

layers = int(sys.argv[1])
d, h, b = 64, 256, 8
x = f"Tensor f32 [{b}, {d}] on Pod with {{0: data}}"
out = ["mesh Pod = [data: 2, model: 4];", "",
       f"fn block(x: {x}, w1: Tensor f32 [{d}, {h}] on Pod with {{1: model}},",
       f"         w2: Tensor f32 [{h}, {d}] on Pod with {{0: model}}) -> {x} {{",
       "    relu(x @ w1) @ w2", "}", "",
       "fn main() {",
       f"    let x_0: {x} = random_normal(0, [{b}, {d}]);"]
for i in range(layers):
    out.append(f"    let w1_{i}: Tensor f32 [{d}, {h}] on Pod with {{1: model}} = random_normal({2 * i + 1}, [{d}, {h}]) * 0.125;")
    out.append(f"    let w2_{i}: Tensor f32 [{h}, {d}] on Pod with {{0: model}} = random_normal({2 * i + 2}, [{h}, {d}]) * 0.09;")
    if i % 3 == 2:
        out.append(f"    let x_{i + 1} = block(x_{i}, w1_{i}, w2_{i});")
    else:
        act = "gelu" if i % 2 else "relu"
        out.append(f"    let h_{i} = {act}(x_{i} @ w1_{i});")
        out.append(f"    let x_{i + 1}: {x} = h_{i} @ w2_{i};")
out.append(f"    print(\"sum\", sum(x_{layers}));")
out.append("}")
sys.stdout.write("\n".join(out) + "\n")
