#!/usr/bin/env bash
# The GPT-2 124M-shape or SmolLM2-135M-shape CPU step (B=4, T=256, fp32, one process, all cores)
# against its yardsticks, in one run on one machine:
#   - SGEMM 2048^3 (and the step's own GEMM shapes) through every library at hand: Eigen, OpenBLAS
#     and BLIS (build/bench/sgemm), MKL through PyTorch 2.x (bench/sgemm_torch.py), and the
#     build's own threaded sgemm (inside step_gpt2);
#   - the same training step (AdamW) under PyTorch 2.x from PyPI (MKL; scripts/install-peers.sh)
#     and, for GPT-2, PyTorch 1.13 from Debian (OpenBLAS); SmolLM2's under transformers'
#     LlamaForCausalLM on PyTorch 2.x (bench/torch_llama_step.py).
# Ends with ztrain's tokens/s against each PyTorch and its GFLOP/s against the fastest SGEMM.
#   bench/step_bench.sh [build-dir] [gpt2|smollm2] [extra step_gpt2 flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
model=gpt2
case "${1:-}" in gpt2|smollm2) model=$1; shift ;; esac
smollm2=(--llama 1 --layers 30 --heads 9 --kv-heads 3 --channels 576 --ffn 1536 --vocab 49152 --padded-vocab 49152)
threads=$(nproc)
peers=$(scripts/install-peers.sh | tail -n 1)
multiarch=$(gcc -print-multiarch)
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

echo "== $(date -u +%F), $threads cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "== SGEMM ($threads threads)"
libs=()
for lib in openblas=/usr/lib/$multiarch/openblas-pthread/libopenblas.so.0 blis=/usr/lib/$multiarch/blis-openmp/libblis.so.4; do
  [ -e "${lib#*=}" ] && libs+=(--lib "$lib")
done
"$build/bench/sgemm" --threads "$threads" "${libs[@]}" > "$log/sgemm.jsonl"
"$peers" bench/sgemm_torch.py --threads "$threads" >> "$log/sgemm.jsonl"
echo "== ztrain, $model ($threads threads)"
if [ "$model" = smollm2 ]; then
  "$build/bench/step_gpt2" "${smollm2[@]}" --threads "$threads" --steps 3 --warmup 1 "$@" | tee "$log/ztrain.out"
  echo "== transformers on PyTorch 2.x, PyPI ($threads threads)"
  "$peers" bench/torch_llama_step.py --threads "$threads" --steps 3 --warmup 1 2> "$log/torch2.err" | tee "$log/torch2.out" ||
    { tail "$log/torch2.err"; exit 1; }
else
  "$build/bench/step_gpt2" --threads "$threads" --steps 3 --warmup 1 "$@" | tee "$log/ztrain.out"
  echo "== PyTorch 2.x, PyPI ($threads threads)"
  "$peers" bench/torch_step.py --threads "$threads" --steps 3 --warmup 1 2> "$log/torch2.err" | tee "$log/torch2.out" ||
    { tail "$log/torch2.err"; exit 1; }
  echo "== PyTorch 1.13, Debian ($threads threads)"
  /usr/bin/python3 bench/torch_step.py --threads "$threads" --steps 3 --warmup 1 2> "$log/torch1.err" | tee "$log/torch1.out" ||
    { tail "$log/torch1.err"; exit 1; }
fi

/usr/bin/python3 - "$log" "$model" <<'PY'
import json, os, sys
d, model = sys.argv[1], sys.argv[2]
def last(name):
    return json.loads(open(os.path.join(d, name)).read().strip().splitlines()[-1])
rates = {}
for line in open(os.path.join(d, "sgemm.jsonl")):
    r = json.loads(line)
    rates.setdefault(r["lib"], {})[r["shape"]] = r["gflops"]
o, t2 = last("ztrain.out"), last("torch2.out")
t1 = last("torch1.out") if os.path.exists(os.path.join(d, "torch1.out")) else None
rates[f"ztrain sgemm ({o['gemm_library']}, one OpenMP pool)"] = {"square": o["sgemm_gflops"]}
shapes = list(next(iter(rates.values())).keys())
print()
print("| SGEMM GFLOP/s | " + " | ".join(shapes) + " |")
print("|---|" + "---|" * len(shapes))
for lib, r in rates.items():
    print(f"| {lib} | " + " | ".join(str(r.get(s, "")) for s in shapes) + " |")
fast_lib, fast = max(((lib, r["square"]) for lib, r in rates.items()), key=lambda x: x[1])
print()
print("| impl | tok/s | GFLOP/s | % of fastest SGEMM | ztrain / impl |")
print("|---|---|---|---|---|")
for name, r in (("ztrain (" + o["gemm_library"] + ")", o), (f"PyTorch 2.x (PyPI)", t2), ("PyTorch 1.13 (Debian)", t1)):
    if r is None:
        continue
    print(f"| {name} | {r['tokens_per_s']:.1f} | {r['gflops']:.1f} | {100 * r['gflops'] / fast:.0f}% | "
          f"{o['tokens_per_s'] / r['tokens_per_s']:.2f}x |")
print(f"\nfastest SGEMM 2048^3: {fast_lib} {fast:.1f} GFLOP/s; ztrain step {o['gflops']:.1f} GFLOP/s = "
      f"{100 * o['gflops'] / fast:.0f}% of it (target >= {70 if model == 'smollm2' else 75}%); ztrain / PyTorch 2.x = "
      f"{o['tokens_per_s'] / t2['tokens_per_s']:.2f}x (target >= 1.1x)")
PY
