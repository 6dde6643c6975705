#!/usr/bin/env python3
"""PyTorch 2.x yardstick for ztrain's Llama-family training step: transformers' LlamaForCausalLM
(what a user runs), float32, PyTorch's fused scaled-dot-product attention, AdamW, on random
tokens. Prints one JSON line to stdout (tokens/s, and GFLOP/s counted as ztrain counts them:
6 per multiplying parameter plus 6 L n_head head_dim T per token).

    torch_llama_step.py [--layers 30 --heads 9 --kv-heads 3 --channels 576 --ffn 1536
                         --vocab 49152 --tied 1 --batch 4 --seq 256 --steps 3 --warmup 1 --threads 2]
"""
import argparse
import json
import statistics
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    for k, v in (("layers", 30), ("heads", 9), ("kv-heads", 3), ("channels", 576), ("ffn", 1536), ("vocab", 49152),
                 ("tied", 1), ("batch", 4), ("seq", 256), ("steps", 3), ("warmup", 1), ("threads", 2)):
        ap.add_argument("--" + k, type=int, default=v)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from transformers import LlamaConfig, LlamaForCausalLM
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.get_num_threads()} threads",
          file=sys.stderr)
    cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=a.channels, intermediate_size=a.ffn, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, max_position_embeddings=max(a.seq, 2048),
                      rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=bool(a.tied))
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).float()
    model.config.use_cache = False
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95))
    tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
    x, y = tokens[:, :-1], tokens[:, 1:]
    times = []
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, a.vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if s >= a.warmup:
            times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    n = sum(p.numel() for p in model.parameters())
    multiplied = n - (0 if a.tied else a.vocab * a.channels)
    hd = a.channels // a.heads
    flops_per_token = 6.0 * multiplied + 6.0 * a.layers * a.heads * hd * a.seq
    tok_s = a.batch * a.seq / (ms / 1e3)
    print(json.dumps({"impl": "torch", "version": torch.__version__, "threads": torch.get_num_threads(), "B": a.batch,
                      "T": a.seq, "params": n, "ms_per_step": ms, "tokens_per_s": tok_s,
                      "gflops": flops_per_token * tok_s / 1e9}))


if __name__ == "__main__":
    main()
