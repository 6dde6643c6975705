#!/usr/bin/env bash
# Optimizer offload to NVMe on the GPT-2 124M shape, measured in one run: 2 ranks under mpirun, one
# thread a rank, bf16 with ZeRO stage 3, the batch of bench/zero_bench.sh (2 ranks x 2 x T 256,
# random tokens). Step time (median of the steps after the first) with offload_optimizer.device
# nvme against no offload, the share of I/O time hidden behind compute (from --trace), the bytes a
# step moves, and fio's sequential bandwidth on the same folder (io_uring, O_DIRECT, the engine's
# block size and queue depth) to say how long those bytes take at the disk's speed.
#   bench/offload_bench.sh [build-dir] [steps] [nvme-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
steps=${2:-5}
nvme=${3:-${TMPDIR:-/tmp}}
dir=$(mktemp -d)
swap=$(mktemp -d "$nvme/ztrain_offload_bench.XXXXXX")
trap 'rm -rf "$dir" "$swap"' EXIT
launch=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

/usr/bin/python3 bench/random_tokens.py "$dir/bench_train_000.bin"  # the timing does not depend on the text
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 12, "n_head": 12, "n_embd": 768, "vocab_size": 50257, "padded_vocab_size": 50304,
           "max_seq_len": 1024},
 "data": {"format": "llmc", "train": "$dir/bench_train_*.bin", "seq_len": 256},
 "train": {"steps": $steps, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1, "gradient_clipping": 1.0, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 1e7, "reduce_bucket_size": 1e7,
                       "stage3_param_persistence_threshold": 1e5, "sub_group_size": 4e6,
                       "offload_optimizer": {"nvme_path": "$swap", "buffer_count": 4,
                                             "pipeline_read": true, "pipeline_write": true}}}
JSON

echo "== $(date -u +%F), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "== nvme_path $swap on $(df -T "$swap" | awk 'NR==2 {print $1 " (" $2 ")"}')"
for dev in none nvme; do
  "${launch[@]}" -np 2 "$build/ztrain" train --config "$dir/c.json" \
    --set zero_optimization.offload_optimizer.device=$dev \
    --metrics "$dir/$dev.jsonl" --trace "$dir/$dev.trace.json" > "$dir/$dev.out" 2>&1 || { cat "$dir/$dev.out"; exit 1; }
  grep -E "^step|^trace|offloaded" "$dir/$dev.out" | sed "s/^/$dev: /"
done

# fio on the same folder, both directions, 2 jobs (one a rank), the engine's request size and depth.
for rw in write read; do
  fio --name=yardstick --directory="$swap" --ioengine=io_uring --direct=1 --rw=$rw --bs=1M --iodepth=8 \
    --size=768M --numjobs=2 --group_reporting --output-format=json > "$dir/fio_$rw.json"
done
rm -f "$swap"/yardstick*

/usr/bin/python3 - "$dir" <<'PY'
import json, os, statistics, sys
d = sys.argv[1]
lines = lambda n: [json.loads(l) for l in open(os.path.join(d, n))]
med = lambda m: statistics.median(x["ms"] for x in m[1:]) if len(m) > 1 else m[0]["ms"]
none, nvme = med(lines("none.jsonl")), med(lines("nvme.jsonl"))
fio = {rw: json.load(open(os.path.join(d, f"fio_{rw}.json")))["jobs"][0][rw]["bw_bytes"] for rw in ("write", "read")}
# Bytes a step moves per rank: master, m and v (12 bytes an element) of the rank's shard, read and written.
params = 124475904 + 50304 * 768 - 50257 * 768  # GPT-2 124M with the padded vocabulary
per_rank = params / 2 * 12
io_s = 2 * per_rank / fio["read"] + 2 * per_rank / fio["write"]  # both ranks share the disk
hidden = None
for line in open(os.path.join(d, "nvme.out")):
    if line.startswith("trace") and " io " in line:
        hidden = line.split(" io ", 1)[1].strip()
print()
print(f"fio (2 jobs, 1 MiB, depth 8): write {fio['write'] / 1e9:.2f} GB/s, read {fio['read'] / 1e9:.2f} GB/s")
print(f"bytes a step moves: {per_rank / 1e9:.2f} GB read + written per rank; at fio's speed {io_s:.2f} s a step")
print(f"| offload | step ms | x in memory |")
print(f"|---|---|---|")
print(f"| none | {none:.0f} | 1.00 |")
print(f"| nvme | {nvme:.0f} | {nvme / none:.2f} |")
print(f"I/O hidden behind compute on rank 0: {hidden}")
print(f"compute step {none / 1e3:.2f} s vs I/O at fio's speed {io_s:.2f} s: the target (<= 1.2x) "
      f"{'applies' if io_s < none / 1e3 else 'does not apply'}")
PY
