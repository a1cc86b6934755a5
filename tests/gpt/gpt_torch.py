"""The GPT of examples/gpt/model.msh in PyTorch (float64), written from the model's
description, not from the Mesh program: the reference of tests/gpt/test_gpt_reference.py
(and of a manual check of the default configuration, see that script's --config).

Parameters are a dict of tensors named as in the Mesh checkpoint: `0.wte` [V, D],
`0.wpe` [S, D], `0.wq` `0.wk` `0.wv` [L, D, H, K], `0.wo` [L, H, K, D], `0.w1` [L, D, F],
`0.w2` [L, F, D] (weight-decayed), `1.ln1_g` `1.ln1_b` `1.ln2_g` `1.ln2_b` `1.b2` [L, D],
`1.b1` [L, F], `1.lnf_g` `1.lnf_b` [D] (not decayed)."""
import math

import torch

MATS = ["0.wte", "0.wpe", "0.wq", "0.wk", "0.wv", "0.wo", "0.w1", "0.w2"]
VECS = ["1.ln1_g", "1.ln1_b", "1.ln2_g", "1.ln2_b", "1.b1", "1.b2", "1.lnf_g", "1.lnf_b"]


def layer_norm(x, g, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)


def logits(p, ids):
    """ids [B, S] (int64) -> logits [B, S, V]."""
    B, S = ids.shape
    L, D, H, K = p["0.wq"].shape
    x = p["0.wte"][ids] + p["0.wpe"][:S]
    causal = torch.tril(torch.ones(S, S, dtype=torch.bool))
    for l in range(L):
        a = layer_norm(x, p["1.ln1_g"][l], p["1.ln1_b"][l])
        q = torch.einsum("bsd,dhk->bhsk", a, p["0.wq"][l])
        k = torch.einsum("bsd,dhk->bhsk", a, p["0.wk"][l])
        v = torch.einsum("bsd,dhk->bhsk", a, p["0.wv"][l])
        att = (q @ k.transpose(-1, -2)) / math.sqrt(K)
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        ctx = att @ v                                             # [B, H, S, K]
        x = x + torch.einsum("bhsk,hkd->bsd", ctx, p["0.wo"][l])
        m = layer_norm(x, p["1.ln2_g"][l], p["1.ln2_b"][l])
        hid = torch.nn.functional.gelu(m @ p["0.w1"][l] + p["1.b1"][l], approximate="tanh")
        x = x + hid @ p["0.w2"][l] + p["1.b2"][l]
    x = layer_norm(x, p["1.lnf_g"], p["1.lnf_b"])
    return x @ p["0.wte"].T


def loss(p, ids, targets):
    z = logits(p, ids)
    return torch.nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), targets.reshape(-1))


def lr_at(step, warmup, total, peak, floor):
    """Linear warm-up to `peak` over `warmup` steps (step 0 has peak / warmup), then a
    half cosine from `peak` down to `floor` at step `total`."""
    if step < warmup:
        return peak * min((step + 1) / max(warmup, 1), 1.0)
    progress = min(max((step - warmup) / max(total - warmup, 1), 0.0), 1.0)
    return floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def train_starts(step, B, S, n, seed):
    """Window starts of a training step (the hash the example documents)."""
    return [((seed * 1000003 + step * B + b) * 2654435761) % (n - S - 1) for b in range(B)]


def val_starts(j, B, S, n, nbatches):
    stride = (n - S - 1) // (B * nbatches)
    return [(j * B + b) * stride for b in range(B)]


def batch(tokens, starts, S):
    ids = torch.stack([tokens[a:a + S] for a in starts])
    tg = torch.stack([tokens[a + 1:a + 1 + S] for a in starts])
    return ids, tg


def train(init, train_tokens, val_tokens, B, steps, seed=0, peak=3e-3, warmup=10, wd=0.1,
          clip=1.0, val_every=20, val_batches=2, dtype=torch.float64):
    """Returns (params, printed lines as [words and numbers]) of a run of the example."""
    p = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in init.items()}
    S = p["0.wpe"].shape[0]
    tr = torch.tensor(train_tokens.reshape(-1), dtype=torch.int64)
    va = torch.tensor(val_tokens.reshape(-1), dtype=torch.int64)
    opt = torch.optim.AdamW([{"params": [p[k] for k in MATS], "weight_decay": wd},
                             {"params": [p[k] for k in VECS], "weight_decay": 0.0}],
                            lr=peak, betas=(0.9, 0.999), eps=1e-8)
    lines = []
    for step in range(steps):
        ids, tg = batch(tr, train_starts(step, B, S, len(tr), seed), S)
        opt.zero_grad()
        l = loss(p, ids, tg)
        l.backward()
        lines.append(["step", step, "loss", l.item()])
        torch.nn.utils.clip_grad_norm_(list(p.values()), clip)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, warmup, steps - 1, peak, peak * 0.1)
        opt.step()
        if (step + 1) % val_every == 0 or step + 1 == steps:
            with torch.no_grad():
                vl = sum(loss(p, *batch(va, val_starts(j, B, S, len(va), val_batches), S)).item()
                         for j in range(val_batches)) / val_batches
            lines.append(["val", "step", step + 1, "loss", vl])
    return p, lines


def generate(p, prompt, n):
    """Greedy continuation of `prompt` (a list of ints) by n bytes, in a window of S."""
    S = p["0.wpe"].shape[0]
    ctx = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            ids = torch.tensor([ctx + [32] * (S - len(ctx))], dtype=torch.int64)
            z = logits(p, ids)[0, len(ctx) - 1]
            ctx.append(int(torch.argmax(z)))
    return ctx[len(prompt):]
