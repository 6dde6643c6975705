#!/usr/bin/env python3
"""A token shard of random GPT-2 ids in llm.c's format, for benchmarks whose timing does not depend
on the text.

  random_tokens.py PATH [TOKENS] [VOCAB]   (default 2^20 tokens below 50257, seed 0)
"""
import random
import struct
import sys

path = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
vocab = int(sys.argv[3]) if len(sys.argv) > 3 else 50257
random.seed(0)
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *(random.randrange(vocab) for _ in range(n))))
