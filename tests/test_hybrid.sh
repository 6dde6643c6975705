#!/bin/sh
# Hybrid sharding and hpZ ([Note: shard groups] in runtime/zero/groups.hpp) under real mpirun, on
# one host with groups of 2 of 4 ranks, on a tiny Llama (untied head, embedding and head cut in 2):
#   1. FSDP's HYBRID_SHARD and _HYBRID_SHARD_ZERO2, DeepSpeed's MiCS (mics_shard_size) and ZeRO++'s
#      hpZ (zero_hpz_partition_size) train as one rank with the same global batch does, within
#      1e-5 relative (losses, validation losses, gradient norms), also with gradient accumulation,
#      groups of one rank (replication only), offloaded optimizer states, activation checkpointing
#      (hpZ's recompute gathers from the secondary shards) and a saved model; in bf16 within 1% of
#      one rank's bf16 run.
#   2. The bytes each rank sends a step, within and across groups, are what the groups imply
#      (counted as a ring sends them, [Note: bytes sent]): every unit gathered for forward and
#      backward (the last forward's stays gathered into backward) and reduce-scattered, within the
#      group (hybrid, and hpZ's backward gathers) or over every rank; the replicas all-reduce their
#      gradient slices; the loss and the norm go over every rank.
#   3. A checkpoint saved in one mode resumes in another (hybrid -> plain stage 3, plain -> hybrid,
#      hpZ -> _HYBRID_SHARD_ZERO2) and trains on as the run that never stopped; a hybrid checkpoint
#      holds one group's rank files.
#   4. A group size that does not divide the world is refused, naming the key.
# usage: test_hybrid.sh MPIRUN ZTRAIN
set -u
mpirun=$1 ztrain=$2
here=$(dirname "$0")
. "$here/common.sh"

cat > "$dir/c.json" <<JSON
{"model": {"arch": "llama", "n_layer": 4, "n_head": 4, "n_kv_head": 2, "n_embd": 64, "intermediate_size": 96,
           "tie_word_embeddings": false, "max_seq_len": 32, "wte_units": 2},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 6, "threads": 1, "val_interval": 3, "val_batches": 2},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1, "gradient_clipping": 0.5,
 "optimizer": {"params": {"lr": 0.003}},
 "zero_optimization": {"stage3_param_persistence_threshold": 0}}
JSON
group="--set zero_optimization.shard_group_size=2"
hybrid="--set zero_optimization.sharding_strategy=HYBRID_SHARD $group"
hybrid2="--set zero_optimization.sharding_strategy=_HYBRID_SHARD_ZERO2 $group"
plain="--set zero_optimization.stage=3"
hpz="$plain --set zero_optimization.zero_hpz_partition_size=2"
mics="--set zero_optimization.mics_shard_size=2"

# 1. Every mode against one rank.
train ref 1 --set train_micro_batch_size_per_gpu=8 --set train.save_model="$dir/ref.safetensors"
train full 4 $plain
train hybrid 4 $hybrid --set train.save_model="$dir/hybrid.safetensors"
train hybrid2 4 $hybrid2
train mics 4 $mics
train hpz 4 $hpz --set train.save_model="$dir/hpz.safetensors"
train hybrid_accum 2 $hybrid2 --set train_micro_batch_size_per_gpu=2 --set gradient_accumulation_steps=2 \
  --set zero_optimization.shard_group_size=1
train replicate 4 $hybrid --set zero_optimization.shard_group_size=1
train hybrid_offload 4 $hybrid --set zero_optimization.offload_optimizer.device=cpu
train hpz_ac 4 $hpz --set activation_checkpointing.mode=full
train ref_bf16 1 --set train_micro_batch_size_per_gpu=8 --set bf16.enabled=true
train hybrid_bf16 4 $hybrid --set bf16.enabled=true
train hpz_bf16 4 $hpz --set bf16.enabled=true --set activation_checkpointing.mode=full
grep -q "hybrid sharding: 2 groups of 2 ranks" "$dir/hybrid.out" || fail "hybrid banner: $(cat "$dir/hybrid.out")"
grep -q "hpZ: secondary shards within 2 groups of 2 ranks" "$dir/hpz.out" || fail "hpZ banner: $(cat "$dir/hpz.out")"
for m in full hybrid hybrid2 mics hpz replicate hybrid_offload hpz_ac; do
  /usr/bin/python3 "$here/compare_metrics.py" "$dir/ref.jsonl" "$dir/$m.jsonl" --lines 8 > "$dir/$m.cmp" ||
    fail "$m differs from one rank: $(cat "$dir/$m.cmp")"
  echo "$m: $(cat "$dir/$m.cmp")"
done
# Accumulation 2 x 2 ranks x micro 2: the same global batch of 8.
# (Its validation batches are not one rank's: val_batches counts each rank's micro-batches.)
/usr/bin/python3 "$here/compare_metrics.py" "$dir/ref.jsonl" "$dir/hybrid_accum.jsonl" --lines 8 --keys loss,grad_norm > "$dir/accum.cmp" ||
  fail "hybrid with accumulation differs: $(cat "$dir/accum.cmp")"
for m in hybrid_bf16 hpz_bf16; do
  /usr/bin/python3 "$here/compare_metrics.py" "$dir/ref_bf16.jsonl" "$dir/$m.jsonl" --lines 8 --rtol 1e-2 > "$dir/$m.cmp" ||
    fail "$m differs from one rank in bf16: $(cat "$dir/$m.cmp")"
  echo "$m: $(cat "$dir/$m.cmp")"
