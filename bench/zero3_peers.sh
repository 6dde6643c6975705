#!/usr/bin/env bash
# ZeRO against its peers in one `ztrain bench --peers` run: 2 ranks, one thread a rank, micro-batch 2
# x T 256 per rank (random tokens), fp32, AdamW (lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay
# 0.1), clipping 1.0, on the GPT-2 124M shape or SmolLM2-135M's Llama; ztrain's stages 0-3 beside
# PyTorch DDP and FSDP2 and DeepSpeed ZeRO 0-3 on gloo (bench/peers_step.py under torchrun, from
# scripts/install-peers.sh's environment; the Llama through transformers). Prints the bench's table
# and ztrain's tokens/s over each peer's, stage for stage (target >= 1.2x against FSDP2 and
# DeepSpeed ZeRO-3), and draws the plot (PLOT, default $dir/peers.png, gone with $dir).
#   bench/zero3_peers.sh [build-dir] [steps] [gpt2|smollm2]
# ZERO3_PEERS_TINY=1 runs a tiny model (2 layers, 64 channels, T 32) instead, to check the script.
. "$(dirname "$0")/common.sh"
steps=${2:-3}
shape=${3:-gpt2}
py=$(bash scripts/install-peers.sh | tail -n 1)  # DeepSpeed's logger writes to stdout: the path is the last line
header
tiny=()
[[ ${ZERO3_PEERS_TINY:-0} == 1 ]] && tiny=(model.n_layer 2 model.n_head 2 model.n_kv_head 2 model.n_embd 64 data.seq_len 32)
config "$shape" "$dir/c.json" "${tiny[@]}"
bench 2 --config "$dir/c.json" --steps "$steps" --peers --python "$py" --out "$dir/peers.json" --plot "${PLOT:-$dir/peers.png}"
/usr/bin/python3 - "$dir/peers.json" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if "error" not in r]
z3 = next((r for r in rows if r["label"] == "zero_optimization.stage=3"), None)
print("\nztrain stage 3's tokens/s over each peer's:")
for r in rows:
    if z3 and r["runner"] != "ztrain":
        print(f"  {r['runner']}: {z3['tokens_per_s'] / r['tokens_per_s']:.2f}x")
PY
