#!/bin/sh
# All of ZeRO on a tiny Llama (grouped-query attention with 2 KV heads for 4 query heads, an
# untied head, both the embedding and the head cut into 2 row-range units, Llama 3.1 rope
# scaling) under real mpirun: np 1-3 x stages 0-3 match stage 0 on one rank within 1e-5; optimizer
# and parameter offload (cpu, nvme) are bitwise equal to the same run without; a checkpoint resumed
# on the same ranks is bitwise equal to the run that never stopped, and one resumed on another
# world size stays within the tolerance; bf16 trains; the model exported as a Hugging Face folder
# from a stage-3 checkpoint loads in transformers with ztrain's weights; estimate and trace run;
# the bytes a stage-0 step sends are the ring's count for the model's padded gradients; Qwen3's
# and Gemma 3's variants of the model match one rank at np 1-3 x stages 0-3 as well.
# usage: test_zero_llama.sh MPIRUN ZTRAIN PYTHON
set -u
mpirun=$1 ztrain=$2 python=$3
here=$(dirname "$0")
. "$here/common.sh"

cat > "$dir/c.json" <<JSON
{"model": {"arch": "llama", "n_layer": 4, "n_head": 4, "n_kv_head": 2, "n_embd": 32, "intermediate_size": 48,
           "tie_word_embeddings": false, "max_seq_len": 32, "rope_theta": 500000, "wte_units": 2,
           "rope_scaling": {"rope_type": "llama3", "factor": 8, "original_max_position_embeddings": 16}},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 20, "threads": 1, "val_interval": 10, "val_batches": 2},
 "train_micro_batch_size_per_gpu": 12, "steps_per_print": 10, "gradient_clipping": 0.5,
 "optimizer": {"params": {"lr": 0.003}},
 "zero_optimization": {"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 9000,
                       "reduce_bucket_size": 9000}}
JSON

train ref 1 --set train.save_model="$dir/ref.safetensors"
for np in 1 2 3; do
  for stage in 0 1 2 3; do
    [ "$np" -eq 1 ] && [ "$stage" -eq 0 ] && continue
    train "np${np}_s${stage}" "$np" --set zero_optimization.stage="$stage" --set train_micro_batch_size_per_gpu=$((12 / np))
  done
done

# Offload: the same numbers, bit for bit.
s3="--set zero_optimization.stage=3 --set train_micro_batch_size_per_gpu=6"
train off_base 2 $s3
train off_cpu 2 $s3 --set zero_optimization.offload_optimizer.device=cpu --set zero_optimization.offload_param.device=cpu
train off_nvme 2 $s3 --set zero_optimization.offload_optimizer.device=nvme \
  --set zero_optimization.offload_optimizer.nvme_path="$dir" --set zero_optimization.offload_param.device=nvme \
  --set zero_optimization.offload_param.nvme_path="$dir" --set zero_optimization.offload_param.max_in_cpu=0

# Resume: stopped at step 10 and resumed on the same 2 ranks (bitwise), and on 3 (tolerance).
train res_a 2 $s3 --steps 10 --set checkpoint.dir="$dir/ck" --set checkpoint.save_interval=10
cp -r "$dir/ck" "$dir/ck3"
train res_b 2 $s3 --set checkpoint.dir="$dir/ck" --set checkpoint.save_interval=10 --resume
train res_np3 3 --set zero_optimization.stage=3 --set train_micro_batch_size_per_gpu=4 --set checkpoint.dir="$dir/ck3" --resume

# bf16 mixed precision at stage 3 trains (its loss falls, and stays near fp32's).
train bf16 2 $s3 --set bf16.enabled=true

"$python" - "$dir" "$here" <<'PY' || fail "a ZeRO run on the Llama model differs (see above)"
import json, os, sys
d = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from compare_metrics import load, worst_relative
def lines(name):
    return load(os.path.join(d, name + ".jsonl"))
ref = lines("ref")
assert len(ref) == 22, len(ref)
bad = 0
# Losses within 1e-5 of one rank. The gradient norm within 5e-5: one step of this run (20) is
# sensitive to summation order, and one rank alone moves it by 1.5e-5 when its batch of 12 is
# accumulated as 2 x 6 (measured), as every rank count's split does.
def check(name, ref, got):
    worst_loss, _ = worst_relative(ref, got, ("loss", "val_loss"))
    worst_norm, _ = worst_relative(ref, got, ("grad_norm",))
    print(f"{name}: worst relative difference {worst_loss:.2e} (losses), {worst_norm:.2e} (gradient norm)")
    return worst_loss > 1e-5 or worst_norm > 5e-5
for np in (1, 2, 3):
    for stage in (0, 1, 2, 3):
        if np == 1 and stage == 0:
            continue
        name = f"np{np}_s{stage}"
        bad += check(name, ref, lines(name))
def numbers(name, keys=("loss", "val_loss", "grad_norm")):
    return [(r.get("step"), tuple(r.get(k) for k in keys)) for r in lines(name)]
