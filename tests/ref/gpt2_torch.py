#!/usr/bin/python3
"""PyTorch reference for ztrain's GPT-2 (llm.c layout).

Usage:
    gpt2_torch.py CKPT TOKENS OUT [--steps 10] [--lr 1e-3] [--beta1 0.9]
                  [--beta2 0.95] [--eps 1e-8] [--weight-decay 0.1]
                  [--dtype float64]

CKPT   llm.c fp32 checkpoint (256 x int32 header, then float32 parameters).
TOKENS int32 B, int32 T, B*T int32 inputs, B*T int32 targets (-1 = ignored).
OUT    float32 little-endian: loss0, every gradient of the first backward pass
       flattened in checkpoint order, then one loss per AdamW step.

The C++ tests compare their forward/backward/optimizer against this file, so
the model is written out op by op exactly as llm.c computes it, and the
parameters are kept as leaf tensors with llm.c's shapes: gradients then come
out in the checkpoint layout with no reshuffling.

This module is also imported by bench/torch_step.py (it only needs the model
and optimizer helpers), so importing it must have no side effects.
"""

import argparse
import math
import os
import sys
from collections import namedtuple

import numpy as np
import torch
import torch.nn.functional as F

CKPT_MAGIC = 20240326
CKPT_VERSION_FP32 = 3
HEADER_INTS = 256
LN_EPS = 1e-5  # llm.c's layernorm epsilon

GPT2Config = namedtuple("GPT2Config", "max_seq_len vocab_size num_layers num_heads channels padded_vocab_size")

# Parameter order of llm.c's checkpoint; gradients are written in this order too.
PARAM_NAMES = (
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
)

# Matrices (embeddings and linear weights) get weight decay; biases and
# layernorm parameters do not — the usual GPT-2 / llm.c split.
DECAYED_PARAMS = frozenset(("wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"))


def param_shapes(cfg):
    """Shapes of all parameters, in checkpoint order (llm.c's fill_in_parameter_sizes)."""
    maxT, L, C, Vp = cfg.max_seq_len, cfg.num_layers, cfg.channels, cfg.padded_vocab_size
    return {
        "wte": (Vp, C),
        "wpe": (maxT, C),
        "ln1w": (L, C),
        "ln1b": (L, C),
        "qkvw": (L, 3 * C, C),
        "qkvb": (L, 3 * C),
        "attprojw": (L, C, C),
        "attprojb": (L, C),
        "ln2w": (L, C),
        "ln2b": (L, C),
        "fcw": (L, 4 * C, C),
        "fcb": (L, 4 * C),
        "fcprojw": (L, C, 4 * C),
        "fcprojb": (L, C),
        "lnfw": (C,),
        "lnfb": (C,),
    }


def num_parameters(cfg):
    return sum(math.prod(s) for s in param_shapes(cfg).values())


def read_checkpoint(path):
    """Return (GPT2Config, {name: float32 ndarray}) from an llm.c fp32 checkpoint."""
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        sys.exit(f"error: cannot read checkpoint {path}: {e}")
    if len(raw) < HEADER_INTS * 4:
        sys.exit(f"error: {path}: {len(raw)} bytes, too short for the {HEADER_INTS * 4}-byte header")
    header = np.frombuffer(raw, dtype="<i4", count=HEADER_INTS)
    if header[0] != CKPT_MAGIC:
        sys.exit(f"error: {path}: bad magic {header[0]} (expected {CKPT_MAGIC})")
    if header[1] != CKPT_VERSION_FP32:
        sys.exit(f"error: {path}: checkpoint version {header[1]}; only version {CKPT_VERSION_FP32} (fp32) is supported")
    cfg = GPT2Config(*(int(v) for v in header[2:8]))
    if min(cfg) <= 0:
        sys.exit(f"error: {path}: non-positive dimension in header {cfg}")
    if cfg.channels % cfg.num_heads != 0:
        sys.exit(f"error: {path}: channels {cfg.channels} not divisible by num_heads {cfg.num_heads}")
    if cfg.padded_vocab_size < cfg.vocab_size:
        sys.exit(f"error: {path}: padded vocab {cfg.padded_vocab_size} < vocab {cfg.vocab_size}")
    shapes = param_shapes(cfg)
    n = num_parameters(cfg)
    expected = HEADER_INTS * 4 + 4 * n
    if len(raw) != expected:
        sys.exit(f"error: {path}: size {len(raw)} bytes, expected {expected} for {cfg} ({n} parameters)")
    flat = np.frombuffer(raw, dtype="<f4", offset=HEADER_INTS * 4)
    params, off = {}, 0
    for name in PARAM_NAMES:
        size = math.prod(shapes[name])
        params[name] = flat[off:off + size].reshape(shapes[name])
        off += size
    return cfg, params


