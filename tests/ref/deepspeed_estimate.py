#!/usr/bin/python3
"""`ztrain estimate`'s DeepSpeed column against DeepSpeed's own estimators.

Usage: deepspeed_estimate.py ZTRAIN SDIST

SDIST is DeepSpeed's source distribution from PyPI (scripts/install-deps.sh downloads it). Its
package cannot be imported here: it needs a CUDA-era torch and a dozen packages, and its sdist
builds against torch. Only four functions matter, and they are plain arithmetic over a module
tree, so they are taken from the sdist's own source, unchanged, by name:
estimate_zero2_model_states_mem_needs (deepspeed/runtime/zero/stage_1_and_2.py),
estimate_zero3_model_states_mem_needs and model_to_params (stage3.py). model_to_params runs
on a torch module tree shaped as GPT-2 in llm.c's layout (Hugging Face's module structure,
padded vocabulary, tied head), built from Debian's torch with every parameter an expanded
view of one element, so that GPT-2 1.5B costs no memory.

For several sizes, world sizes and offload settings, ztrain's JSON must give DeepSpeed's total
parameters and largest layer, and at stages 2 and 3 DeepSpeed's GPU bytes exactly.
Exit status 77 (skipped) with the reason where the sdist or torch is missing.
"""

import ast
import json
import subprocess
import sys
import tarfile
import tempfile

FUNCTIONS = {
    "deepspeed/runtime/zero/stage_1_and_2.py": ["estimate_zero2_model_states_mem_needs"],
    "deepspeed/runtime/zero/stage3.py": ["estimate_zero3_model_states_mem_needs", "model_to_params"],
}


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def deepspeed_functions(sdist):
    """The named top-level functions of the sdist's files, compiled from its source."""
    try:
        tar = tarfile.open(sdist)
    except (OSError, tarfile.TarError) as e:
        skip(f"cannot read DeepSpeed's sdist {sdist} ({e}); scripts/install-deps.sh downloads it")
    found = {}
    with tar:
        for member in tar.getmembers():
            rel = member.name.split("/", 1)[-1]
            if rel not in FUNCTIONS:
                continue
            source = tar.extractfile(member).read().decode()
            for node in ast.parse(source).body:
                if isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS[rel]:
                    namespace = {}
                    exec(compile(ast.Module([node], type_ignores=[]), f"{sdist}:{rel}", "exec"), namespace)
                    found[node.name] = namespace[node.name]
    wanted = [f for names in FUNCTIONS.values() for f in names]
    missing = [f for f in wanted if f not in found]
    if missing:
        sys.exit(f"FAIL: {sdist} has no {', '.join(missing)}: DeepSpeed moved its estimators")
    return found


def gpt2_modules(torch, L, C, Vp, T):
    """GPT-2 as torch modules (Hugging Face's tree: wte, wpe, h.<l>.{ln_1, attn.{c_attn, c_proj},
    ln_2, mlp.{c_fc, c_proj}}, ln_f, lm_head tied to wte), llm.c's padded vocabulary."""
    nn = torch.nn

    def linear(i, o, bias=True):
        return nn.Linear(i, o, bias=bias, device="meta")

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = linear(C, 3 * C), linear(C, C)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.c_proj = linear(C, 4 * C), linear(4 * C, C)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(C, device="meta"), Attention()
            self.ln_2, self.mlp = nn.LayerNorm(C, device="meta"), MLP()

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(Vp, C, device="meta"), nn.Embedding(T, C, device="meta")
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C, device="meta")
            self.lm_head = linear(C, Vp, bias=False)
            self.lm_head.weight = self.wte.weight

    model = GPT2()
    # model_to_params tells parameters apart by data_ptr(), which meta tensors lack: each
    # parameter becomes a view of an element of its own (the tied head keeps wte's).
    real = {}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is None:  # a Linear without bias
                continue
            if id(p) not in real:
                real[id(p)] = nn.Parameter(torch.zeros(1).expand(p.shape))
            module._parameters[name] = real[id(p)]
    return model


