#!/usr/bin/python3
"""No include points up the layers (ARCHITECTURE.md): the top-level folders, and within runtime/
its rooms; and runtime/ names no concrete model (it reaches models through models/model.hpp and
the factory, models/registry.hpp). Every quoted include of a project header in a library source is
checked against the layer it may use; a violation prints the file, the line and the rule, and
fails. Likewise nothing outside models/ branches on an architecture: no code outside it compares
an arch with a literal (`arch == 'llama'`) or quotes an architecture's name (those the model specs
in models/ register), so a new architecture is a spec, never a branch elsewhere.
    test_layers.py SOURCE_ROOT
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
# What each folder may include besides itself.
FOLDERS = {
    "tensor": set(),
    "kernels": {"tensor"},
    "comm": {"tensor"},
    "offload": {"tensor"},
    "files": {"tensor"},
    "models": {"tensor", "kernels", "files"},
    "runtime": {"tensor", "kernels", "comm", "offload", "files", "models"},
}
# runtime/'s rooms, top first; a room may include the rooms after it, except its peers ("zero" and
# "data" are peers; "text" is the tokenizer, below data), and the files in runtime/ itself (config, trace, file I/O, agreement) use no room.
ROOMS = [["cli"], ["api"], ["plan"], ["train"], ["checkpoint"], ["zero", "data"], ["text"], [""]]
rank = {room: i for i, group in enumerate(ROOMS) for room in group}
# What runtime/ may use of models/: the interface, its dimensions, the factory and the file-format
# adapters. The container readers (GGUF's, for the tokenizer metadata a GGUF file carries beside the
# weights) and the bounded JSON reading every file reader shares live below, in files/.
MODELS_FOR_RUNTIME = {"models/model.hpp", "models/model_dims.hpp", "models/model_spec.hpp", "models/lora.hpp", "models/checkpointing.hpp", "models/init.hpp", "models/registry.hpp", "models/llmc_format.hpp",
                     "models/foreign_formats.hpp", "models/peft_format.hpp"}


def room_of(path):  # "runtime/zero/x.hpp" -> "zero"; "runtime/config.hpp" -> ""
    parts = pathlib.PurePosixPath(path).parts
    return parts[1] if len(parts) > 2 else ""


bad = 0
checked = 0
for folder, allowed in FOLDERS.items():
    for src in sorted((root / folder).rglob("*")):
        if src.suffix not in (".hpp", ".cpp", ".cu", ".cuh", ".h"):
            continue
        rel = src.relative_to(root).as_posix()
        for n, line in enumerate(src.read_text(errors="replace").splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"([a-z_]+)/([^"]+)"', line)
            if not m or m.group(1) not in FOLDERS:
                continue
            checked += 1
            target_folder, target = m.group(1), m.group(1) + "/" + m.group(2)
            why = None
            if target_folder != folder and target_folder not in allowed:
                why = f"{folder}/ may not use {target_folder}/"
            elif folder == "runtime" and target_folder == "models" and target not in MODELS_FOR_RUNTIME:
                why = "runtime/ names no concrete model: use models/model.hpp and models/registry.hpp"
            elif folder == "runtime" and target_folder == "runtime":
                a, b = room_of(rel), room_of(target)
                if a != b and not rank[b] > rank[a]:
                    why = f"runtime/{a or '.'} may not use runtime/{b or '.'} (a room above it or beside it)"
            if why:
                print(f"{rel}:{n}: includes {target}: {why}")
                bad += 1
print(f"{checked} includes checked, {bad} pointing up")

# The architectures' names, as the specs in models/ register them (`arch = "..."`).
archs = set()
for src in sorted((root / "models").glob("*.[ch]pp")):
    archs |= set(re.findall(r'\barch\s*=\s*"(\w+)"', src.read_text(errors="replace")))
archs |= set(re.findall(r'kDefaultModelArch\s*=\s*"(\w+)"', (root / "models" / "model_spec.hpp").read_text()))
if not {"gpt2", "llama"} <= archs:
    print(f"found the architectures {sorted(archs)} in models/, expected gpt2 and llama among them")
    sys.exit(1)
branches = 0
for folder in FOLDERS:
    if folder == "models":
        continue
    for src in sorted((root / folder).rglob("*")):
        rel = src.relative_to(root).as_posix()
        # The tokenizers' own "gpt2" (a GGUF vocabulary's model, a pre-tokenizer's pattern) is
        # a tokenizer's name, not a model's.
        if src.suffix not in (".hpp", ".cpp", ".cu", ".cuh", ".h") or rel.startswith("runtime/text/"):
            continue
        for n, line in enumerate(src.read_text(errors="replace").splitlines(), 1):
            code = re.sub(r'//.*$', "", line)
            named = [a for a in archs if f'"{a}"' in code]
            # Two archs compared (a checkpoint's against the run's) is a check; one against a
            # literal, a branch.
            if re.search(r'\barch(\(\))?\s*[!=]=\s*"|"\s*[!=]=\s*[\w.>-]*arch\b', code) or named:
                print(f"{rel}:{n}: branches on an architecture ({', '.join(named) or 'arch compared'}): ask its ModelSpec (models/model_spec.hpp)")
                branches += 1
print(f"architectures {sorted(archs)}: {branches} named or compared outside models/")
sys.exit(1 if bad or branches else 0)