for name in ("off_cpu", "off_nvme"):
    same = numbers(name) == numbers("off_base")
    print(f"{name}: {'bitwise equal' if same else 'DIFFERS'} to off_base")
    bad += not same
resumed = numbers("res_b")
tail = [x for x in numbers("off_base") if x[0] is not None and x[0] > 10]
same = [x for x in resumed if x[0] > 10] == tail
print(f"res_b: {'bitwise equal' if same else 'DIFFERS'} to the run that never stopped")
bad += not same
print("res_np3: resumed on 3 ranks from 2 ranks' checkpoint")
bad += check("res_np3", [r for r in ref if r["step"] > 10], [r for r in lines("res_np3") if r["step"] > 10])
# Bytes sent ([Note: bytes sent]): at stage 0 a step all-reduces every unit's full f32 gradients,
# padded to the shard geometry, and the loss: 2(n-1)/n of each, counted as a ring sends them.
C, F, L, V, K, hd = 32, 48, 4, 256, 2, 8
block = 2 * C + (4 + 2 * 2) * hd * C + C * 4 * hd + 3 * F * C
units = [V // K * C] * K + [block] * L + [C] + [V // K * C] * K  # embedding, blocks, final norm, head
for np_ in (2, 3):
    pad = lambda n: -(-n // (np_ * 32)) * np_ * 32
    want = sum(2 * (np_ - 1) * pad(u) * 4 // np_ for u in units) + 2 * (np_ - 1) * 4 // np_
    got = {r["comm_bytes"] for r in lines(f"np{np_}_s0") if "comm_bytes" in r}
    print(f"np{np_}_s0: {got} bytes sent a step, the ring's count {want}")
    bad += got != {want}
b = [r["loss"] for r in lines("bf16") if "loss" in r]
f = [r["loss"] for r in ref if "loss" in r]
print(f"bf16: loss {b[0]:.3f} -> {b[-1]:.3f} (fp32 {f[0]:.3f} -> {f[-1]:.3f})")
bad += not (b[-1] < b[0] - 1.0 and abs(b[-1] - f[-1]) < 0.1 * f[-1])
sys.exit(1 if bad else 0)
PY

# matches_one_rank NAME ARGS...: the model the config and ARGS make, trained at np 1-3 x stages
# 0-3, matches stage 0 on one rank within the same tolerance.
matches_one_rank() {
  model=$1  # train() sets name and np
  shift
  train "${model}_ref" 1 "$@"
  for np in 1 2 3; do
    for stage in 0 1 2 3; do
      [ "$np" -eq 1 ] && [ "$stage" -eq 0 ] && continue
      train "${model}_np${np}_s${stage}" "$np" "$@" --set zero_optimization.stage="$stage" \
        --set train_micro_batch_size_per_gpu=$((12 / np))
    done
  done
  "$python" - "$dir" "$here" "$model" <<'PY' || fail "a ZeRO run on the $model model differs (see above)"
import os, sys
d, name = sys.argv[1], sys.argv[3]
sys.path.insert(0, sys.argv[2])
from compare_metrics import load, worst_relative
ref = load(os.path.join(d, f"{name}_ref.jsonl"))
assert len(ref) == 22, len(ref)
bad = 0
for np in (1, 2, 3):
    for stage in (0, 1, 2, 3):
        if np == 1 and stage == 0:
            continue
        got = load(os.path.join(d, f"{name}_np{np}_s{stage}.jsonl"))
        worst_loss, _ = worst_relative(ref, got, ("loss", "val_loss"))
        worst_norm, _ = worst_relative(ref, got, ("grad_norm",))
        print(f"{name} np{np}_s{stage}: worst relative difference {worst_loss:.2e} (losses), {worst_norm:.2e} (gradient norm)")
        bad += worst_loss > 1e-5 or worst_norm > 5e-5
sys.exit(1 if bad else 0)
PY
}

# Qwen3: the same model with per-head q/k RMSNorm and a head_dim of its own.
matches_one_rank qwen3 --set model.arch=qwen3 --set model.head_dim=16

# Export from the stage-3 checkpoint (2 ranks) as a Hugging Face folder: transformers loads it,
# and its tensors are the one-rank run's saved model (within the ZeRO tolerance).
"$ztrain" export --checkpoint "$dir/ck" --format hf --out "$dir/hf" > "$dir/export.out" 2>&1 ||
  fail "export --format hf: $(cat "$dir/export.out")"
"$python" - "$dir" <<'PY' || fail "transformers does not read the exported Llama back (see above)"
import sys, torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM
d = sys.argv[1]
model = AutoModelForCausalLM.from_pretrained(d + "/hf", torch_dtype=torch.float32)
assert type(model).__name__ == "LlamaForCausalLM", type(model).__name__
c = model.config
assert (c.num_key_value_heads, c.tie_word_embeddings, c.rope_scaling["rope_type"]) == (2, False, "llama3"), c
ref = load_file(d + "/ref.safetensors")
state = model.state_dict()
worst = max(float((state[k] - v).norm() / v.norm()) for k, v in ref.items())
print(f"exported Llama: {len(ref)} tensors, worst relative difference to the one-rank run {worst:.2e}")
ids = torch.arange(0, 32).unsqueeze(0)
assert torch.isfinite(model(ids).logits).all()
sys.exit(0 if worst < 1e-4 and set(ref) == set(state) else 1)
PY

# Split past --max-shard-size as save_pretrained splits (an index and numbered files), which
# transformers reads, and from which ztrain starts again with the same first loss as from the
# single-file export.
"$ztrain" export --checkpoint "$dir/ck" --format hf --out "$dir/hf_split" --max-shard-size 40KB > "$dir/split.out" 2>&1 ||
  fail "export --max-shard-size: $(cat "$dir/split.out")"
[ -s "$dir/hf_split/model.safetensors.index.json" ] && [ "$(ls "$dir/hf_split" | grep -c '^model-0000[0-9]-of-0000[0-9].safetensors$')" -ge 3 ] ||
  fail "export --max-shard-size 40KB did not split the 190 KB model: $(ls "$dir/hf_split")"
"$python" - "$dir" <<'PY' || fail "transformers does not read the split export back (see above)"
import sys, torch
from transformers import AutoModelForCausalLM
d = sys.argv[1]
a = AutoModelForCausalLM.from_pretrained(d + "/hf", torch_dtype=torch.float32).state_dict()
b = AutoModelForCausalLM.from_pretrained(d + "/hf_split", torch_dtype=torch.float32).state_dict()
assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a), "split export differs"
print("split export: the same", len(a), "tensors")
PY
for src in hf hf_split; do
  train "from_$src" 2 $s3 --steps 1 --set model.init_from="$dir/$src" --set train.val_interval=0
done
"$python" - "$dir" <<'PY' || fail "training from the exported folders differs"
import json, sys
d = sys.argv[1]
a, b = (json.loads(open(f"{d}/from_{s}.jsonl").readline()) for s in ("hf", "hf_split"))
print(f"from the export: step-1 loss {a['loss']:.6f}, from the split export {b['loss']:.6f}")
sys.exit(0 if a["loss"] == b["loss"] else 1)
PY
# Each rank reads only its shard at stage 3, so a unit kept gathered (under the persistence
# threshold: the norms here) must be gathered from the shards before its first use: the first loss
# from the folder at stage 3 on 2 ranks equals stage 0's on the same ranks.
train from_hf_s0 2 --steps 1 --set model.init_from="$dir/hf" --set train.val_interval=0 --set train_micro_batch_size_per_gpu=6
train from_hf_kept 2 $s3 --steps 1 --set model.init_from="$dir/hf" --set train.val_interval=0 \
  --set zero_optimization.stage3_param_persistence_threshold=100000
"$python" - "$dir" <<'PY' || fail "a kept unit loaded at stage 3 is not what stage 0 loads"
import json, sys
d = sys.argv[1]
a, b = (json.loads(open(f"{d}/from_hf_{s}.jsonl").readline())["loss"] for s in ("s0", "kept"))
print(f"from the export on 2 ranks: step-1 loss {a:.6f} at stage 0, {b:.6f} at stage 3 with kept units")
sys.exit(0 if abs(a - b) <= 1e-5 * abs(a) else 1)
PY
"$ztrain" export --checkpoint "$dir/ck" --format hf --out "$dir/bad" --max-shard-size 5XB > "$dir/bad.out" 2>&1
[ $? -eq 2 ] && grep -q "max-shard-size expects a size such as 5GB" "$dir/bad.out" || fail "--max-shard-size 5XB: $(cat "$dir/bad.out")"

# estimate and trace work on it unchanged.
"$ztrain" estimate --config "$dir/c.json" --world-size 2 --set zero_optimization.stage=3 > "$dir/est.out" 2>&1 ||
  fail "estimate: $(cat "$dir/est.out")"
grep -q "llama" "$dir/est.out" || fail "estimate does not name the llama model: $(cat "$dir/est.out")"
train traced 2 $s3 --steps 2 --trace "$dir/trace.json"
[ -s "$dir/trace.json" ] || fail "no trace written"

# Gemma 3: GeGLU, (1 + w) norms around attention and the MLP, q/k norms, scaled embeddings, and
# a sliding window of 5 on every other layer (each with its own RoPE base), tied.
"$python" - "$dir/c.json" <<'PY' || fail "cannot write the Gemma 3 config"
import json, sys
c = json.load(open(sys.argv[1]))  # the Llama run's, with Gemma 3's model section
c["model"] = {"arch": "gemma3", "n_layer": 4, "n_head": 4, "n_kv_head": 2, "n_embd": 32, "head_dim": 16,
              "intermediate_size": 48, "max_seq_len": 32, "rope_theta": 1000000, "wte_units": 2,
              "sliding_window": 5, "sliding_window_pattern": 2, "query_pre_attn_scalar": 24}
json.dump(c, open(sys.argv[1], "w"))
PY
matches_one_rank gemma3

finish "Llama under ZeRO: stages 0-3 at np 1-3 match one rank, offload and resume bitwise, export loads in transformers"
