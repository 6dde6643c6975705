#!/usr/bin/python3
"""transformers loading a GGUF file (gguf_file=, dequantized to float32) as the reference for
ztrain's GGUF reading.

    gguf_ref.py logits GGUF TEXT OUT
        Tokenizes the text file with the GGUF's own tokenizer and runs the model on it: OUT
        (safetensors, float32) holds "tokens" (T, as float) and "logits" (T, V).
    gguf_ref.py hf-logits FOLDER TOKENS_FROM OUT
        The same tokens (TOKENS_FROM, a file the first command wrote) through a Hugging Face model
        folder (ztrain's export): OUT holds "logits".
"""
import os
import sys

import torch
from safetensors.torch import load_file, save_file


def logits_of(model, tokens):
    with torch.no_grad():
        return model(tokens.unsqueeze(0)).logits[0].to(torch.float32)


def main():
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    cmd = sys.argv[1]
    if cmd == "logits":
        path, text_path, out = sys.argv[2:5]
        folder, name = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        # transformers 4.46 reads no tie_word_embeddings from GGUF: a file without output.weight has
        # its head tied to token_embd (llama.cpp's convention), not a fresh random one.
        from gguf import GGUFReader
        tied = not any(t.name == "output.weight" for t in GGUFReader(path).tensors)
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
        config.tie_word_embeddings = tied
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, config=config, torch_dtype=torch.float32,
                                                     attn_implementation="eager")
        with open(text_path, encoding="utf-8") as f:
            ids = tok(f.read(), return_tensors="pt").input_ids[0]
        save_file({"tokens": ids.to(torch.float32), "logits": logits_of(model, ids).contiguous()}, out)
    elif cmd == "hf-logits":
        folder, tokens_from, out = sys.argv[2:5]
        ids = load_file(tokens_from)["tokens"].to(torch.int64)
        model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager")
        save_file({"logits": logits_of(model, ids).contiguous()}, out)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