def ztrain_estimate(ztrain, dims, world, zero):
    L, H, C, V, Vp, T = dims
    config = {"model": {"n_layer": L, "n_head": H, "n_embd": C, "vocab_size": V, "padded_vocab_size": Vp,
                        "max_seq_len": T},
              "data": {"format": "llmc", "train": "/nonexistent/none_*.bin", "seq_len": min(T, 64)},
              "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": zero}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(config, f)
        f.flush()
        run = subprocess.run([ztrain, "estimate", "--config", f.name, "--world-size", str(world), "--format", "json"],
                             capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        sys.exit(f"FAIL: ztrain estimate {dims} at {world} ranks: {run.stderr}")
    return json.loads(run.stdout)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ztrain, sdist = sys.argv[1:]
    ds = deepspeed_functions(sdist)
    try:
        import torch
    except ImportError as e:
        skip(f"no torch for DeepSpeed's model_to_params ({e}); Debian's python3-torch has it")

    # n_layer, n_head, n_embd, vocab_size, padded_vocab_size, max_seq_len
    sizes = {
        "gpt2-124M": (12, 12, 768, 50257, 50304, 1024),
        "gpt2-1.5B": (48, 25, 1600, 50257, 50304, 1024),  # largest layer: wte
        "bytes-wide": (4, 4, 256, 256, 256, 256),          # largest layer: c_fc
        "bytes-long": (2, 2, 64, 256, 256, 4096),          # largest layer: wpe
    }
    offloads = {
        "none": ({}, False, False),
        "optimizer cpu": ({"offload_optimizer": {"device": "cpu"}}, True, False),
        "optimizer and params nvme": ({"offload_optimizer": {"device": "nvme", "nvme_path": "/nonexistent"},
                                       "offload_param": {"device": "nvme", "nvme_path": "/nonexistent"}}, True, True),
    }
    failures = checks = 0

    def check(what, got, want):
        nonlocal failures, checks
        checks += 1
        if got != want:
            failures += 1
            print(f"FAIL: {what}: ztrain {got}, DeepSpeed {want}")

    for name, dims in sizes.items():
        L, _, C, _, Vp, T = dims
        total, largest = ds["model_to_params"](gpt2_modules(torch, L, C, Vp, T))
        for world in (1, 3, 8, 64):
            for offload, (zero, cpu_offload, cpu_offload_params) in offloads.items():
                e = ztrain_estimate(ztrain, dims, world, {"stage": 3, **zero})
                at = f"{name} at {world} ranks, offload {offload}"
                check(f"{at}: parameters", e["params"], total)
                check(f"{at}: largest layer", e.get("deepspeed_largest_layer"), largest)
                _, zero2 = ds["estimate_zero2_model_states_mem_needs"](
                    total, num_gpus_per_node=world, num_nodes=1, cpu_offload=cpu_offload)
                _, zero3, _ = ds["estimate_zero3_model_states_mem_needs"](
                    total, largest, num_gpus_per_node=world, num_nodes=1, cpu_offload=cpu_offload,
                    cpu_offload_params=cpu_offload_params)
                check(f"{at}: stage 2", e["stages"][2]["deepspeed_model_states"], zero2)
                check(f"{at}: stage 3", e["stages"][3]["deepspeed_model_states"], zero3)
                if name == "gpt2-1.5B" and world == 8 and offload == "none":
                    # The figures DeepSpeed prints for this case: 6.17 GiB and 3.56 GiB.
                    check(f"{at}: stage 2 in GiB", round(zero2 / 2**30, 2), 6.17)
                    check(f"{at}: stage 3 in GiB", round(zero3 / 2**30, 2), 3.56)
    if failures:
        sys.exit(f"{failures} of {checks} checks failed")
    print(f"deepspeed_estimate: {checks} checks agree with DeepSpeed's estimators ({sdist})")


if __name__ == "__main__":
    main()
