#!/usr/bin/env python3
"""JAX's side of `check_bench.py --build --jax PYTHON`: trace + lower + compile time of
the N-layer Megatron MLP that check_bench.py's generate() writes in Mesh.

Run with a Python that has jax (tests/bench/.venv, created only for benchmarks), one
fresh process per measurement, with XLA_FLAGS=--xla_force_host_platform_device_count=8
set before jax is imported (check_bench.py does all this):

    XLA_FLAGS=--xla_force_host_platform_device_count=8 \
        tests/bench/.venv/bin/python tests/bench/jax_build.py --layers 100

The same computation as the Mesh program: mesh [data: 2, model: 4] over 8 host CPU
devices; x_0 [B, D] sharded {0: data}; per layer w1 [D, H] {1: model} and w2 [H, D]
{0: model} drawn by random_normal (seeds 2i+1 and 2i+2) inside the program and scaled
by 0.05, h = relu(x @ w1), x' = h @ w2 constrained to {0: data} (so one all-reduce over
`model` per layer); the result is sum(x_N). With --weights args the weights are
arguments of the jitted function instead (laid out by in_shardings), the way a JAX
model usually takes its parameters: no random number generation in the program.

Prints one JSON line: trace, lower and compile seconds, their total, and the version.
The persistent compilation cache is off, so nothing is reused between processes.
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--h", type=int, default=256)
    ap.add_argument("--b", type=int, default=8)
    ap.add_argument("--weights", choices=["generated", "args"], default="generated")
    args = ap.parse_args()
    if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        raise SystemExit("set XLA_FLAGS=--xla_force_host_platform_device_count=8 before running")
    os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"

    t_import = time.perf_counter()
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_enable_compilation_cache", False)
    devices = jax.devices()
    if len(devices) < 8:
        raise SystemExit(f"need 8 host devices, got {len(devices)}")
    mesh = Mesh(np.array(devices[:8]).reshape(2, 4), ("data", "model"))
    import_s = time.perf_counter() - t_import

    n, d, h, b = args.layers, args.d, args.h, args.b
    X = NamedSharding(mesh, P("data", None))       # {0: data}
    W1 = NamedSharding(mesh, P(None, "model"))     # {1: model}
    W2 = NamedSharding(mesh, P("model", None))     # {0: model}
    REP = NamedSharding(mesh, P())
    c = jax.lax.with_sharding_constraint

    def layer(x, w1, w2):
        hid = jax.nn.relu(x @ w1)
        return c(hid @ w2, X)

    if args.weights == "generated":
        def f(x):
            for i in range(n):
                w1 = c(jax.random.normal(jax.random.key(2 * i + 1), (d, h), jnp.float32) * 0.05, W1)
                w2 = c(jax.random.normal(jax.random.key(2 * i + 2), (h, d), jnp.float32) * 0.05, W2)
                x = layer(x, w1, w2)
            return jnp.sum(x)
        jitted = jax.jit(f, in_shardings=(X,), out_shardings=REP)
        specs = (jax.ShapeDtypeStruct((b, d), jnp.float32, sharding=X),)
    else:
        def f(x, w1s, w2s):
            for i in range(n):
                x = layer(x, w1s[i], w2s[i])
            return jnp.sum(x)
        jitted = jax.jit(f, in_shardings=(X, [W1] * n, [W2] * n), out_shardings=REP)
        specs = (jax.ShapeDtypeStruct((b, d), jnp.float32, sharding=X),
                 [jax.ShapeDtypeStruct((d, h), jnp.float32, sharding=W1)] * n,
                 [jax.ShapeDtypeStruct((h, d), jnp.float32, sharding=W2)] * n)

    t0 = time.perf_counter()
    if hasattr(jitted, "trace"):
        traced = jitted.trace(*specs)
        t1 = time.perf_counter()
        lowered = traced.lower()
    else:  # older jax: no separate trace stage
        t1 = t0
        lowered = jitted.lower(*specs)
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    del compiled
    print(json.dumps(dict(layers=n, weights=args.weights, trace_s=t1 - t0, lower_s=t2 - t1,
                          compile_s=t3 - t2, total_s=t3 - t0, import_s=import_s,
                          jax=jax.__version__, devices=len(devices))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
