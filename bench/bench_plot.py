#!/usr/bin/env python3
"""`ztrain bench --plot` and `ztrain train --plot`.

bench: the bench's rows (its --format json) as a PNG of two panels, the step time
(median, with the fastest and slowest step as a bar) and the peak memory per rank (stacked by
category where the row has them, else the resident set), one bar per row, ztrain's points and the
peers' side by side. Needs matplotlib (scripts/install-peers.sh's environment has it).

    bench_plot.py BENCH.json OUT.png

train: a run's metrics file (train.metrics, JSON lines) as a PNG of the loss and the validation
loss against the step (a step without a finite loss is left out, as the metrics line leaves it).

    bench_plot.py --metrics METRICS.jsonl OUT.png
"""
import json
import sys
import textwrap


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("bench_plot.py: matplotlib is not installed for " + sys.executable +
                 " (scripts/install-deps.sh and scripts/install-peers.sh install it; ztrain bench --python names another Python)")
    return plt


def plot_metrics(metrics, png):
    steps, losses, val_steps, val_losses = [], [], [], []
    for n, line in enumerate(open(metrics), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError:
            sys.exit(f"bench_plot.py: {metrics}:{n}: not a JSON line")
        if r.get("val_loss") is not None:
            val_steps.append(r["step"])
            val_losses.append(r["val_loss"])
        elif r.get("loss") is not None:
            steps.append(r["step"])
            losses.append(r["loss"])
    if not steps and not val_steps:
        sys.exit(f"bench_plot.py: {metrics} holds no step with a loss to plot")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(steps, losses, label="loss", color="tab:blue", linewidth=1)
    if val_steps:
        ax.plot(val_steps, val_losses, label="validation loss", color="tab:orange", marker="o", markersize=3)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(metrics, fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--metrics":
        return plot_metrics(sys.argv[2], sys.argv[3])
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    plt = pyplot()
    bench = json.load(open(sys.argv[1]))
    rows = [r for r in bench["rows"] if "error" not in r]
    if not rows:
        sys.exit("bench_plot.py: no row has numbers to plot")
    labels = [r["label"] if r["runner"] == "ztrain" else r["runner"] for r in rows]
    labels = [l.replace("zero_optimization.", "").replace(", ", "\n") for l in labels]
    colors = ["tab:blue" if r["runner"] == "ztrain" else "tab:gray" for r in rows]
    x = range(len(rows))
    mib = 1 << 20

    fig, (ax_t, ax_m) = plt.subplots(2, 1, figsize=(max(7, 1.1 * len(rows)), 8), sharex=True)
    ms = [r["ms_median"] for r in rows]
    err = [[m - r["ms_min"] for m, r in zip(ms, rows)], [r["ms_max"] - m for m, r in zip(ms, rows)]]
    ax_t.bar(x, ms, color=colors, yerr=err, capsize=3)
    ax_t.set_ylabel("ms per step (median; bar: min-max)")
    for i, r in enumerate(rows):
        ax_t.annotate(f"{r['tokens_per_s']:.0f} tok/s", (i, ms[i]), ha="center", va="bottom", fontsize=7,
                      xytext=(0, 4), textcoords="offset points")

    categories = ["parameters", "gradients", "optimizer", "activations", "communication", "other"]
    bottom = [0.0] * len(rows)
    for c in categories:
        heights = [r["peak_bytes"][c] / mib if "peak_bytes" in r else 0.0 for r in rows]
        if any(heights):
            ax_m.bar(x, heights, bottom=bottom, label=c)
            bottom = [b + h for b, h in zip(bottom, heights)]
    rss = [r.get("rss_bytes", 0) / mib for r in rows]
    ax_m.scatter(x, rss, marker="_", s=400, color="black", label="resident set", zorder=3)
    est = [(i, r["estimate_total_bytes"] / mib) for i, r in enumerate(rows) if "estimate_total_bytes" in r]
    if est:
        ax_m.scatter([i for i, _ in est], [e for _, e in est], marker="x", color="red", label="ztrain estimate",
                     zorder=3)
    ax_m.set_ylabel("MiB per rank (peak by category)")
    ax_m.legend(fontsize=7, ncol=2)
    ax_m.set_xticks(list(x))
    ax_m.set_xticklabels(labels, fontsize=7, rotation=30, ha="right")
    fig.suptitle("\n".join(textwrap.wrap(bench["header"], 120)), fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
