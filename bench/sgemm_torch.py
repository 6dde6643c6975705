#!/usr/bin/env python3
"""SGEMM through PyTorch's BLAS (MKL in PyPI's x86 wheels), on the shapes bench/sgemm.cpp times,
printing the same JSON lines (lib "mkl (torch X)").

Usage: sgemm_torch.py --threads 2 --square 2048 --rows 1024 --channels 768 --vocab 50304 --reps 3
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    for k, v in (("threads", 2), ("square", 2048), ("rows", 1024), ("channels", 768), ("vocab", 50304), ("reps", 3)):
        ap.add_argument("--" + k, type=int, default=v)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    lib = f"{torch.backends.mkl.is_available() and 'mkl' or 'blas'} (torch {torch.__version__.split('+')[0]})"
    # (name, transpose A, transpose B, M, N, K): the order and names of bench/sgemm.cpp.
    shapes = [("square", False, False, a.square, a.square, a.square)]
    ch = a.channels
    for name, (i, o) in (("qkv", (ch, 3 * ch)), ("attproj", (ch, ch)), ("fc", (ch, 4 * ch)), ("fcproj", (4 * ch, ch)),
                         ("lm_head", (ch, a.vocab))):
        shapes += [(name + ".fwd", False, True, a.rows, o, i), (name + ".dx", False, False, a.rows, i, o),
                   (name + ".dw", True, False, o, i, a.rows)]
    for name, ta, tb, M, N, K in shapes:
        A = torch.randn((K, M) if ta else (M, K))
        B = torch.randn((N, K) if tb else (K, N))
        A, B = (A.t() if ta else A), (B.t() if tb else B)
        C = torch.empty(M, N)
        best = float("inf")
        for r in range(a.reps + 1):
            t0 = time.perf_counter()
            torch.mm(A, B, out=C)
            dt = time.perf_counter() - t0
            if r:
                best = min(best, dt)
        print(json.dumps({"lib": lib, "shape": name, "M": M, "N": N, "K": K, "threads": a.threads,
                          "gflops": round(2 * M * N * K / best / 1e9, 1)}))


if __name__ == "__main__":
    main()