def read_tokens(path, cfg):
    """Return (inputs, targets) as (B, T) int64 tensors, validated against cfg."""
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        sys.exit(f"error: cannot read tokens {path}: {e}")
    if len(raw) < 8:
        sys.exit(f"error: {path}: too short for the B, T header")
    B, T = (int(v) for v in np.frombuffer(raw, dtype="<i4", count=2))
    if B <= 0 or T <= 0:
        sys.exit(f"error: {path}: bad B={B} T={T}")
    if T > cfg.max_seq_len:
        sys.exit(f"error: {path}: T={T} exceeds the model's max_seq_len {cfg.max_seq_len}")
    expected = 8 + 2 * B * T * 4
    if len(raw) != expected:
        sys.exit(f"error: {path}: size {len(raw)} bytes, expected {expected} for B={B} T={T}")
    toks = np.frombuffer(raw, dtype="<i4", offset=8).reshape(2, B, T).astype(np.int64)
    inputs, targets = toks[0], toks[1]
    V = cfg.vocab_size
    if inputs.min() < 0 or inputs.max() >= V:
        sys.exit(f"error: {path}: input token out of [0, {V})")
    if targets.min() < -1 or targets.max() >= V:
        sys.exit(f"error: {path}: target out of [0, {V}) and not -1")
    if (targets != -1).sum() == 0:
        # The mean over zero targets is NaN; a test relying on it is a bug.
        sys.exit(f"error: {path}: every target is -1 (ignored)")
    return torch.from_numpy(inputs), torch.from_numpy(targets)


def make_leaf_params(np_params, dtype):
    """Fresh leaf tensors (requires_grad) from the checkpoint arrays, in checkpoint order."""
    return {name: torch.tensor(np_params[name], dtype=dtype).requires_grad_() for name in PARAM_NAMES}


def gpt2_logits(p, cfg, inputs):
    """llm.c's GPT-2 forward: returns logits (B, T, Vp) over the padded vocab."""
    B, T = inputs.shape
    L, NH, C = cfg.num_layers, cfg.num_heads, cfg.channels
    hs = C // NH

    # unbind (not p[...][l]) so each stacked (L, ...) leaf gets its gradient
    # from a single stack in backward instead of L full-size scatter-adds.
    per_layer = {name: p[name].unbind(0) for name in (
        "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
        "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb")}

    x = F.embedding(inputs, p["wte"]) + p["wpe"][:T]  # (B, T, C)
    causal = torch.ones(T, T, dtype=torch.bool).tril_()  # key j visible to query i iff j <= i
    scale = 1.0 / math.sqrt(hs)
    for l in range(L):
        w = {name: t[l] for name, t in per_layer.items()}

        # Attention block: F.linear(h, W, b) == h @ W.T + b with W in (out, in) layout.
        h = F.layer_norm(x, (C,), w["ln1w"], w["ln1b"], LN_EPS)
        qkv = F.linear(h, w["qkvw"], w["qkvb"])  # (B, T, 3C), q | k | v
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * scale  # (B, NH, T, T)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, w["attprojw"], w["attprojb"])

        # MLP block. approximate="tanh" is exactly llm.c's
        # 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))).
        h2 = F.layer_norm(x, (C,), w["ln2w"], w["ln2b"], LN_EPS)
        f = F.gelu(F.linear(h2, w["fcw"], w["fcb"]), approximate="tanh")
        x = x + F.linear(f, w["fcprojw"], w["fcprojb"])

    xf = F.layer_norm(x, (C,), p["lnfw"], p["lnfb"], LN_EPS)
    return F.linear(xf, p["wte"])  # weight-tied LM head: (B, T, Vp)


def gpt2_loss(p, cfg, inputs, targets):
    """Mean cross-entropy over non-ignored targets; padded vocab columns are excluded."""
    V = cfg.vocab_size
    logits = gpt2_logits(p, cfg, inputs)[..., :V]
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1)


def make_adamw(p, lr, betas, eps, weight_decay):
    """AdamW with weight decay only on DECAYED_PARAMS (llm.c's split)."""
    decay = [p[n] for n in PARAM_NAMES if n in DECAYED_PARAMS]
    no_decay = [p[n] for n in PARAM_NAMES if n not in DECAYED_PARAMS]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=lr, betas=betas, eps=eps)


def main():
    # Reproducible and bounded: the tests run this next to the C++ build.
    torch.manual_seed(0)
    torch.set_num_threads(min(2, os.cpu_count() or 1))

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ckpt")
    ap.add_argument("tokens")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    args = ap.parse_args()
    if args.steps < 0:
        sys.exit("error: --steps must be >= 0")
    dtype = getattr(torch, args.dtype)

    cfg, np_params = read_checkpoint(args.ckpt)
    inputs, targets = read_tokens(args.tokens, cfg)

    # 1) One forward/backward from the checkpoint weights.
    p = make_leaf_params(np_params, dtype)
    loss0 = gpt2_loss(p, cfg, inputs, targets)
    loss0.backward()
    grads = [p[n].grad.detach().to(torch.float32).reshape(-1) for n in PARAM_NAMES]

    # 2) AdamW steps on the same batch, restarting from the checkpoint weights
    #    so the step-1 loss equals loss0 and the trajectory is self-contained.
    p = make_leaf_params(np_params, dtype)
    opt = make_adamw(p, args.lr, (args.beta1, args.beta2), args.eps, args.weight_decay)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss = gpt2_loss(p, cfg, inputs, targets)
        losses.append(loss.item())
        loss.backward()
        opt.step()

    out = np.concatenate([
        np.array([loss0.item()], dtype=np.float32),
        torch.cat(grads).numpy(),
        np.array(losses, dtype=np.float32),
    ]).astype("<f4")
    try:
        out.tofile(args.out)
    except OSError as e:
        sys.exit(f"error: cannot write {args.out}: {e}")

    n = num_parameters(cfg)
    last = f" final_loss {losses[-1]:.9g}" if losses else ""
    print(f"loss0 {loss0.item():.9g} params {n} steps {args.steps}{last} dtype {args.dtype}")


if __name__ == "__main__":
    main()
