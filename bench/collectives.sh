#!/usr/bin/env bash
# The collectives of MpiCommunicator as nccl-tests prints them, on this host: 2 and 4 ranks, over
# shared memory (btl vader) and over TCP on loopback (btl tcp), f32, plus one bf16 all_reduce. Each
# run measures memcpy bandwidth on rank 0 as its yardstick. pml ob1 is forced so the btl choice
# holds (UCX would otherwise take over). Sizes are capped where a 2-core machine gets slow, so the
# whole script runs in about 10 minutes.
#   bench/collectives.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin="$build/bench/collectives"
MiB=1048576

run() {  # heading, ranks, btl, collectives flags...
  local heading=$1 np=$2 btl=$3
  shift 3
  echo
  echo "== $heading: -np $np, --mca btl $btl, $*"
  local start=$SECONDS
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" --mca pml ob1 --mca btl "$btl" \
    --mca btl_tcp_if_include lo "$bin" "$@"
  echo "== ($((SECONDS - start)) s)"
}

# Above 16 MiB, 5 iterations (and at most 5 warm-ups) instead of 20.
large=(--large-bytes $((16 * MiB)) --large-iters 5)
run "shared memory" 2 self,vader --op all --dtype f32 --max-bytes $((256 * MiB)) "${large[@]}"
run "shared memory, bf16" 2 self,vader --op all_reduce --dtype bf16 --max-bytes $((64 * MiB)) "${large[@]}"
run "shared memory" 4 self,vader --op all --dtype f32 --max-bytes $((64 * MiB)) "${large[@]}"
run "TCP (loopback)" 2 tcp,self --op all --dtype f32 --max-bytes $((64 * MiB)) "${large[@]}"
run "TCP (loopback)" 4 tcp,self --op all --dtype f32 --max-bytes $((32 * MiB)) "${large[@]}"
