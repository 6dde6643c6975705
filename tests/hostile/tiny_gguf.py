#!/usr/bin/python3
"""A tiny Llama as llama.cpp's GGUF file (through the gguf package), whole or broken in one way,
for tests/hostile/40_files.sh: 1 block, n_embd 32, 2 heads (1 key/value head), a vocabulary of 256
(byte-level data trains on it), F32 tensors.

    tiny_gguf.py OUT [good | overlap | vocab | blocks | nan]
      overlap: attn_q's data offset made attn_k's (two tensors over the same bytes)
      vocab:   llama.vocab_size 2147483647 (the embedding has 256 rows)
      blocks:  llama.block_count 2147483647 (the tensors hold one block)
      nan:     one weight of attn_q NaN
"""
import struct
import sys

import gguf
import numpy as np

out, kind = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "good"
C, F, V, H, KV = 32, 48, 256, 2, 1
hd = C // H
rng = np.random.default_rng(7)


def w(*shape):
    return (rng.standard_normal(shape) * 0.05).astype(np.float32)


tensors = {
    "token_embd.weight": w(V, C),
    "blk.0.attn_norm.weight": np.ones(C, np.float32),
    "blk.0.attn_q.weight": w(H * hd, C),
    "blk.0.attn_k.weight": w(KV * hd, C),
    "blk.0.attn_v.weight": w(KV * hd, C),
    "blk.0.attn_output.weight": w(C, H * hd),
    "blk.0.ffn_norm.weight": np.ones(C, np.float32),
    "blk.0.ffn_gate.weight": w(F, C),
    "blk.0.ffn_up.weight": w(F, C),
    "blk.0.ffn_down.weight": w(C, F),
    "output_norm.weight": np.ones(C, np.float32),
}
if kind == "nan":
    tensors["blk.0.attn_q.weight"][1, 3] = np.nan

writer = gguf.GGUFWriter(out, "llama")
writer.add_uint32("llama.block_count", 2147483647 if kind == "blocks" else 1)
writer.add_uint32("llama.embedding_length", C)
writer.add_uint32("llama.feed_forward_length", F)
writer.add_uint32("llama.attention.head_count", H)
writer.add_uint32("llama.attention.head_count_kv", KV)
writer.add_uint32("llama.context_length", 64)
writer.add_uint32("llama.vocab_size", 2147483647 if kind == "vocab" else V)
writer.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
for name, values in tensors.items():
    writer.add_tensor(name, values)
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_tensors_to_file()
writer.close()

if kind == "overlap":
    data = bytearray(open(out, "rb").read())
    reader = gguf.GGUFReader(out)
    offsets = {t.name: t.data_offset - reader.data_offset for t in reader.tensors}

    def offset_field(name):  # just past the tensor info's name: n_dims, dims, type, then the offset
        key = struct.pack("<Q", len(name)) + name.encode()
        at = data.find(key) + len(key)
        n_dims = struct.unpack_from("<I", data, at)[0]
        return at + 4 + 8 * n_dims + 4

    struct.pack_into("<Q", data, offset_field("blk.0.attn_q.weight"), offsets["blk.0.attn_k.weight"])
    open(out, "wb").write(bytes(data))
