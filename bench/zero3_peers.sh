#!/usr/bin/env bash
# ZeRO stage 3 against its peers on the GPT-2 124M shape, in one `ztrain bench --peers` run: 2 ranks,
# one thread a rank, micro-batch 2 x T 256 per rank (random tokens), fp32, AdamW (lr 3e-4, betas
# 0.9/0.95, eps 1e-8, weight decay 0.1), clipping 1.0; ztrain's stage 3 beside PyTorch DDP and FSDP2
# and DeepSpeed ZeRO 0-3 on gloo (bench/peers_step.py under torchrun, from scripts/install-peers.sh's
# environment). Prints the table and ztrain's tokens/s over FSDP2's and DeepSpeed ZeRO-3's
# (target >= 1.2x).
#   bench/zero3_peers.sh [build-dir] [steps]
# ZERO3_PEERS_TINY=1 runs a tiny model (2 layers, 64 channels, T 32) instead, to check the script.
. "$(dirname "$0")/common.sh"
steps=${2:-3}
py=$(bash scripts/install-peers.sh | tail -n 1)  # DeepSpeed's logger writes to stdout: the path is the last line
header
tiny=()
[[ ${ZERO3_PEERS_TINY:-0} == 1 ]] && tiny=(model.n_layer 2 model.n_head 2 model.n_embd 64 data.seq_len 32)
config gpt2 "$dir/c.json" zero_optimization.stage 3 "${tiny[@]}"
bench 2 --config "$dir/c.json" --sweep zero_optimization.stage=3 --steps "$steps" --peers --python "$py" \
  --format json --out "$dir/peers.json" --plot "$dir/zero3_peers.png"
/usr/bin/python3 - "$dir/peers.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
z = next((r for r in rows if r["runner"] == "ztrain" and "error" not in r), None)
print("| runner | ms/step | tokens/s | ztrain / runner (tokens/s) |\n|---|---:|---:|---:|")
for r in rows:
    if "error" in r:
        print(f"| {r['label']} | FAILED: {r['error'][:120]} | | |")
        continue
    ratio = "1.00" if r is z else (f"{z['tokens_per_s'] / r['tokens_per_s']:.2f}x" if z else "-")
    print(f"| {r['runner']} | {r['ms_median']:.0f} | {r['tokens_per_s']:.1f} | {ratio} |")
PY
