#!/usr/bin/env bash
# The main job: installs the dependencies, builds, trains a small byte-level GPT-2 on the license
# texts every Debian machine has (/usr/share/common-licenses), then prints a sample from it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/ztrain train --config configs/licenses.json "$@"
echo "--- sample (ztrain sample --checkpoint build/licenses.bin --prompt 'This License' --tokens 300) ---"
build/ztrain sample --checkpoint build/licenses.bin --prompt "This License" --tokens 300 --top-k 5 --temperature 0.8
