#!/usr/bin/python3
"""PEFT on transformers as the reference for ztrain's LoRA (models/lora.hpp).

    lora_peft.py init BASE OUT --targets q_proj,v_proj|all-linear --r R --alpha A [--seed S]
        PEFT's LoRA adapters on the transformers model in folder BASE, saved by save_pretrained
        into OUT. A and B are both random (init_lora_weights=False: PEFT's default B = 0 would
        leave A without a gradient at the first step), so every term is checked from step 1.
    lora_peft.py shard OUT --tokens N --vocab V [--seed S]
        An llm.c token shard (version 1, uint16) of N random tokens below V.
    lora_peft.py ref BASE ADAPTER SHARD OUT --steps N --batch B --seq T --lr LR --weight-decay WD
        Trains ADAPTER on BASE with torch's AdamW in float64 over the shard's batches in llm.c's
        order (batch k: tokens [k*B*T, (k+1)*B*T] as inputs and shifted targets); OUT.json holds
        {"losses": [...]} (the loss of each step before its update), OUT/ the trained adapter.
    lora_peft.py check BASE OURS THEIRS MERGED SHARD --batch B --seq T --tol-logits X
                       --index K --loss L
        Loads the adapter ztrain exported (OURS) onto BASE with PeftModel.from_pretrained: its
        loss on the shard's batch K (float64) must be L, ztrain's own loss there with the same
        adapters, within 1e-5; its logits on batch 0 those of the reference's trained adapter
        (THEIRS) within X; and ztrain's merged export (MERGED, a Hugging Face folder) must equal
        PEFT's merge_and_unload of OURS tensor for tensor (within 1e-6, f32). Exits non-zero with
        the differences otherwise.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def quiet_peft():
    # save_pretrained writes a README model card through Jinja2, which the tests do without.
    from peft import PeftModel
    PeftModel.create_or_update_model_card = lambda self, directory: None


def targets(text):
    return "all-linear" if text == "all-linear" else text.split(",")


def base_model(path, dtype=torch.float64):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype)


def init(args):
    from peft import LoraConfig, get_peft_model
    quiet_peft()
    torch.manual_seed(args.seed)
    model = base_model(args.base, torch.float32)
    cfg = LoraConfig(r=args.r, lora_alpha=args.alpha, lora_dropout=0.0, target_modules=targets(args.targets),
                     init_lora_weights=False, task_type="CAUSAL_LM")
    peft = get_peft_model(model, cfg)
    peft.save_pretrained(args.out)


def shard(args):
    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(0, args.vocab, size=args.tokens, dtype=np.uint16)
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, args.tokens
    with open(args.out, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.tobytes())


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype=np.int32)
        return np.frombuffer(f.read(), dtype=np.uint16)[: header[2]].astype(np.int64)


def batch(tokens, k, B, T):
    buf = torch.from_numpy(tokens[k * B * T: (k + 1) * B * T + 1].copy())
    return buf[:-1].view(B, T), buf[1:].view(B, T)


def ref(args):
    from peft import PeftModel
    quiet_peft()
    model = PeftModel.from_pretrained(base_model(args.base), args.adapter, is_trainable=True)
    model = model.double()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=args.weight_decay)
    tokens = read_shard(args.shard)
    losses = []
    for k in range(args.steps):
        x, y = batch(tokens, k, args.batch, args.seq)
        logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.save_pretrained(args.out)
    with open(args.out + ".json", "w") as f:
        json.dump({"losses": losses}, f)


def check(args):
    from peft import PeftModel
    from safetensors.torch import load_file
    tokens = read_shard(args.shard)
    x, _ = batch(tokens, 0, args.batch, args.seq)
    with torch.no_grad():
        ours = PeftModel.from_pretrained(base_model(args.base), args.ours).eval()
        theirs = PeftModel.from_pretrained(base_model(args.base), args.theirs).eval()
        diff = (ours(input_ids=x).logits - theirs(input_ids=x).logits).abs().max().item()
        xk, yk = batch(tokens, args.index, args.batch, args.seq)
        logits = ours(input_ids=xk).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yk.reshape(-1)).item()
    bad = []
    print(f"ztrain's adapter in PEFT: loss {loss:.7f} on batch {args.index}, ztrain's own {args.loss:.7f} "
          f"(|diff| {abs(loss - args.loss):.2g}); logits against PEFT's trained adapter: max |diff| {diff:.3g} "
          f"(tolerance {args.tol_logits})")
    if not abs(loss - args.loss) <= 1e-5:
        bad.append("loss")
    if not diff <= args.tol_logits:
        bad.append("logits")
    merged = PeftModel.from_pretrained(base_model(args.base, torch.float32), args.ours).merge_and_unload()
    # GPT2LMHeadModel names its blocks "transformer.h.<l>..."; the hub's GPT-2 files, and ztrain's
    # export, drop the "transformer." (from_pretrained takes either).
    want = {k.removeprefix("transformer."): v for k, v in merged.state_dict().items()}
    got = {}
    for name in sorted(os.listdir(args.merged)):
        if name.endswith(".safetensors"):
            got.update(load_file(os.path.join(args.merged, name)))
    worst = 0.0
    for k, v in got.items():
        if k not in want:
            bad.append(f"merged export holds {k}, which merge_and_unload's model lacks")
            continue
        worst = max(worst, ((v.double() - want[k].double()).abs().max() / (want[k].double().abs().max() + 1e-30)).item())
    missing = [k for k in want if k not in got and not k.endswith("inv_freq") and k != "lm_head.weight"]
    if missing:
        bad.append(f"merged export lacks {missing}")
    print(f"merged export against merge_and_unload: worst relative difference {worst:.3g} over {len(got)} tensors")
    if not worst <= 1e-6:
        bad.append("merged")
    if bad:
        print("FAILED: " + ", ".join(bad))
        sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("init")
    a.add_argument("base"), a.add_argument("out")
    a.add_argument("--targets", required=True), a.add_argument("--r", type=int, required=True)
    a.add_argument("--alpha", type=float, required=True), a.add_argument("--seed", type=int, default=0)
    a = sub.add_parser("shard")
    a.add_argument("out"), a.add_argument("--tokens", type=int, required=True)
    a.add_argument("--vocab", type=int, required=True), a.add_argument("--seed", type=int, default=0)
    a = sub.add_parser("ref")
    for n in ("base", "adapter", "shard", "out"):
        a.add_argument(n)
    a.add_argument("--steps", type=int, required=True), a.add_argument("--batch", type=int, required=True)
    a.add_argument("--seq", type=int, required=True), a.add_argument("--lr", type=float, required=True)
    a.add_argument("--weight-decay", type=float, required=True)
    a = sub.add_parser("check")
    for n in ("base", "ours", "theirs", "merged", "shard"):
        a.add_argument(n)
    a.add_argument("--batch", type=int, required=True), a.add_argument("--seq", type=int, required=True)
    a.add_argument("--tol-logits", type=float, required=True)
    a.add_argument("--index", type=int, required=True), a.add_argument("--loss", type=float, required=True)
    args = p.parse_args()
    {"init": init, "shard": shard, "ref": ref, "check": check}[args.cmd](args)


if __name__ == "__main__":
    main()
