#!/usr/bin/python3
"""An instruction set from data every Debian machine has: /var/lib/dpkg/status. Each installed
package becomes one conversation, "What does the Debian package X provide?" answered with its
description (the synopsis and the first paragraph of the long description, at most 60 words).
About one package in ten, chosen by a hash of its name, and the packages named on the command
line (whose answers the main job prints) are held out of training.

    dpkg_sft_data.py OUT_DIR [HELD_OUT_PACKAGE...]
        writes OUT_DIR/train.jsonl and OUT_DIR/heldout.jsonl ({"messages": [...]} lines) and
        prints the counts.
"""
import hashlib
import json
import pathlib
import sys


def packages(status):
    for block in status.split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += "\n" + line[1:]
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields and "Description" in fields:
            yield fields


def answer(p):
    synopsis, _, long = p["Description"].partition("\n")
    paragraph = []
    for line in long.splitlines():
        if line.strip() == ".":
            break
        paragraph.append(line.strip())
    words = " ".join(paragraph).split()
    text = " ".join(words[:60]) + (" ..." if len(words) > 60 else "")
    head = f"The Debian package {p['Package']}: {synopsis or 'no description'}."
    return head + (" " + text if text else "")


def main():
    out = pathlib.Path(sys.argv[1])
    forced = set(sys.argv[2:])
    out.mkdir(parents=True, exist_ok=True)
    train, held = [], []
    for p in packages(pathlib.Path("/var/lib/dpkg/status").read_text(encoding="utf-8", errors="replace")):
        conv = {"messages": [{"role": "user", "content": f"What does the Debian package {p['Package']} provide?"},
                             {"role": "assistant", "content": answer(p)}]}
        out_of_training = p["Package"] in forced or hashlib.sha256(p["Package"].encode()).digest()[0] % 10 == 0
        (held if out_of_training else train).append(json.dumps(conv))
    (out / "train.jsonl").write_text("\n".join(train) + "\n")
    (out / "heldout.jsonl").write_text("\n".join(held) + "\n")
    print(f"dpkg_sft_data: {len(train)} packages to train on, {len(held)} held out, in {out}")


if __name__ == "__main__":
    main()
