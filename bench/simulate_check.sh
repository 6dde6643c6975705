#!/usr/bin/env bash
# `ztrain simulate` against measured steps on this machine: a Llama (4 blocks, C=512, T=256,
# micro-batch 2) on
#   host2   2 ranks on one host (shared memory),
#   host3   3 ranks on one host (shared memory),
#   host4   4 ranks on one host (shared memory),
#   2hosts  4 ranks on two network-namespace hosts joined by a veth limited to 1 Gbit/s by tc
#           (tests/netns_hosts.sh; netem is not in this kernel, so no added delay),
# every ZeRO stage and (4 ranks) hybrid sharding and hpZ. Each setting's cluster file is measured
# here: the links' alpha-beta per collective fitted from bench/collectives runs of the same ranks
# (bench/simulate_fit.py links), the device's flop rate and memory bandwidth from the setting's
# stage-0 run (its units' and optimizer's busy time: bench/simulate_fit.py device) and the host's
# step overhead from the same run (what its exposed time has beyond the simulation's), which is
# the calibration; every other mode is a prediction, and the two-host runs (the same 4 ranks on
# the same 2 cores as host4) take host4's device, so all of them are predictions. Collectives are polled here (the ranks'
# compute threads take both cores), so the cluster files say "progress": "polled". Prints a markdown table of measured against
# simulated step time and exposed communication (rank 0's steps from the third, medians).
# Each mode runs ROUNDS times, the rounds interleaved (every mode once, then again), and each
# measured field is the median over them: one run's exposed time, tens of milliseconds, moves by a
# third between identical runs here, which shifts every prediction through the calibration.
#   [STEPS=24] [ROUNDS=3] bench/simulate_check.sh [build-dir] [out-dir] [settings, default "host2 host3 host4 2hosts"]
# (2hosts takes host4's device: name both).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(cd "${1:-build}" && pwd)
res=${2:-/tmp/simulate_check}
settings=" ${3:-host2 host3 host4 2hosts} "
rm -rf "$res" && mkdir -p "$res"
ztrain=$build/ztrain collectives=$build/bench/collectives fit=$root/bench/simulate_fit.py
mpirun=$(command -v mpirun)
steps=${STEPS:-24} rounds=${ROUNDS:-3}

cat > "$res/c.json" <<JSON
{"model": {"arch": "llama", "n_layer": 4, "n_head": 8, "n_kv_head": 4, "n_embd": 512, "intermediate_size": 1024,
           "tie_word_embeddings": false, "max_seq_len": 256},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 256},
 "train": {"steps": $steps, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
 "zero_optimization": {"stage3_param_persistence_threshold": 0, "overlap_comm": true}}
JSON
group="--set zero_optimization.shard_group_size=2"
declare -A modes=(
  [stage0]="--set zero_optimization.stage=0" [stage1]="--set zero_optimization.stage=1"
  [stage2]="--set zero_optimization.stage=2" [stage3]="--set zero_optimization.stage=3"
  [hybrid]="--set zero_optimization.sharding_strategy=HYBRID_SHARD $group"
  [hybrid2]="--set zero_optimization.sharding_strategy=_HYBRID_SHARD_ZERO2 $group"
  [hpz]="--set zero_optimization.stage=3 --set zero_optimization.zero_hpz_partition_size=2")
coll_args=(--op all --dtype f32 --min-bytes 65536 --max-bytes $((64 << 20)) --large-bytes $((8 << 20)) --large-iters 5)

one_host() {  # NP ARGS...
  local np=$1
  shift
  "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np "$np" "$@"
}

# cluster SETTING NP DEVICES_PER_NODE INTRA_FIT [INTER_FIT [DEVICE_OF]]: $res/SETTING.cluster.json,
# its device calibrated on the setting's stage-0 run, or taken from setting DEVICE_OF's.
cluster() {
  local s=$1 np=$2 d=$3 intra=$4 inter=${5:-} device_of=${6:-}
  [ -n "$device_of" ] || cat > "$res/$s.nominal.json" <<JSON
{"devices_per_node": $d, "device": {"flops": 1e9, "memory_bandwidth": 1e9}, "links": {"intra": {"bandwidth": 1e9, "latency": 0}}}
JSON
  [ -n "$device_of" ] || "$ztrain" simulate --config "$res/c.json" --cluster "$res/$s.nominal.json" --world-size "$np" \
    ${modes[stage0]} --format json > "$res/$s.stage0.nominal.sim"
  /usr/bin/python3 - "$res" "$s" "$d" "$intra" "$inter" "$fit" "$ztrain" "$np" "$device_of" <<'PY'
import json, subprocess, sys
res, s, d, intra, inter, fit, ztrain, np, device_of = sys.argv[1:10]
run = lambda *a: json.loads(subprocess.run([sys.executable, fit, *a], check=True, capture_output=True, text=True).stdout)
if device_of:
    device = json.load(open(f"{res}/{device_of}.cluster.json"))["device"]
else:
    device = run("device", f"{res}/{s}.stage0.measured", f"{res}/{s}.stage0.nominal.sim")
def link(path):
    c = run("links", path)
    return {"bandwidth": c["all_reduce"]["bandwidth"], "latency": c["all_reduce"]["latency"], "collectives": c}
# Every run here polls its collectives (train.comm_progress "auto": the ranks' compute threads take
# both cores).
c = {"name": f"this machine, {s}", "devices_per_node": int(d), "device": device, "links": {"intra": link(intra)},
     "progress": "polled"}
if inter:
    c["links"]["inter"] = link(inter)
json.dump(c, open(f"{res}/{s}.cluster.json", "w"), indent=1)
if not device_of:  # the host's step overhead, from the same calibration run
    subprocess.run([ztrain, "simulate", "--config", f"{res}/c.json", "--cluster", f"{res}/{s}.cluster.json",
                    "--world-size", np, "--set", "zero_optimization.stage=0", "--format", "json"],
                   check=True, stdout=open(f"{res}/{s}.stage0.calibrated.sim", "w"))
    c["device"]["step_overhead"] = run("overhead", f"{res}/{s}.stage0.measured", f"{res}/{s}.stage0.calibrated.sim")
    json.dump(c, open(f"{res}/{s}.cluster.json", "w"), indent=1)
PY
}

