#!/usr/bin/env bash
# `ztrain simulate` (runtime/plan/simulate.hpp, [Note: step simulation]):
#   1. the bytes a simulated step sends within and across groups equal what real runs' metrics
#      report for their second step, at np 2 (stages 0-3) and np 4 (stages 0, 1 in bf16, 3, hybrid
#      sharding at stages 2 and 3, hpZ in f32 and bf16): the simulator issues the collectives the
#      engine issues, in the scheduler's order and sizes;
#   2. on a free network the step is its compute, and the ops' flops are the model's count (less
#      the norms' weights, which multiply nothing); with free compute it is its communication;
#      with polled progress it is both end to end; on a nominal device a tiny GPT-2's MFU passes
#      100% (the formula counts its position table) and says why, while HFU stays within it;
#   3. on the H100 cluster of bench/clusters/, hybrid sharding beats a world-wide FULL_SHARD ring
#      at 4096 ranks, and the trace is a Chrome trace of the step;
#   4. bad cluster files and flags are named.
#   tests/test_simulate.sh MPIRUN ZTRAIN CLUSTERS_DIR
set -u
mpirun=$1 ztrain=$2 clusters=$3
here=$(dirname "$0")
. "$here/common.sh"

cat > "$dir/c.json" <<JSON
{"model": {"arch": "llama", "n_layer": 4, "n_head": 4, "n_kv_head": 2, "n_embd": 64, "intermediate_size": 96,
           "tie_word_embeddings": false, "max_seq_len": 32, "wte_units": 2},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 2, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
 "zero_optimization": {"stage3_param_persistence_threshold": 0}}
JSON
# One host of N ranks with some rates: only the bytes matter in check 1.
host() {
  cat > "$dir/host$1.json" <<JSON
{"name": "one host", "devices_per_node": $1, "device": {"flops": 1e10, "memory_bandwidth": 1e10},
 "links": {"intra": {"bandwidth": 1e9, "latency": 1e-6}}}
JSON
}
host 2
host 4
simulate() {  # simulate NAME NP CLUSTER [args...]: the JSON result in $dir/NAME.sim
  name=$1 np=$2 cluster=$3
  shift 3
  "$ztrain" simulate --config "$dir/c.json" --cluster "$cluster" --world-size "$np" --format json "$@" \
    > "$dir/$name.sim" 2> "$dir/$name.err" || fail "simulate $name: $(cat "$dir/$name.err")"
}
field() { /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
step2() { /usr/bin/python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readlines()[1])[sys.argv[2]])" "$1" "$2"; }

# 1. Bytes against real runs.
group="--set zero_optimization.shard_group_size=2"
check_bytes() {  # NAME NP ARGS...
  name=$1 np=$2
  shift 2
  train "$name" "$np" "$@"
  simulate "$name" "$np" "$dir/host$np.json" "$@"
  for k in comm_bytes_intra comm_bytes_inter; do
    real=$(step2 "$dir/$name.jsonl" $k) sim=$(field "$dir/$name.sim" $k)
    [ "$real" = "$sim" ] || fail "$name: $k: the real run's second step sent $real, the simulation $sim"
  done
}
for stage in 0 1 2 3; do check_bytes np2_stage$stage 2 --set zero_optimization.stage=$stage; done
check_bytes np4_stage0 4 --set zero_optimization.stage=0
check_bytes np4_stage1_bf16 4 --set zero_optimization.stage=1 --set bf16.enabled=true
check_bytes np4_stage3 4 --set zero_optimization.stage=3
check_bytes np4_hybrid 4 --set zero_optimization.sharding_strategy=HYBRID_SHARD $group
check_bytes np4_hybrid2 4 --set zero_optimization.sharding_strategy=_HYBRID_SHARD_ZERO2 $group
check_bytes np4_hpz 4 --set zero_optimization.stage=3 --set zero_optimization.zero_hpz_partition_size=2
check_bytes np4_hpz_bf16 4 --set zero_optimization.stage=3 --set zero_optimization.zero_hpz_partition_size=2 \
  --set bf16.enabled=true
inter=$(field "$dir/np4_hybrid.sim" comm_bytes_inter)
[ "$inter" -gt 0 ] || fail "np4_hybrid: nothing sent across groups"

# 2. Free network, free compute.
cat > "$dir/free_net.json" <<JSON
{"devices_per_node": 4, "device": {"flops": 1e9, "memory_bandwidth": 1e30},
 "links": {"intra": {"bandwidth": 1e30, "latency": 0}}}
JSON
cat > "$dir/free_compute.json" <<JSON
{"devices_per_node": 4, "device": {"flops": 1e30, "memory_bandwidth": 1e30},
 "links": {"intra": {"bandwidth": 1e6, "latency": 1e-5}}}
