#!/usr/bin/env bash
# Checkpoint save and load on the GPT-2 124M shape, measured in one run: 2 ranks under mpirun,
# ZeRO stage 3, bf16, with and without the optimizer states and parameter shards offloaded to
# NVMe. One step, then a save (every rank its shard, fsynced, `latest` moved); then a run that
# resumes from it with the page cache dropped (where permitted) so the load reads the disk. Reports
# seconds and bytes per rank and the bandwidth, against fio's write and read bandwidth on the same
# folder (io_uring, O_DIRECT, 1 MiB, depth 8, one job a rank) in the same run, before and after. Target: saving at
# >= 70% of fio's write bandwidth.
#   bench/checkpoint_bench.sh [build-dir] [dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
where=${2:-${TMPDIR:-/tmp}}
dir=$(mktemp -d)
work=$(mktemp -d "$where/ztrain_checkpoint_bench.XXXXXX")
trap 'rm -rf "$dir" "$work"' EXIT
launch=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
/usr/bin/python3 bench/random_tokens.py "$dir/bench_train_000.bin"  # the timing does not depend on the text
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257, "padded_vocab_size": 50304,
           "max_seq_len": 1024},
 "data": {"format": "llmc", "train": "$dir/bench_train_*.bin", "seq_len": 64},
 "train": {"steps": 1, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 1, "steps_per_print": 1, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "sub_group_size": 1e7,
                       "offload_optimizer": {"nvme_path": "$work"}, "offload_param": {"nvme_path": "$work"}}}
JSON
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null && echo dropped || echo kept; }

echo "== $(date -u +%F), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "== $work on $(df -T "$work" | awk 'NR==2 {print $1 " (" $2 ")"}')"
# fio before and after the runs (this disk's bandwidth drifts): the ratio is against their mean.
yardstick() {
  for rw in write read; do
    fio --name=yardstick --directory="$work" --ioengine=io_uring --direct=1 --rw=$rw --bs=1M --iodepth=8 \
      --size=512M --numjobs=2 --group_reporting --output-format=json > "$dir/fio_${rw}_$1.json"
  done
  rm -f "$work"/yardstick*
}
yardstick before
results="$dir/results"
for mode in memory nvme; do
  off=()
  [ $mode = nvme ] && off=(--set zero_optimization.offload_optimizer.device=nvme
                           --set zero_optimization.offload_param.device=nvme --set zero_optimization.offload_param.max_in_cpu=0)
  ck="$work/ck_$mode"
  "${launch[@]}" -np 2 "$build/ztrain" train --config "$dir/c.json" "${off[@]}" --set checkpoint.dir="$ck" \
    --set checkpoint.save_interval=1 > "$dir/save_$mode.out" 2>&1 || { cat "$dir/save_$mode.out"; exit 1; }
  save_s=$(sed -n 's/^saved checkpoint .* (\([0-9.]*\) s)$/\1/p' "$dir/save_$mode.out")
  bytes=$(stat -c %s "$ck/step_1/rank0.bin")
  cache=$(drop_caches)
  "${launch[@]}" -np 2 "$build/ztrain" train --config "$dir/c.json" "${off[@]}" --set checkpoint.dir="$ck" --resume \
    --steps 1 > "$dir/load_$mode.out" 2>&1 || { cat "$dir/load_$mode.out"; exit 1; }
  load_s=$(sed -n 's/^resumed from .* (\([0-9.]*\) s)$/\1/p' "$dir/load_$mode.out")
  echo "$mode $bytes $save_s $load_s $cache" >> "$results"
  rm -rf "$ck"
done
yardstick after

/usr/bin/python3 - "$dir" <<'PY'
import json, os, sys
d = sys.argv[1]
bw = {(rw, w): json.load(open(os.path.join(d, f"fio_{rw}_{w}.json")))["jobs"][0][rw]["bw_bytes"]
      for rw in ("write", "read") for w in ("before", "after")}
fio = {rw: (bw[rw, "before"] + bw[rw, "after"]) / 2 for rw in ("write", "read")}
print("\nfio (2 jobs, 1 MiB, depth 8), before / after / mean: " + "; ".join(
    f"{rw} {bw[rw, 'before'] / 1e9:.2f} / {bw[rw, 'after'] / 1e9:.2f} / {fio[rw] / 1e9:.2f} GB/s" for rw in ("write", "read")))
print("| states | bytes per rank | save s | save GB/s (2 ranks) | x fio write | load s | load GB/s | x fio read | page cache before load |")
print("|---|---|---|---|---|---|---|---|---|")
for line in open(os.path.join(d, "results")):
    mode, b, s, l, cache = line.split()
    b, s, l = int(b), float(s), float(l)
    ws, rs = 2 * b / s, 2 * b / l
    print(f"| {mode} | {b / 1e6:.0f} MB | {s:.2f} | {ws / 1e9:.2f} | {ws / fio['write']:.2f} | {l:.2f} | {rs / 1e9:.2f} | "
          f"{rs / fio['read']:.2f} | {cache} |")
PY
