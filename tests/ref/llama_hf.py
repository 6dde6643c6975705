#!/usr/bin/python3
"""Hugging Face transformers as the reference for ztrain's Llama family.

    llama_hf.py make OUT --variant NAME [--seed S]
        A tiny random LlamaForCausalLM or Qwen2ForCausalLM made and saved by transformers
        (save_pretrained: config.json + model.safetensors, f32) in folder OUT. Variants:
          llama      GQA (4 heads, 2 KV heads), untied head, Llama 3.1 rope scaling
          qwen2      Qwen2 (q/k/v biases), GQA, tied head
          headdim    Llama with head_dim 12 != hidden 32 / 4 heads, MHA, tied, rope_theta 500000
          qwen3      Qwen3 (per-head q/k RMSNorm), GQA, head_dim 16 != hidden 32 / 4 heads, untied
          qwen3_tied Qwen3, MHA, head_dim 8, tied head
          gemma3     Gemma 3 text (Gemma3ForCausalLM): GQA, head_dim 16, tied, 4 layers alternating a
                     sliding window of 5 (< T) with global ones, each with its own RoPE base,
                     query_pre_attn_scalar 24 (not head_dim)
          gemma3_untied  Gemma 3, MHA, head_dim 8, untied head, the hub's pattern (5 local, 1 global)
        (the qwen3 and gemma3 variants need a newer transformers than the tests': the goldens below
        hold them.)
    llama_hf.py golden OUT --variant NAME --seed S --case grads|adamw [--steps N]
        What the tests compare against where the test machine's transformers lacks the class,
        made once with the peers' environment (tests/golden/make_goldens.sh) and committed: the
        model folder OUT/model, the batch OUT/tokens.bin (grads: random ids, two targets -1;
        adamw: consecutive windows of OUT/shard.bin, B*T+1 uint16 ids, as the trainer's loader
        reads a one-batch shard) and the reference OUT/ref.safetensors.
    llama_hf.py ref MODEL TOKENS OUT [--steps N] [--lr ...] [--beta1 ...] [--beta2 ...]
                    [--eps ...] [--weight-decay ...]
        TOKENS: int32 B, int32 T, B*T int32 inputs, B*T int32 targets (-1 ignored).
        OUT (safetensors, float32): "loss" (1), "logits" (B, T, V), "grad.<hf name>" for every
        parameter after one backward, and "losses" (N): the loss at each of N AdamW steps on the
        same batch (weight decay on matrices and embeddings only, as ztrain). Computed in float64.
"""

import argparse
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

VARIANTS = {
    "llama": dict(arch="llama", vocab_size=96, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5,
                  rope_theta=10000.0, tie_word_embeddings=False,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
    "qwen2": dict(arch="qwen2", vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6,
                  rope_theta=1000000.0, tie_word_embeddings=True),
    "qwen3": dict(arch="qwen3", vocab_size=96, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                  rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=False),
    "qwen3_tied": dict(arch="qwen3", vocab_size=80, hidden_size=32, intermediate_size=24, num_hidden_layers=3,
                       num_attention_heads=4, num_key_value_heads=4, head_dim=8, max_position_embeddings=64,
                       rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True),
    "gemma3": dict(arch="gemma3", vocab_size=96, hidden_size=32, intermediate_size=40, num_hidden_layers=4,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                   rms_norm_eps=1e-6, tie_word_embeddings=True, sliding_window=5, query_pre_attn_scalar=24,
                   layer_types=["sliding_attention", "full_attention"] * 2,
                   rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}),
    "gemma3_untied": dict(arch="gemma3", vocab_size=80, hidden_size=32, intermediate_size=24, num_hidden_layers=6,
                          num_attention_heads=4, num_key_value_heads=4, head_dim=8, max_position_embeddings=64,
                          rms_norm_eps=1e-6, tie_word_embeddings=False, sliding_window=7,
                          query_pre_attn_scalar=8),
    "headdim": dict(arch="llama", vocab_size=80, hidden_size=32, intermediate_size=24, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=4, head_dim=12, max_position_embeddings=64,
                    rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True),
}