measure() {  # SETTING MODE: the rounds' metrics and traces into $res/SETTING.MODE.measured
  local runs=() r
  for r in $(seq "$rounds"); do runs+=("$res/$1.$2.r$r.jsonl" "$res/$1.$2.r$r.trace.json"); done
  /usr/bin/python3 "$fit" measured "${runs[@]}" > "$res/$1.$2.measured" || echo "no measurement for $1 $2"
}

predict() {  # SETTING NP MODE...
  local s=$1 np=$2
  shift 2
  for m in "$@"; do
    # shellcheck disable=SC2086
    "$ztrain" simulate --config "$res/c.json" --cluster "$res/$s.cluster.json" --world-size "$np" ${modes[$m]} \
      --trace "$res/$s.$m.sim.trace.json" --format json > "$res/$s.$m.sim"
    /usr/bin/python3 "$fit" compare "$s $m" "$res/$s.$m.measured" "$res/$s.$m.sim" >> "$res/table.md"
  done
}

echo "| setting, mode | measured step | simulated | error | measured exposed comm | simulated | error |" > "$res/table.md"
echo "|---|---:|---:|---:|---:|---:|---:|" >> "$res/table.md"

# One host.
for np in 2 3 4; do
  s=host$np
  [[ $settings == *" $s "* ]] || continue
  one_host "$np" "$collectives" "${coll_args[@]}" > "$res/$s.coll.txt" 2>&1
  ms="stage0 stage1 stage2 stage3"
  [ "$np" -eq 4 ] && ms="$ms hybrid hybrid2 hpz"
  for r in $(seq "$rounds"); do
    for m in $ms; do
      # shellcheck disable=SC2086
      one_host "$np" "$ztrain" train --config "$res/c.json" ${modes[$m]} --metrics "$res/$s.$m.r$r.jsonl" \
        --trace "$res/$s.$m.r$r.trace.json" > "$res/$s.$m.r$r.out" 2>&1 || echo "$s $m failed: $(tail -3 "$res/$s.$m.r$r.out")"
    done
  done
  for m in $ms; do measure "$s" "$m"; done
  cluster "$s" "$np" "$np" "$res/$s.coll.txt"
  # shellcheck disable=SC2086
  predict "$s" "$np" $ms
done

# Two hosts over a 1 Gbit/s veth.
tests_dir=$root/tests
skip() { echo "2hosts skipped: $*"; exit 0; }
fail() { echo "2hosts: $*"; }
[[ $settings == *" 2hosts "* ]] && (
  . "$tests_dir/netns_hosts.sh"
  for ns in $nsa $nsb; do
    ip netns exec "$ns" tc qdisc add dev $if root tbf rate 1gbit burst 256kb latency 100ms || skip "no tc tbf"
  done
  launch_timeout=300
  s=2hosts
  launch "$res/$s.coll.txt" "$hosts" "$collectives" "${coll_args[@]}"
  # Within a host: two ranks over shared memory, as a hybrid or hpZ group of 2 runs them.
  one_host 2 "$collectives" "${coll_args[@]}" > "$res/$s.intra.coll.txt" 2>&1
  ms="stage0 stage2 stage3 hybrid hpz"
  for r in $(seq "$rounds"); do
    for m in $ms; do
      # shellcheck disable=SC2086
      launch "$res/$s.$m.r$r.out" "$hosts" "$ztrain" train --config "$res/c.json" ${modes[$m]} \
        --metrics "$res/$s.$m.r$r.jsonl" --trace "$res/$s.$m.r$r.trace.json"
      [ "$rc" -eq 0 ] || echo "$s $m failed: $(tail -3 "$res/$s.$m.r$r.out")"
    done
  done
  for m in $ms; do measure "$s" "$m"; done
  # The same 4 ranks on the same 2 cores as host4: its calibration, so every run here is a prediction.
  cluster "$s" 4 2 "$res/$s.intra.coll.txt" "$res/$s.coll.txt" host4
  # shellcheck disable=SC2086
  predict "$s" 4 $ms
)
cat "$res/table.md"