done
/usr/bin/python3 - "$dir" <<'PY' || fail "a saved model differs from one rank's"
import struct, sys, json
d = sys.argv[1]
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    head.pop("__metadata__", None)
    return {k: struct.unpack(f"<{(v['data_offsets'][1] - v['data_offsets'][0]) // 4}f",
                             raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in head.items()}
ref = tensors(d + "/ref.safetensors")
for name in ("hybrid", "hpz"):
    got = tensors(f"{d}/{name}.safetensors")
    # Adam's first steps move every weight by about lr whatever its gradient's size, so a weight
    # whose tiny gradients were summed in another order can move differently: absolute terms.
    worst = max(abs(a - b) for k in ref for a, b in zip(ref[k], got[k]))
    print(f"{name}.safetensors: worst absolute difference {worst:.2e} to one rank's")
    if set(got) != set(ref) or worst > 1e-4: sys.exit(1)
PY

# 2. Bytes a step, within and across groups, from the units' sizes.
train sizes 1 --set train.steps=1 --set checkpoint.dir="$dir/sizes" --set checkpoint.save_interval=1 \
  --set train.val_interval=0
/usr/bin/python3 - "$dir" <<'PY' || fail "bytes sent within or across groups differ from what the groups imply"
import json, sys
d = sys.argv[1]
units = [u["numel"] for u in json.load(open(f"{d}/sizes/step_1/meta.json"))["units"]]
N, F = 4, 4  # ranks, bytes of an f32
def pad(n, k): return -(-n // (k * 32)) * k * 32
def gather(k):  # a unit's all-gather or reduce-scatter over k ranks sharding it: (k-1) shards
    return [(k - 1) * pad(u, k) // k * F for u in units]
def all_reduce(k, n):  # n elements over k ranks
    return 2 * (k - 1) * n * F // k
def step(k):  # a unit's two gathers (one for the last in forward) and its reduce-scatter
    g = gather(k)
    return 3 * sum(g) - g[-1]
scalars = 2 * all_reduce(N, 1)  # the loss's mean and the norm, over every rank
want = {  # (within groups, across groups); without hybrid or hpZ the groups are the host: all within
    "full": (step(N) + scalars, 0),
    "hybrid": (step(2) + all_reduce(2, 1), sum(all_reduce(2, pad(u, 2) // 2) for u in units) + scalars),
    # hpZ's secondary shards split the buffer padded for every rank in 2
    "hpz": (sum((pad(u, N) // 2) * F for u in units[:-1]), 2 * sum(gather(N)) + scalars),
}
# After a validation (at step 0 and every 3 steps) hpZ's secondary shards are fresh from its forward's gathers,
# the parameters unchanged since: the next step's forward gathers within the group too.
secondary = [(pad(u, N) // 2) * F for u in units]
after_val = {"hpz": (2 * sum(secondary) - secondary[-1], sum(gather(N)) + scalars)}
bad = 0
for name, expected in want.items():
    for r in map(json.loads, open(f"{d}/{name}.jsonl")):
        if "loss" not in r: continue
        intra, inter = after_val[name] if name in after_val and r["step"] % 3 == 1 else expected
        got = (r["comm_bytes_intra"], r["comm_bytes_inter"])
        print(f"{name} step {r['step']}: sent {got} (intra, inter); the groups imply {(intra, inter)}")
        bad += got != (intra, inter)
sys.exit(1 if bad else 0)
PY

# 3. Resume across a change of mode: saved at step 3, trained on to 6 in another.
train ck_hybrid 4 $hybrid --set train.steps=3 --set checkpoint.dir="$dir/ck_hybrid" --set checkpoint.save_interval=3
train ck_plain 4 $plain --set train.steps=3 --set checkpoint.dir="$dir/ck_plain" --set checkpoint.save_interval=3
train ck_hpz 4 $hpz --set train.steps=3 --set checkpoint.dir="$dir/ck_hpz" --set checkpoint.save_interval=3
files=$(cd "$dir/ck_hybrid/step_3" && ls rank*.bin | tr '\n' ' ')
[ "$files" = "rank0.bin rank1.bin " ] || fail "a hybrid checkpoint holds one group's rank files, found: $files"
grep -q '"shard_ranks": 2' "$dir/ck_hybrid/step_3/meta.json" || fail "hybrid meta.json lacks shard_ranks 2"
train res_plain 4 $plain --set train.resume="$dir/ck_hybrid"
train res_hybrid 4 $hybrid --set train.resume="$dir/ck_plain"
train res_hybrid2 4 $hybrid2 --set train.resume="$dir/ck_hpz"
/usr/bin/python3 -c 'import json, sys
for l in open(sys.argv[1]):
    if json.loads(l)["step"] > 3: print(l, end="")' "$dir/ref.jsonl" > "$dir/ref_tail.jsonl"
for m in res_plain res_hybrid res_hybrid2; do
  /usr/bin/python3 "$here/compare_metrics.py" "$dir/ref_tail.jsonl" "$dir/$m.jsonl" --lines 4 > "$dir/$m.cmp" ||
    fail "$m differs from the run that never stopped: $(cat "$dir/$m.cmp")"
  echo "$m: $(cat "$dir/$m.cmp")"
done

# 4. A group that does not divide the world.
expect 1 "zero_optimization.shard_group_size is 3, which does not divide the world size 4" -- \
  timeout 60 "$mpirun" --allow-run-as-root --oversubscribe -np 4 "$ztrain" train --config "$dir/c.json" $hybrid \
  --set zero_optimization.shard_group_size=3
expect 1 "zero_optimization.zero_hpz_partition_size is 3, which does not divide the world size 4" -- \
  timeout 60 "$mpirun" --allow-run-as-root --oversubscribe -np 4 "$ztrain" train --config "$dir/c.json" \
  $plain --set zero_optimization.zero_hpz_partition_size=3

finish "hybrid sharding and hpZ checks passed"
