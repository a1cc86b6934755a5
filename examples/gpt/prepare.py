#!/usr/bin/env python3
"""Prepares the data and the initial parameters of examples/gpt/gpt.msh.

Reads Debian's `fortunes` (the plain-text files of /usr/share/games/fortunes, not the
.dat/.u8 indexes; `apt-get install fortunes`, listed in tools/setup.sh), turns each
file's `%` separator lines into blank lines, splits every file 95/5 at a fortune
boundary (so validation text comes from every file), concatenates the parts in file
order as bytes and writes, into --out:

  train.npy, val.npy   the byte values as i64 [N, 1] (the program's token files; the
                       program's sizes are fixed, so the first N_TRAIN / N_VAL bytes)
  prompt.npy           i64 [2, S]: the prompt's bytes, then spaces, in both rows
  prompt_len.txt       the prompt's length in bytes
  init.safetensors     the initial parameters (GPT-2's initialisation: N(0, 0.02),
                       the projections into the residual stream N(0, 0.02 / sqrt(2 L)),
                       biases 0, layer-norm gains 1), names as the program loads them:
                       `0.wte` ... for the matrices, `1.ln1_g` ... for the vectors.

Usage: prepare.py --out DIR [--config default] [--seed N] [--fortunes DIR]
"""
import argparse
import json
import os
import sys

import numpy as np

# The sizes of each configuration: they must be those written in the .msh entry points.
CONFIGS = {
    #            L  V    S    D    H  F     B   N_TRAIN  N_VAL
    "default": dict(L=4, V=256, S=128, D=256, H=4, F=1024, B=16, NT=2400000, NV=120000),
}
PROMPT = b"The meaning of life is "


def read_corpus(folder):
    """(train bytes, val bytes) of the fortunes files in `folder`."""
    names = sorted(f for f in os.listdir(folder)
                   if "." not in f and os.path.isfile(os.path.join(folder, f)))
    if not names:
        sys.exit("prepare.py: no fortunes files in %s (apt-get install fortunes)" % folder)
    train, val = [], []
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            text = f.read()
        fortunes = [t.strip(b"\n") for t in text.replace(b"\r\n", b"\n").split(b"\n%\n")]
        fortunes = [t + b"\n\n" for t in fortunes if t]
        cut = int(round(len(fortunes) * 0.95))
        train.append(b"".join(fortunes[:cut]))
        val.append(b"".join(fortunes[cut:]))
    return b"".join(train), b"".join(val)


def write_safetensors(path, tensors):
    """A .safetensors file of f32 tensors (the format: an 8-byte little-endian header
    length, a JSON header of dtype / shape / data offsets, the raw bytes)."""
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def init_params(c, seed):
    """The initial parameters of configuration c, by name."""
    rng = np.random.default_rng(seed)
    L, V, S, D, H, F = c["L"], c["V"], c["S"], c["D"], c["H"], c["F"]
    K = D // H
    std, proj = 0.02, 0.02 / np.sqrt(2 * L)
    n = lambda shape, s: (rng.standard_normal(shape) * s).astype(np.float32)  # noqa: E731
    return {
        "0.wte": n((V, D), std), "0.wpe": n((S, D), std),
        "0.wq": n((L, D, H, K), std), "0.wk": n((L, D, H, K), std), "0.wv": n((L, D, H, K), std),
        "0.wo": n((L, H, K, D), proj),
        "0.w1": n((L, D, F), std), "0.w2": n((L, F, D), proj),
        "1.ln1_g": np.ones((L, D), np.float32), "1.ln1_b": np.zeros((L, D), np.float32),
        "1.ln2_g": np.ones((L, D), np.float32), "1.ln2_b": np.zeros((L, D), np.float32),
        "1.b1": np.zeros((L, F), np.float32), "1.b2": np.zeros((L, D), np.float32),
        "1.lnf_g": np.ones(D, np.float32), "1.lnf_b": np.zeros(D, np.float32),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default="default", choices=sorted(CONFIGS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fortunes", default="/usr/share/games/fortunes")
    args = ap.parse_args()
    c = CONFIGS[args.config]
    os.makedirs(args.out, exist_ok=True)
    train, val = read_corpus(args.fortunes)
    if len(train) < c["NT"] or len(val) < c["NV"]:
        sys.exit("prepare.py: %d train and %d validation bytes, the program needs %d and %d"
                 % (len(train), len(val), c["NT"], c["NV"]))
    tr = np.frombuffer(train[:c["NT"]], np.uint8).astype(np.int64).reshape(-1, 1)
    va = np.frombuffer(val[:c["NV"]], np.uint8).astype(np.int64).reshape(-1, 1)
    np.save(os.path.join(args.out, "train.npy"), tr)
    np.save(os.path.join(args.out, "val.npy"), va)
    prompt = np.full((2, c["S"]), ord(" "), np.int64)
    prompt[:, :len(PROMPT)] = np.frombuffer(PROMPT, np.uint8)
    np.save(os.path.join(args.out, "prompt.npy"), prompt)
    with open(os.path.join(args.out, "prompt_len.txt"), "w") as f:
        f.write("%d\n" % len(PROMPT))
    write_safetensors(os.path.join(args.out, "init.safetensors"), init_params(c, args.seed))
    print("prepare: %d train bytes (of %d), %d validation bytes (of %d), config %s, in %s"
          % (len(tr), len(train), len(va), len(val), args.config, args.out))


if __name__ == "__main__":
    main()
