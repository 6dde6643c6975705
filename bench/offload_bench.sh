#!/usr/bin/env bash
# Optimizer offload to NVMe on the GPT-2 124M shape through `ztrain bench`: 2 ranks under mpirun, one
# thread a rank, bf16 with ZeRO stage 3, the batch of bench/zero_bench.sh (2 ranks x 2 x T 256,
# random tokens). Step time (median of the timed steps) with offload_optimizer.device nvme against
# no offload, the I/O time compute ran beside and did not (the bench's trace), the bytes a
# step moves, and fio's sequential bandwidth on the same folder (io_uring, O_DIRECT, the engine's
# block size and queue depth) to say how long those bytes take at the disk's speed.
#   bench/offload_bench.sh [build-dir] [steps] [nvme-dir]
. "$(dirname "$0")/common.sh"
steps=${2:-4}
nvme=${3:-${TMPDIR:-/tmp}}
swap=$(mktemp -d "$nvme/ztrain_offload_bench.XXXXXX")
trap 'rm -rf "$dir" "$swap"' EXIT
header
echo "== nvme_path $swap on $(df -T "$swap" | awk 'NR==2 {print $1 " (" $2 ")"}')"
config gpt2 "$dir/c.json" bf16.enabled true zero_optimization.stage 3 zero_optimization.sub_group_size 4e6 \
  zero_optimization.offload_optimizer "{\"nvme_path\": \"$swap\", \"buffer_count\": 4, \"pipeline_read\": true, \"pipeline_write\": true}"
bench 2 --config "$dir/c.json" --steps "$steps" --sweep zero_optimization.offload_optimizer.device=none,nvme \
  --out "$dir/offload.json"

# fio on the same folder, both directions, 2 jobs (one a rank), the engine's request size and depth.
for rw in write read; do
  fio --name=yardstick --directory="$swap" --ioengine=io_uring --direct=1 --rw=$rw --bs=1M --iodepth=8 \
    --size=768M --numjobs=2 --group_reporting --output-format=json > "$dir/fio_$rw.json"
done
rm -f "$swap"/yardstick*

/usr/bin/python3 - "$dir" <<'PY'
import json, os, sys
d = sys.argv[1]
none, nvme = json.load(open(os.path.join(d, "offload.json")))["rows"]
fio = {rw: json.load(open(os.path.join(d, f"fio_{rw}.json")))["jobs"][0][rw]["bw_bytes"] for rw in ("write", "read")}
# Bytes a step moves per rank: master, m and v (12 bytes an element) of the rank's shard, read and written.
params = 124475904 + 50304 * 768 - 50257 * 768  # GPT-2 124M with the padded vocabulary
per_rank = params / 2 * 12
io_s = 2 * per_rank / fio["read"] + 2 * per_rank / fio["write"]  # both ranks share the disk
print()
print(f"fio (2 jobs, 1 MiB, depth 8): write {fio['write'] / 1e9:.2f} GB/s, read {fio['read'] / 1e9:.2f} GB/s")
print(f"bytes a step moves: {per_rank / 1e9:.2f} GB read + written per rank; at fio's speed {io_s:.2f} s a step")
print(f"| offload | step ms | x in memory | I/O exposed / hidden ms |")
print(f"|---|---|---|---|")
for r in (none, nvme):
    print(f"| {r['label'].split('=')[1]} | {r['ms_median']:.0f} | {r['ms_median'] / none['ms_median']:.2f} | "
          f"{r['io_exposed_ms']:.0f} / {r['io_hidden_ms']:.0f} |")
print(f"compute step {none['ms_median'] / 1e3:.2f} s vs I/O at fio's speed {io_s:.2f} s: the target (<= 1.2x) "
      f"{'applies' if io_s < none['ms_median'] / 1e3 else 'does not apply'}")
PY
