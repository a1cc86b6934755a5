"""Synthetic training text for the GPT tests and benchmark (tests/gpt/test_gpt_reference.py,
tests/bench/gpt/run_gpt_bench.py): no PyTorch needed."""
import numpy as np


def corpus(n, rng):
    """n bytes of text made of a small random vocabulary of words (learnable structure),
    as i64 token ids of shape [n, 1]."""
    words = [bytes(rng.choice(list(b"abcdefghijklmnopqrstuvwxyz"), size=rng.integers(1, 7)).tolist())
             for _ in range(40)] + [b"the", b"cat", b"sat", b"on", b"mat"]
    out = bytearray()
    while len(out) < n:
        w = words[rng.integers(len(words))] if rng.random() < 0.5 else words[-5 + (len(out) % 5)]
        out += w + (b".\n" if rng.random() < 0.1 else b" ")
    return np.frombuffer(bytes(out[:n]), np.uint8).astype(np.int64).reshape(-1, 1)
