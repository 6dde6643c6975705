#!/usr/bin/python3
"""Two runs' metrics files (ztrain --metrics, JSON lines) agree: the same number of lines and, on
every line, each of the keys within a relative tolerance. Prints the worst difference.

  compare_metrics.py REF GOT [--lines N] [--rtol 1e-5] [--keys loss,val_loss,grad_norm]
Exits 1 naming the first line and key that differ, or a line count other than N.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def worst_relative(ref, got, keys):
    """The largest |a - b| / |a| over the lines and keys ref has, with where it was."""
    worst, where = 0.0, None
    for i, (a, b) in enumerate(zip(ref, got)):
        for k in keys:
            if k in a:
                d = abs(a[k] - b[k]) / abs(a[k]) if a[k] else abs(b[k])
                if d > worst or where is None:
                    worst, where = max(worst, d), (i, k, a[k], b[k])
    return worst, where


def main():
    p = argparse.ArgumentParser()
    p.add_argument("ref")
    p.add_argument("got")
    p.add_argument("--lines", type=int)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--keys", default="loss,val_loss,grad_norm")
    a = p.parse_args()
    ref, got = load(a.ref), load(a.got)
    if len(ref) != len(got) or (a.lines is not None and len(ref) != a.lines):
        sys.exit(f"{a.got}: {len(got)} lines, {a.ref}: {len(ref)}, expected {a.lines or len(ref)}")
    worst, where = worst_relative(ref, got, a.keys.split(","))
    print(f"{len(ref)} lines, worst relative difference {worst:.2e}")
    if worst > a.rtol:
        i, k, x, y = where
        sys.exit(f"line {i + 1}: {k} {y} differs from {x} by {worst:.2e} relative (> {a.rtol})")


if __name__ == "__main__":
    main()
