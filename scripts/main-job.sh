#!/usr/bin/env bash
# The main job: installs the dependencies, builds, trains a small byte-level GPT-2 on the license
# texts every Debian machine has (/usr/share/common-licenses) on 2 ranks with ZeRO stage 3, then
# prints a sample from it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# --allow-run-as-root: Open MPI refuses root without it; --bind-to none: each rank's threads may
# use every core it is given; --oversubscribe: 2 ranks even on a 1-core machine.
root=()
[ "$(id -u)" -ne 0 ] || root=(--allow-run-as-root)
mpirun "${root[@]}" --oversubscribe --bind-to none -np 2 build/ztrain train --config configs/licenses.json "$@"
echo "--- sample (ztrain sample --checkpoint build/licenses.bin --prompt 'This License' --tokens 300) ---"
build/ztrain sample --checkpoint build/licenses.bin --prompt "This License" --tokens 300 --top-k 5 --temperature 0.8