def make(out, variant, seed):
    import transformers
    kw = dict(VARIANTS[variant])
    config, causal_lm = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
                         "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
                         "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM")}[kw.pop("arch")]
    torch.manual_seed(seed)
    model = getattr(transformers, causal_lm)(getattr(transformers, config)(**kw))
    # Norm weights away from 1 and biases away from 0, so that they are checked too.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(out, safe_serialization=True)


def read_tokens(path):
    with open(path, "rb") as f:
        B, T = struct.unpack("<ii", f.read(8))
        data = np.frombuffer(f.read(), dtype=np.int32)
    return torch.from_numpy(data[:B * T].reshape(B, T).astype(np.int64)), \
        torch.from_numpy(data[B * T:2 * B * T].reshape(B, T).astype(np.int64))


def ref(args):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float64, attn_implementation="eager")
    inputs, targets = read_tokens(args.tokens)
    V = model.config.vocab_size

    def loss_of():
        logits = model(inputs).logits
        return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=-1), logits

    out = {}
    loss, logits = loss_of()
    loss.backward()
    out["loss"] = loss.detach().reshape(1)
    out["logits"] = logits.detach()
    seen = set()
    for name, p in model.named_parameters():
        if id(p) in seen:  # a tied head is the embedding
            continue
        seen.add(id(p))
        out["grad." + name] = p.grad.detach().clone()
    model.zero_grad()

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad()
        loss, _ = loss_of()
        losses.append(loss.item())
        loss.backward()
        opt.step()
    out["losses"] = torch.tensor(losses if losses else [0.0], dtype=torch.float64)
    save_file({k: v.to(torch.float32).contiguous() for k, v in out.items()}, args.out)


B, T = 2, 16


def golden(args):
    import os
    os.makedirs(args.out, exist_ok=True)
    model = os.path.join(args.out, "model")
    make(model, args.variant, args.seed)
    V = VARIANTS[args.variant]["vocab_size"]
    rng = np.random.default_rng(args.seed)
    if args.case == "grads":
        inputs = rng.integers(0, V, B * T, dtype=np.int32)
        targets = rng.integers(0, V, B * T, dtype=np.int32)
        targets[4] = targets[T + 7] = -1
    else:
        shard = rng.integers(0, V, B * T + 1, dtype=np.uint16)
        shard.tofile(os.path.join(args.out, "shard.bin"))
        idx = np.arange(B * T)
        inputs, targets = shard[idx].astype(np.int32), shard[idx + 1].astype(np.int32)
    tokens = os.path.join(args.out, "tokens.bin")
    with open(tokens, "wb") as f:
        f.write(struct.pack("<ii", B, T) + inputs.tobytes() + targets.tobytes())
    args.model, args.tokens, args.out = model, tokens, os.path.join(args.out, "ref.safetensors")
    ref(args)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("out")
    m.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    m.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("ref")
    r.add_argument("model")
    r.add_argument("tokens")
    r.add_argument("out")
    g = sub.add_parser("golden")
    g.add_argument("out")
    g.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--case", choices=("grads", "adamw"), required=True)
    for p in (r, g):  # the reference's AdamW
        p.add_argument("--steps", type=int, default=0)
        p.add_argument("--lr", type=float, default=1e-3)
        p.add_argument("--beta1", type=float, default=0.9)
        p.add_argument("--beta2", type=float, default=0.95)
        p.add_argument("--eps", type=float, default=1e-8)
        p.add_argument("--weight-decay", type=float, default=0.1)
    args = ap.parse_args()
    if args.cmd == "make":
        make(args.out, args.variant, args.seed)
    elif args.cmd == "golden":
        golden(args)
    else:
        ref(args)


if __name__ == "__main__":
    sys.exit(main())
