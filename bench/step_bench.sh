#!/usr/bin/env bash
# The GPT-2 124M-shape CPU step (B=4, T=256, fp32) against its two yardsticks, in one run:
# Eigen SGEMM 2048^3 (measured inside step_gpt2) and PyTorch CPU on the same shape with AdamW.
#   bench/step_bench.sh [build-dir] [extra step_gpt2 flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
threads=$(nproc)
echo "== ztrain ($threads threads)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$build/bench/step_gpt2" --threads "$threads" --steps 3 --warmup 1 "$@" > "$log"
cat "$log"
ours=$(tail -n 1 "$log")
echo "== PyTorch ($threads threads)"
theirs=$(/usr/bin/python3 bench/torch_step.py --threads "$threads" --steps 3 --warmup 1 2>/dev/null | tail -n 1)
echo "$theirs"
/usr/bin/python3 - "$ours" "$theirs" <<'PY'
import json, sys
o, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"ztrain {o['tokens_per_s']:.1f} tok/s, {o['gflops']:.1f} GFLOP/s = {100*o['gflops']/o['sgemm_gflops']:.0f}% of SGEMM "
      f"{o['sgemm_gflops']:.1f} GFLOP/s; PyTorch {t['tokens_per_s']:.1f} tok/s, {t['gflops']:.1f} GFLOP/s = "
      f"{100*t['gflops']/o['sgemm_gflops']:.0f}% of SGEMM; ztrain/PyTorch = {o['tokens_per_s']/t['tokens_per_s']:.2f}x")
PY
