#!/usr/bin/python3
"""A Qwen3 Hugging Face folder written as llama.cpp's converter writes it (GGUF, F32): the
general.architecture "qwen3" metadata and llama.cpp's tensor names (token_embd, blk.N.attn_q,
blk.N.attn_q_norm, ...), q and k rows unpermuted (llama.cpp permutes LLaMA's alone), the output
head omitted when tied. For tests/test_llama_hf.cpp, which reads both and compares.

    qwen3_gguf.py FOLDER OUT
"""
import json
import sys

import gguf
import numpy as np
from safetensors.numpy import load_file

BLOCK = {"input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
         "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
         "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
         "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
         "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
         "mlp.down_proj.weight": "ffn_down.weight"}


def gguf_name(name):
    if name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if name == "model.norm.weight":
        return "output_norm.weight"
    if name == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = name.split(".", 3)  # model.layers.<l>.<rest>
    return f"blk.{layer}.{BLOCK[rest]}"


def main():
    folder, out = sys.argv[1:3]
    c = json.load(open(folder + "/config.json"))
    assert c["architectures"] == ["Qwen3ForCausalLM"], c["architectures"]
    a = "qwen3"
    w = gguf.GGUFWriter(out, a)
    w.add_uint32(f"{a}.block_count", c["num_hidden_layers"])
    w.add_uint32(f"{a}.embedding_length", c["hidden_size"])
    w.add_uint32(f"{a}.feed_forward_length", c["intermediate_size"])
    w.add_uint32(f"{a}.attention.head_count", c["num_attention_heads"])
    w.add_uint32(f"{a}.attention.head_count_kv", c["num_key_value_heads"])
    w.add_uint32(f"{a}.attention.key_length", c["head_dim"])
    w.add_uint32(f"{a}.attention.value_length", c["head_dim"])
    w.add_uint32(f"{a}.context_length", c["max_position_embeddings"])
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", c["rms_norm_eps"])
    w.add_float32(f"{a}.rope.freq_base", c["rope_parameters"]["rope_theta"])
    for name, values in load_file(folder + "/model.safetensors").items():
        if c["tie_word_embeddings"] and name == "lm_head.weight":
            continue
        w.add_tensor(gguf_name(name), np.ascontiguousarray(values, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    sys.exit(main())
