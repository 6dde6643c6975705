#!/usr/bin/env python3
"""`ztrain bench --plot`: the bench's rows (its --format json) as a PNG of two panels, the step time
(median, with the fastest and slowest step as a bar) and the peak memory per rank (stacked by
category where the row has them, else the resident set), one bar per row, ztrain's points and the
peers' side by side. Needs matplotlib (scripts/install-peers.sh's environment has it).

    bench_plot.py BENCH.json OUT.png
"""
import json
import sys
import textwrap


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("bench_plot.py: matplotlib is not installed for " + sys.executable +
                 " (scripts/install-peers.sh installs it; ztrain bench --python names another Python)")
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
