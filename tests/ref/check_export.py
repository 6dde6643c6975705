#!/usr/bin/python3
"""An exported safetensors file against an llm.c checkpoint of the same weights: every Hugging Face
GPT-2 tensor is there, with its name, shape and values (Conv1D weights transposed, wte without the
padded rows), loaded with the safetensors package.

  check_export.py MODEL.safetensors LLMC.bin [--dtype F32|BF16|F16]
Exits 1 naming the first tensor that differs.
"""
import argparse
import sys

import numpy as np
import torch
from safetensors.torch import load_file


def llmc(path):
    h = np.fromfile(path, dtype=np.int32, count=256)
    assert h[0] == 20240326 and h[1] == 3, "not an llm.c fp32 checkpoint"
    T, V, L, NH, C, Vp = (int(x) for x in h[2:8])
    data = np.fromfile(path, dtype=np.float32, offset=1024)
    shapes = [("wte", (Vp, C)), ("wpe", (T, C)), ("ln1w", (L, C)), ("ln1b", (L, C)), ("qkvw", (L, 3 * C, C)),
              ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)), ("ln2w", (L, C)), ("ln2b", (L, C)),
              ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)), ("fcprojb", (L, C)),
              ("lnfw", (C,)), ("lnfb", (C,))]
    out, at = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape))
        out[name] = data[at:at + n].reshape(shape)
        at += n
    assert at == data.size, f"llm.c file holds {data.size} floats, its header {at}"
    return out, V, L


def main():
    p = argparse.ArgumentParser()
    p.add_argument("safetensors")
    p.add_argument("llmc")
    p.add_argument("--dtype", default="F32")
    a = p.parse_args()
    ref, V, L = llmc(a.llmc)
    want = {"wte.weight": ref["wte"][:V], "wpe.weight": ref["wpe"], "ln_f.weight": ref["lnfw"], "ln_f.bias": ref["lnfb"]}
    hf = {"ln1w": ("ln_1.weight", False), "ln1b": ("ln_1.bias", False), "qkvw": ("attn.c_attn.weight", True),
          "qkvb": ("attn.c_attn.bias", False), "attprojw": ("attn.c_proj.weight", True),
          "attprojb": ("attn.c_proj.bias", False), "ln2w": ("ln_2.weight", False), "ln2b": ("ln_2.bias", False),
          "fcw": ("mlp.c_fc.weight", True), "fcb": ("mlp.c_fc.bias", False), "fcprojw": ("mlp.c_proj.weight", True),
          "fcprojb": ("mlp.c_proj.bias", False)}
    for k, (name, transposed) in hf.items():
        for l in range(L):
            want[f"h.{l}.{name}"] = ref[k][l].T if transposed else ref[k][l]
    got = load_file(a.safetensors)
    dtype = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}[a.dtype]
    if set(got) != set(want):
        sys.exit(f"tensor names differ: missing {sorted(set(want) - set(got))[:5]}, extra {sorted(set(got) - set(want))[:5]}")
    for name, w in want.items():
        t = got[name]
        if t.dtype != dtype or tuple(t.shape) != w.shape:
            sys.exit(f"{name}: {t.dtype} {tuple(t.shape)}, expected {dtype} {w.shape}")
        # The reference rounded the same way (round to nearest even), so equality is exact.
        expect = torch.from_numpy(np.ascontiguousarray(w)).to(dtype)
        if not torch.equal(t, expect):
            sys.exit(f"{name}: values differ (max abs {float((t.float() - expect.float()).abs().max()):.3g})")
    print(f"{len(want)} tensors match ({a.dtype})")


if __name__ == "__main__":
    main()
