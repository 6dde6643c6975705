#!/usr/bin/python3
"""PyTorch CPU yardstick for ztrain's training-step benchmark.

Usage:
    torch_step.py [--layers 12 --heads 12 --channels 768 --vocab 50257
                   --padded-vocab 50304 --batch 4 --seq 256 --steps 5
                   --warmup 1 --threads 2]

Times full float32 training steps (zero_grad, forward, backward, AdamW step)
of the same GPT-2 that tests/ref/gpt2_torch.py defines — the model code is
imported from there so the yardstick and the test reference cannot drift
apart. Prints one JSON line to stdout; torch version and BLAS build info go
to stderr so stdout stays machine-readable.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

# Share the model/optimizer definition with the test reference.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import gpt2_torch as ref  # noqa: E402


def gpt2_init(cfg):
    """GPT-2 init: N(0, 0.02) matrices, residual projections scaled by 1/sqrt(2L),
    zero biases, unit LN weights. Returns leaf tensors in checkpoint order."""
    L = cfg.num_layers
    std = 0.02
    resid_std = 0.02 / math.sqrt(2 * L)  # attprojw/fcprojw feed the residual stream
    p = {}
    for name, shape in ref.param_shapes(cfg).items():
        if name in ("attprojw", "fcprojw"):
            t = torch.empty(shape).normal_(0.0, resid_std)
        elif name in ref.DECAYED_PARAMS:  # wte, wpe, qkvw, fcw
            t = torch.empty(shape).normal_(0.0, std)
        elif name.startswith("ln") and name.endswith("w"):
            t = torch.ones(shape)
        else:  # biases and LN biases
            t = torch.zeros(shape)
        p[name] = t
    # Padded vocab rows are never a target or input; keep them zero as llm.c does.
    p["wte"][cfg.vocab_size:].zero_()
    return {n: p[n].requires_grad_() for n in ref.PARAM_NAMES}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--channels", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--padded-vocab", type=int, default=50304)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--max-seq", type=int, default=1024, help="rows of wpe, as in step_gpt2 (max(seq, 1024))")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.channels % args.heads != 0:
        sys.exit("error: --channels must be divisible by --heads")
    if args.padded_vocab < args.vocab:
        sys.exit("error: --padded-vocab must be >= --vocab")
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        sys.exit("error: need --steps >= 1, --warmup >= 0, --threads >= 1")

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}", file=sys.stderr)
    print("\n".join(torch.__config__.show().splitlines()[:12]), file=sys.stderr)

    B, T = args.batch, args.seq
    # wpe has max(T, --max-seq) rows, like the C++ benchmark's model, so both count the same N.
    cfg = ref.GPT2Config(max_seq_len=max(T, args.max_seq), vocab_size=args.vocab, num_layers=args.layers,
                         num_heads=args.heads, channels=args.channels,
                         padded_vocab_size=args.padded_vocab)
    p = gpt2_init(cfg)
    n_params = sum(t.numel() for t in p.values())  # includes the padded wte rows
    inputs = torch.randint(0, args.vocab, (B, T))
    targets = torch.randint(0, args.vocab, (B, T))
    opt = ref.make_adamw(p, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)

    times = []
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = ref.gpt2_loss(p, cfg, inputs, targets)
        loss.backward()
        opt.step()
        loss_val = loss.item()  # CPU is synchronous, but keep the read inside the timing
        dt = time.perf_counter() - t0
        phase = "warmup" if i < args.warmup else "step"
        print(f"{phase} {i}: loss {loss_val:.4f} {dt * 1e3:.1f} ms", file=sys.stderr)
        if i >= args.warmup:
            times.append(dt)

    ms = statistics.median(times) * 1e3
    # Standard estimate: 6N per token for the matmuls (fwd+bwd), plus
    # 6*L*C*T per token for attention scores and weighted sums.
    flops_per_step = (6 * n_params + 6 * args.layers * args.channels * T) * B * T
    print(json.dumps({
        "impl": "pytorch",
        "threads": args.threads,
        "B": B,
        "T": T,
        "params": n_params,
        "ms_per_step": round(ms, 3),
        "tokens_per_s": round(B * T / (ms / 1e3), 3),
        "gflops": round(flops_per_step / (ms / 1e3) / 1e9, 3),
    }))


if __name__ == "__main__":
    main()
