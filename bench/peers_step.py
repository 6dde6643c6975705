#!/usr/bin/env python3
"""Training steps under a peer's data parallelism (DDP, FSDP2, DeepSpeed ZeRO 0-3), for `ztrain bench
--peers` (runtime/cli/bench_peers.cpp) and bench/zero3_peers.sh.

Usage (2 ranks, one thread each; the driver sets DS_ACCELERATOR=cpu for DeepSpeed):
    OMP_NUM_THREADS=1 python -m torch.distributed.run --nproc_per_node 2 --standalone \\
        bench/peers_step.py --impl ddp|fsdp2|deepspeed [--stage 0-3] [--arch gpt2|llama|qwen3] [--layers 12
        --heads 12 --channels 768 --vocab 50257 --padded-vocab 50304 --max-seq 1024 --batch 2 --seq 256
        --steps 4 --warmup 1] [llama: --kv-heads N --intermediate N --rope-theta X --tie 0|1]

The model is llm.c's / nanoGPT's GPT-2 as a plain nn.Module (wte with the padded vocabulary's rows,
tied to the LM head; wpe; pre-LayerNorm blocks with a fused qkv projection, causal attention and a
4C GELU-tanh MLP; a final LayerNorm), fp32, trained on random tokens (seeded per rank) with AdamW
(lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the matrices only, as llm.c) and gradient
clipping at 1.0. The loss is the cross-entropy over the unpadded vocabulary. --arch llama takes
transformers' LlamaForCausalLM of the given widths instead (random init, RMSNorm eps 1e-5, no
biases), the Llama family's shape (SmolLM2, Llama, Mistral; Qwen2's q/k/v biases aside).

  ddp:       gloo; DistributedDataParallel; torch.optim.AdamW.
  fsdp2:     gloo; fully_shard(block) for every block, then fully_shard(model); torch.optim.AdamW.
  deepspeed: deepspeed.init_distributed("gloo"); ZeRO --stage (default 3) with torch.optim.AdamW as
             the client optimizer; engine.backward + engine.step.

Each step (forward, backward, optimizer step) is timed with time.perf_counter; the median over the
steps after --warmup is reported, with the fastest and slowest, every step's loss and the largest
resident set over the ranks at the end. Rank 0 prints one JSON line to stdout; everything else,
DeepSpeed's logs included (its logger writes to stdout), goes to stderr.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

# Keep stdout for the one JSON line: every other write to fd 1 (DeepSpeed's logger prints to stdout,
# and so may native code) goes to stderr.
_json_out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.stdout = sys.stderr

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(nn.Module):
    def __init__(self, C, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        hs = C // self.n_head
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.vocab = a.vocab
        self.wte = nn.Embedding(a.padded_vocab, a.channels)
        self.wpe = nn.Embedding(max(a.seq, a.max_seq), a.channels)
        self.h = nn.ModuleList(Block(a.channels, a.heads) for _ in range(a.layers))
        self.ln_f = nn.LayerNorm(a.channels, eps=1e-5)
        self.lm_head = nn.Linear(a.channels, a.padded_vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, one Parameter
        # GPT-2's init: N(0, 0.02), the projections into the residual stream scaled by 1/sqrt(2L),
        # zero biases, unit LayerNorm weights (nn.LayerNorm's own), zero padded vocab rows.
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * a.layers) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                    p.normal_(0.0, std)
                elif name.endswith("bias"):
                    p.zero_()
            self.wte.weight[a.vocab:].zero_()

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))[..., :self.vocab]
        return F.cross_entropy(logits.reshape(-1, self.vocab), targets.reshape(-1))


class Llama(nn.Module):
    """transformers' LlamaForCausalLM (or Qwen3ForCausalLM, --arch qwen3) of the given widths, with
    the same loss as GPT2's."""

    def __init__(self, a):
        super().__init__()
        import transformers
        config, model = {"llama": ("LlamaConfig", "LlamaForCausalLM"), "qwen3": ("Qwen3Config", "Qwen3ForCausalLM")}[a.arch]
        torch.manual_seed(a.seed)
        self.vocab = a.vocab
        self.lm = getattr(transformers, model)(getattr(transformers, config)(
            vocab_size=a.vocab, hidden_size=a.channels, intermediate_size=a.intermediate,
            num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
            head_dim=a.head_dim, max_position_embeddings=a.max_seq, rope_theta=a.rope_theta,
            tie_word_embeddings=bool(a.tie), rms_norm_eps=1e-5, attention_bias=False, attn_implementation="sdpa"))
        self.h = self.lm.model.layers  # the blocks fully_shard wraps one by one

    def forward(self, idx, targets):
        logits = self.lm(input_ids=idx).logits
        return F.cross_entropy(logits.reshape(-1, self.vocab), targets.reshape(-1))


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def adamw_groups(model, weight_decay):
    """Weight decay on the matrices only (wte, wpe, qkv, projections, MLP), as llm.c."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


LR, BETAS, EPS, WD, CLIP = 3e-4, (0.9, 0.95), 1e-8, 0.1, 1.0


def torch_step(model, opt):
    """One training step of a model PyTorch wraps (DDP, FSDP2): forward, backward, clipping, AdamW."""
    def step(x, y):
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", required=True, choices=("ddp", "fsdp2", "deepspeed"))
    ap.add_argument("--stage", type=int, default=3, choices=(0, 1, 2, 3), help="DeepSpeed's ZeRO stage")
    ap.add_argument("--arch", default="gpt2", choices=("gpt2", "llama", "qwen3"))
    ap.add_argument("--kv-heads", type=int, default=0, help="llama: key/value heads (0: --heads)")
    ap.add_argument("--intermediate", type=int, default=0, help="llama: the MLP's width (0: 4 channels)")
    ap.add_argument("--head-dim", type=int, default=0, help="llama: a head's width (0: channels / heads)")
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--tie", type=int, default=1, help="llama: tie the embedding and the LM head")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--channels", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--padded-vocab", type=int, default=50304)
    ap.add_argument("--max-seq", type=int, default=1024, help="rows of wpe (max(seq, max-seq)), as ztrain's config")
    ap.add_argument("--batch", type=int, default=2, help="micro-batch per rank")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4, help="timed steps, after --warmup")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.channels % a.heads or a.padded_vocab < a.vocab or a.steps < 1 or a.warmup < 0:
        sys.exit("error: need channels % heads == 0, padded-vocab >= vocab, steps >= 1, warmup >= 0")
    a.kv_heads = a.kv_heads or a.heads
    a.intermediate = a.intermediate or 4 * a.channels
    a.head_dim = a.head_dim or a.channels // a.heads
    make_model = {"gpt2": GPT2, "llama": Llama, "qwen3": Llama}[a.arch]

    torch.set_num_threads(1)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    torch.manual_seed(a.seed)  # the same initial weights on every rank
    ds_version = None

    if a.impl == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        dist.init_process_group("gloo")
        model = make_model(a)
        n_params = sum(p.numel() for p in model.parameters())
        local = n_params
        model = DistributedDataParallel(model)
        opt = torch.optim.AdamW(adamw_groups(model, WD), lr=LR, betas=BETAS, eps=EPS)
        describe = f"PyTorch {torch.__version__} DDP"
        step = torch_step(model, opt)
    elif a.impl == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group("gloo")
        model = make_model(a)
        n_params = sum(p.numel() for p in model.parameters())
        for block in model.h:
            fully_shard(block)
        fully_shard(model)
        opt = torch.optim.AdamW(adamw_groups(model, WD), lr=LR, betas=BETAS, eps=EPS)
        local = sum(p.to_local().numel() for p in model.parameters())
        describe = f"PyTorch {torch.__version__} FSDP2 fully_shard"
        step = torch_step(model, opt)
    else:
        import deepspeed
        ds_version = deepspeed.__version__
        deepspeed.init_distributed(dist_backend="gloo")
        config = {
            "train_micro_batch_size_per_gpu": a.batch,
            "gradient_accumulation_steps": 1,
            "gradient_clipping": CLIP,
            "steps_per_print": 10 ** 9,
            "wall_clock_breakdown": False,
            "zero_allow_untested_optimizer": True,
            "zero_force_ds_cpu_optimizer": False,  # DeepSpeedCPUAdam needs compiled ops
            "zero_optimization": {"stage": a.stage, "stage3_prefetch_bucket_size": 1e7, "reduce_bucket_size": 1e7,
                                  "stage3_param_persistence_threshold": 1e5, "overlap_comm": False},
        }
        model = make_model(a)
        n_params = sum(p.numel() for p in model.parameters())
        opt = torch.optim.AdamW(adamw_groups(model, WD), lr=LR, betas=BETAS, eps=EPS)
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
        local = sum(p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.numel() for p in engine.module.parameters())
        describe = f"DeepSpeed {ds_version} ZeRO-{engine.zero_optimization_stage()}"

        def step(x, y):
            loss = engine(x, y)
            engine.backward(loss)
            engine.step()
            return loss

    print(f"rank {rank}: {describe}; {n_params} parameters, {local} in this rank's shard", file=sys.stderr, flush=True)
    g = torch.Generator().manual_seed(a.seed * 1000 + 1 + rank)  # each rank its own slice
    data = [(torch.randint(0, a.vocab, (a.batch, a.seq), generator=g),
             torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)) for _ in range(a.warmup + a.steps)]

    times, losses = [], []
    for i, (x, y) in enumerate(data):
        dist.barrier()
        t0 = time.perf_counter()
        loss = step(x, y).item()
        dt = time.perf_counter() - t0
        losses.append(loss)
        phase = "warmup" if i < a.warmup else "step"
        if rank == 0:
            print(f"{a.impl} {phase} {i}: loss {loss:.4f} {dt * 1e3:.1f} ms", file=sys.stderr, flush=True)
        if i >= a.warmup:
            times.append(dt)

    ms = statistics.median(times) * 1e3
    rss = torch.tensor([float(resident_bytes())])
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        _json_out.write(json.dumps({
            "impl": a.impl, "runner": describe, "torch": torch.__version__, "deepspeed": ds_version, "ranks": world,
            "threads": torch.get_num_threads(), "B": a.batch, "T": a.seq, "params": n_params,
            "ms_per_step": round(ms, 3), "ms_min": round(min(times) * 1e3, 3), "ms_max": round(max(times) * 1e3, 3),
            "tokens_per_s": round(world * a.batch * a.seq / (ms / 1e3), 3),
            "loss_first": round(losses[0], 6), "loss_last": round(losses[-1], 6), "losses": losses,
            "rss_bytes": rss.item(),
        }) + "\n")
        _json_out.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
