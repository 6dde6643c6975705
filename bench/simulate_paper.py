#!/usr/bin/env python3
"""Llama 3 8B and 70B at T=4096 on 8 to 4096 H100s, simulated by `ztrain simulate` for FULL_SHARD,
HYBRID_SHARD (groups of a node), hpZ (secondary shards within a node) and SHARD_GRAD_OP: a
markdown table on stdout and, given PNG, a plot of tokens/s per GPU (needs matplotlib: run it with
the python scripts/install-peers.sh prints).
    bench/simulate_paper.py ZTRAIN [PNG]
"""
import json
import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
ztrain = sys.argv[1]
png = sys.argv[2] if len(sys.argv) > 2 else None
cluster = here / "clusters" / "h100_ib.json"
models = {"Llama 3 8B": here / "sim" / "llama3_8b.json", "Llama 3 70B": here / "sim" / "llama3_70b.json"}
modes = {
    "FULL_SHARD": ["zero_optimization.stage=3"],
    "HYBRID_SHARD": ["zero_optimization.sharding_strategy=HYBRID_SHARD"],
    "hpZ": ["zero_optimization.stage=3", "zero_optimization.zero_hpz_partition_size=8"],
    "SHARD_GRAD_OP": ["zero_optimization.stage=2"],
}
worlds = [8, 64, 512, 4096]


def simulate(config, world, sets):
    cmd = [ztrain, "simulate", "--config", str(config), "--cluster", str(cluster), "--world-size", str(world), "--format", "json"]
    for s in sets:
        cmd += ["--set", s]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


rows = []
print("| model | GPUs | sharding | step | exposed comm | tokens/s/GPU | MFU | memory/GPU | comm_bytes_inter |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
for model, config in models.items():
    for mode, sets in modes.items():
        for world in worlds:
            r = simulate(config, world, sets)
            rows.append((model, mode, world, r))
            print(f"| {model} | {world} | {mode} | {r['step_s']:.3f} s | {r['exposed_comm_s'] * 1e3:.0f} ms "
                  f"({100 * r['exposed_comm_s'] / r['step_s']:.0f}%) | {r['tokens_per_s_per_device']:.0f} | "
                  f"{100 * r['mfu']:.1f}% | {r['peak_bytes'] / 2**30:.1f} GiB{'' if r['peak_bytes'] < 80e9 else ' (> 80 GB)'} | {r['comm_bytes_inter'] / 2**30:.1f} GiB |")

if png:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, model in zip(axes, models):
        for mode in modes:
            pts = [(w, r["tokens_per_s_per_device"]) for m, md, w, r in rows if m == model and md == mode]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=mode)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("H100s (8 a node, 8 x 400 Gb/s IB)")
        ax.set_ylabel("tokens/s per GPU (simulated)")
        ax.set_title(f"{model}, T=4096")
        ax.grid(True, alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