JSON
sed 's/^{/{"progress": "polled", /' "$dir/host4.json" > "$dir/polled.json"
simulate free_net 4 "$dir/free_net.json" --set zero_optimization.stage=3
simulate polled 4 "$dir/polled.json" --set zero_optimization.stage=3
simulate free_compute 4 "$dir/free_compute.json" --set zero_optimization.stage=3
/usr/bin/python3 - "$dir" <<'PY' || fail "free network / free compute: see above"
import json, sys
d = sys.argv[1]
net = json.load(open(d + "/free_net.sim"))
comp = json.load(open(d + "/free_compute.sim"))
polled = json.load(open(d + "/polled.sim"))
bad = []
if net["exposed_comm_s"] > 1e-12: bad.append("free network: exposed %g s" % net["exposed_comm_s"])
if abs(net["step_s"] - net["compute_s"]) > 1e-9 * net["step_s"]: bad.append("free network: step %g != compute %g" % (net["step_s"], net["compute_s"]))
# flops at 1e9/s: the ops' flops; the model's count adds 6 per norm weight per token (4 layers x 2 + 1 of 64).
ops = net["compute_s"] * 1e9
model = net["model_flops"] - 6 * (4 * 2 * 64 + 64) * net["tokens_per_step"]
if abs(ops - model) > 1e-6 * model: bad.append("the ops' flops %g != the model's %g" % (ops, model))
if abs(net["executed_flops"] - ops) > 1e-6 * ops: bad.append("executed flops %g != the ops' %g" % (net["executed_flops"], ops))
if comp["compute_s"] > 1e-9: bad.append("free compute: compute %g s" % comp["compute_s"])
if abs(comp["step_s"] - comp["exposed_comm_s"]) > 1e-9 * comp["step_s"]: bad.append("free compute: step %g != exposed %g" % (comp["step_s"], comp["exposed_comm_s"]))
busy = sum(comp["comm_s"].values())
if abs(comp["step_s"] - busy) > 1e-6 * busy: bad.append("free compute: step %g != the one queue's busy time %g" % (comp["step_s"], busy))
# Polled: every collective runs on the compute clock, so the step is compute and communication end to end.
comm = sum(polled["comm_s"].values())
if abs(polled["step_s"] - polled["compute_s"] - comm) > 1e-9 * polled["step_s"] or abs(polled["exposed_comm_s"] - comm) > 1e-9 * comm:
    bad.append("polled: step %g != compute %g + communication %g (exposed %g)" % (polled["step_s"], polled["compute_s"], comm, polled["exposed_comm_s"]))
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY

# MFU and HFU on a nominal device (flops = bandwidth = 1e9, no efficiencies) and a GPT-2 of 130k
# parameters whose position table (a lookup) the formula counts: MFU passes 100% and the table
# says why; HFU, the flops the ops execute, never does ([Note: MFU and HFU]).
cat > "$dir/nominal.json" <<JSON
{"devices_per_node": 1, "device": {"flops": 1e9, "memory_bandwidth": 1e9}, "links": {"intra": {"bandwidth": 1e9, "latency": 0}}}
JSON
cat > "$dir/tiny_gpt2.json" <<JSON
{"model": {"n_layer": 2, "n_head": 4, "n_embd": 64, "max_seq_len": 256},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 256}, "train_micro_batch_size_per_gpu": 4}
JSON
for ac in none full; do
  args=(--config "$dir/tiny_gpt2.json" --cluster "$dir/nominal.json")
  [ $ac = full ] && args+=(--set 'activation_checkpointing={}')
  "$ztrain" simulate "${args[@]}" --format json > "$dir/nominal_$ac.sim" 2>&1 || fail "nominal $ac: $(cat "$dir/nominal_$ac.sim")"
  "$ztrain" simulate "${args[@]}" > "$dir/nominal_$ac.txt" 2>&1 || fail "nominal $ac: $(cat "$dir/nominal_$ac.txt")"
done
/usr/bin/python3 - "$dir" <<'PY' || fail "MFU and HFU: see above"
import json, sys
d = sys.argv[1]
bad = []
for ac in ("none", "full"):
    s = json.load(open(f"{d}/nominal_{ac}.sim"))
    if not 0 < s["hfu"] <= 1: bad.append(f"{ac}: HFU {s['hfu']:.4f} outside (0, 1]")
    if abs(s["hfu"] - s["executed_flops"] / s["step_s"] / 1e9) > 1e-9: bad.append(f"{ac}: HFU is not the executed flops over the step")
none, full = (json.load(open(f"{d}/nominal_{ac}.sim")) for ac in ("none", "full"))
if not none["mfu"] > 1: bad.append(f"MFU {none['mfu']:.4f}: the case meant to pass 100% does not")
if not full["executed_flops"] > none["executed_flops"]: bad.append("recompute adds no executed flops")
text = open(f"{d}/nominal_none.txt").read()
if "above 100%: the formula counts 6 flops a token for every parameter" not in text: bad.append("the table does not say why MFU passes 100%")
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY

# 3. Llama 3 8B on 4096 H100s: a ring over every rank pays 4095 steps of latency per collective.
cat > "$dir/c.json" <<JSON
{"model": {"arch": "llama", "n_layer": 32, "n_head": 32, "n_kv_head": 8, "n_embd": 4096, "intermediate_size": 14336,
           "vocab_size": 128256, "max_seq_len": 8192, "tie_word_embeddings": false},
 "data": {"format": "llmc", "train": "unused", "seq_len": 4096}, "train": {"device": "cuda"},
 "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
 "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 500000000, "reduce_bucket_size": 500000000,
                       "stage3_max_live_parameters": 1000000000}}
JSON
simulate full 4096 "$clusters/h100_ib.json" --trace "$dir/full.trace.json"
simulate hybrid 4096 "$clusters/h100_ib.json" --set zero_optimization.sharding_strategy=HYBRID_SHARD
full=$(field "$dir/full.sim" step_s) hybrid=$(field "$dir/hybrid.sim" step_s)
/usr/bin/python3 -c "import sys; sys.exit(0 if $hybrid < 0.8 * $full else 1)" ||
  fail "4096 H100s: HYBRID_SHARD's step $hybrid s is not well under FULL_SHARD's $full s"
/usr/bin/python3 - "$dir/full.trace.json" <<'PY' || fail "the simulated trace: see above"
import json, sys
t = json.load(open(sys.argv[1]))
ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
names = {e["name"] for e in ev}
need = ["forward block0", "backward block31", "all_gather block0", "reduce_scatter block31"]
missing = [n for n in need if n not in names]
if missing: print("FAIL: the trace lacks", missing); sys.exit(1)
compute = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"].startswith(("forward ", "backward ")))
if any(b[0] < a[1] - 1e-3 for a, b in zip(compute, compute[1:])): print("FAIL: compute spans overlap"); sys.exit(1)
PY

# 4. Bad input.
expect 2 "simulate needs --cluster FILE" -- "$ztrain" simulate --config "$dir/c.json"
expect 1 "cluster $dir/none.json: cannot open it" -- "$ztrain" simulate --config "$dir/c.json" --cluster "$dir/none.json"
echo '{"devices_per_node": 8,' > "$dir/bad.json"
expect 1 "not valid JSON" -- "$ztrain" simulate --config "$dir/c.json" --cluster "$dir/bad.json"
echo '{"devices_per_node": 8, "device": {"flops": 1e15, "memory_bandwidth": 1e12, "flop": 1}, "links": {"intra": {"bandwidth": 1e11, "latency": 0}}}' > "$dir/bad.json"
expect 1 "unknown key 'device.flop'" -- "$ztrain" simulate --config "$dir/c.json" --cluster "$dir/bad.json"
echo '{"devices_per_node": 8, "device": {"flops": 1e15, "memory_bandwidth": 1e12}, "links": {"intra": {"bandwidth": -1, "latency": 0}}}' > "$dir/bad.json"
expect 1 "'links.intra.bandwidth' must be in" -- "$ztrain" simulate --config "$dir/c.json" --cluster "$dir/bad.json"
echo '{"devices_per_node": 8, "device": {"flops": 1e15, "memory_bandwidth": 1e12}, "links": {}}' > "$dir/bad.json"
expect 1 "'links.intra' is missing" -- "$ztrain" simulate --config "$dir/c.json" --cluster "$dir/bad.json"
echo '{"devices_per_node": 8, "device": {"flops": 1e15, "memory_bandwidth": 1e12}, "links": {"intra": {"bandwidth": 1e11, "latency": 0}}, "progress": "sometimes"}' > "$dir/bad.json"
expect 1 "'progress' must be async or polled, got 'sometimes'" -- "$ztrain" simulate --config "$dir/c.json" --cluster "$dir/bad.json"
echo '{"devices_per_node": 8, "device": {"flops": "fast", "memory_bandwidth": 1e12}, "links": {"intra": {"bandwidth": 1e11, "latency": 0}}}' > "$dir/bad.json"
expect 1 "'device.flops' must be a number" -- "$ztrain" simulate --config "$dir/c.json" --cluster "$dir/bad.json"
expect 1 "shard_group_size" -- "$ztrain" simulate --config "$dir/c.json" --cluster "$clusters/h100_ib.json" \
  --world-size 12 --set zero_optimization.sharding_strategy=HYBRID_SHARD --set zero_optimization.shard_group_size=8
finish "simulate: bytes equal real runs' at np 2 and 4 in every mode, free network and compute, 4096 H100s, bad input"
