"""Reads a run's tensorboard and csv_monitor files back, with the tensorboard package's own
EventAccumulator and Python's csv, and holds every scalar to the run's metrics lines
([Note: monitor scalars] in runtime/train/monitor.hpp): each tag's steps (the samples axis: the
metrics' step times SAMPLES_PER_STEP) are the metrics' steps exactly, once each, in order; a
TensorBoard value is the metrics value as a float32, a CSV value the metrics value itself. With
--prefix (a killed run) each file may end one step short of the metrics file.

    check_monitors.py METRICS.jsonl TB_FOLDER CSV_FOLDER SAMPLES_PER_STEP [--prefix]

TB_FOLDER or CSV_FOLDER may be "-" to skip that monitor.
"""
import csv
import json
import os
import sys

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

CATEGORIES = ["parameters", "gradients", "optimizer", "activations", "communication", "other"]


def expected_scalars(metrics, sps):
    """tag -> [(samples, value)] from the metrics lines, as the run must have written them."""
    out = {}

    def put(name, step, v):
        if v is not None:
            out.setdefault("Train/Samples/" + name, []).append((step * sps, v))

    skipped = 0
    for n, line in enumerate(open(metrics), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        if "val_loss" in r:
            put("val_loss", r["step"], r["val_loss"])
            continue
        skipped += bool(r.get("skipped", False))
        s = r["step"]
        put("train_loss", s, r["loss"])
        put("lr", s, r["lr"])
        put("loss_scale", s, r.get("loss_scale"))
        put("grad_norm", s, r.get("grad_norm"))
        put("tokens_per_second", s, r["tokens_per_s"])
        put("tflops", s, r["tflops"])
        for c in CATEGORIES:
            put("peak_bytes_" + c, s, r["peak_bytes"][c])
        put("peak_bytes_total", s, r["peak_bytes"]["total"])
        put("comm_bytes", s, r["comm_bytes"])
        put("skipped_steps", s, skipped)
    return out


def compare(what, tag, want, got, same, prefix):
    steps = [x for x, _ in got]
    if len(set(steps)) != len(steps):
        sys.exit(f"{what} {tag}: a step appears more than once: {steps}")
    if prefix and len(got) in (len(want), len(want) - 1):
        want = want[:len(got)]
    if steps != [x for x, _ in want]:
        sys.exit(f"{what} {tag}: steps {steps}, the metrics lines' {[x for x, _ in want]}")
    for (x, w), (_, g) in zip(want, got):
        if not same(w, g):
            sys.exit(f"{what} {tag} at {x}: {g!r}, the metrics line's {w!r}")


def main():
    args = [a for a in sys.argv[1:] if a != "--prefix"]
    if len(args) != 4:
        sys.exit(__doc__)
    metrics, tb, csv_dir, sps = args[0], args[1], args[2], int(args[3])
    prefix = "--prefix" in sys.argv
    want = expected_scalars(metrics, sps)
    if not want:
        sys.exit(f"{metrics}: no metrics lines")
    if tb != "-":
        ea = EventAccumulator(tb, size_guidance={"scalars": 0})
        ea.Reload()
        tags = sorted(ea.Tags()["scalars"])
        if tags != sorted(want):
            sys.exit(f"tensorboard: tags {tags}, the metrics' {sorted(want)}")
        for tag, w in want.items():
            got = [(e.step, e.value) for e in ea.Scalars(tag)]
            compare("tensorboard", tag, w, got, lambda a, b: np.float32(a) == np.float32(b), prefix)
    if csv_dir != "-":
        names = sorted(f for f in os.listdir(csv_dir) if f.endswith(".csv"))
        if names != sorted(t.replace("/", "_") + ".csv" for t in want):
            sys.exit(f"csv_monitor: files {names}, the metrics' tags {sorted(want)}")
        for tag, w in want.items():
            rows = list(csv.reader(open(os.path.join(csv_dir, tag.replace("/", "_") + ".csv"))))
            if rows[0] != ["step", tag.split("/")[-1]]:
                sys.exit(f"csv_monitor {tag}: header {rows[0]}")
            got = [(int(r[0]), float(r[1])) for r in rows[1:]]
            compare("csv_monitor", tag, w, got, lambda a, b: float(a) == b, prefix)
    print(f"{len(want)} tags over {max(len(w) for w in want.values())} steps equal to the metrics lines")


if __name__ == "__main__":
    main()
