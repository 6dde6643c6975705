#!/bin/sh
# LoRA under ZeRO against PEFT (PyPI) on transformers, on a tiny random Llama that transformers
# made: with the same starting adapters (PEFT's, read through lora.init_from), 10 AdamW steps of
# ztrain lose what PEFT's loses within 1e-4, for LoRA on q/v and on all linear layers; the adapter
# ztrain exports (--format peft) loads in PEFT and gives PEFT's logits; the merged export
# (--merge-lora) is PEFT's merge_and_unload of it. Then np 1-3 x stages 0-3 x both
# zero_optimization.frozen_params policies equal one rank; offload is bitwise the run without; a
# checkpoint (adapters only) resumes bitwise on the same ranks and within the tolerance on other
# ranks, stage and policy; bf16 holds the frozen model the same under both policies; dropout's
# masks repeat and resume bit for bit; and bad input ends with a message naming it.
# usage: test_lora.sh MPIRUN ZTRAIN PYTHON LORA_PEFT_PY LLAMA_HF_PY
set -u
mpirun=$1 ztrain=$2 python=$3 peft=$4 llama_hf=$5
here=$(dirname "$0")
. "$here/common.sh"

"$python" "$llama_hf" make "$dir/base" --variant llama > "$dir/make.out" 2>&1 || { cat "$dir/make.out"; exit 1; }
"$python" "$peft" shard "$dir/data.bin" --tokens 20000 --vocab 96 || exit 1

# last_loss METRICS: the loss of a metrics file's last step.
last_loss() { "$python" -c "import json, sys; print([json.loads(l) for l in open(sys.argv[1]) if '\"loss\"' in l][-1]['loss'])" "$1"; }

# config TARGETS: the run's config, PEFT's starting adapters in $dir/start.
config() {
  cat > "$dir/c.json" <<JSON
{"model": {"arch": "llama", "init_from": "$dir/base"},
 "data": {"format": "llmc", "train": "$dir/data.bin", "seq_len": 16},
 "train": {"steps": 10, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 6, "steps_per_print": 1,
 "optimizer": {"params": {"lr": 0.01, "weight_decay": 0.01}},
 "lora": {"r": 4, "alpha": 8, "target_modules": $1, "init_from": "$dir/start"},
 "zero_optimization": {"stage3_param_persistence_threshold": 0, "stage3_prefetch_bucket_size": 3000}}
JSON
}

# Against PEFT: losses, the exported adapter's logits, the merged export.
for targets in q_proj,v_proj all-linear; do
  rm -rf "$dir/start" "$dir/ck" "$dir/ours" "$dir/merged" "$dir/theirs"
  "$python" "$peft" init "$dir/base" "$dir/start" --targets "$targets" --r 4 --alpha 8 ||
    { fail "PEFT's init ($targets)"; continue; }
  "$python" "$peft" ref "$dir/base" "$dir/start" "$dir/data.bin" "$dir/theirs" --steps 10 --batch 6 --seq 16 \
    --lr 0.01 --weight-decay 0.01 || { fail "PEFT's training ($targets)"; continue; }
  if [ "$targets" = all-linear ]; then config '"all-linear"'; else config '["q_proj", "v_proj"]'; fi
  # An 11th step: its loss is ztrain's forward with the adapters saved at step 10.
  train "peft_$targets" 1 --steps 11 --set checkpoint.dir="$dir/ck" --set checkpoint.save_interval=10
  "$python" - "$dir/peft_$targets.jsonl" "$dir/theirs.json" "$targets" <<'PY' || fail "losses differ from PEFT's ($targets)"
import json, sys
ours = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l][:10]
theirs = json.load(open(sys.argv[2]))["losses"]
worst = max(abs(a - b) for a, b in zip(ours, theirs))
print(f"{sys.argv[3]}: 10 steps, worst |ztrain - PEFT| loss {worst:.3g}")
sys.exit(0 if len(ours) == len(theirs) == 10 and worst <= 1e-4 else 1)
PY
  "$ztrain" export --checkpoint "$dir/ck/step_10" --format peft --out "$dir/ours" > "$dir/export.out" 2>&1 ||
    fail "export --format peft: $(cat "$dir/export.out")"
  "$ztrain" export --checkpoint "$dir/ck/step_10" --format hf --merge-lora --out "$dir/merged" > "$dir/export.out" 2>&1 ||
    fail "export --merge-lora: $(cat "$dir/export.out")"
  "$python" "$peft" check "$dir/base" "$dir/ours" "$dir/theirs" "$dir/merged" "$dir/data.bin" --batch 6 --seq 16 \
    --tol-logits 1e-4 --index 10 --loss "$(last_loss "$dir/peft_$targets.jsonl")" ||
    fail "PEFT does not read ztrain's exports back as its own ($targets)"
done

# GPT-2 too: Conv1D weights stored (in, out), PEFT's fan_in_fan_out, and its module names
# (c_attn, and c_proj for both the attention's and the MLP's output). The base: a tiny GPT-2 after
# one step, exported from one checkpoint as llm.c's file (for ztrain) and a Hugging Face folder
# (for transformers).
cat > "$dir/g.json" <<JSON
{"model": {"arch": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 32, "vocab_size": 96, "max_seq_len": 64},
 "data": {"format": "llmc", "train": "$dir/data.bin", "seq_len": 16},
 "train": {"steps": 1, "threads": 1, "val_interval": 0}, "train_micro_batch_size_per_gpu": 6,
 "checkpoint": {"dir": "$dir/gck", "save_interval": 1}}
JSON
if "$ztrain" train --config "$dir/g.json" > "$dir/g.out" 2>&1 &&
   "$ztrain" export --checkpoint "$dir/gck" --format hf --out "$dir/gbase" >> "$dir/g.out" 2>&1 &&
   "$ztrain" export --checkpoint "$dir/gck" --format llmc --out "$dir/gbase.bin" >> "$dir/g.out" 2>&1 &&
   "$python" "$peft" init "$dir/gbase" "$dir/gstart" --targets c_attn,c_proj,c_fc --r 4 --alpha 8 >> "$dir/g.out" 2>&1 &&
   "$python" "$peft" ref "$dir/gbase" "$dir/gstart" "$dir/data.bin" "$dir/gtheirs" --steps 10 --batch 6 --seq 16 \
     --lr 0.01 --weight-decay 0.01 >> "$dir/g.out" 2>&1; then
  sed -e "s|\"arch\": \"llama\", \"init_from\": \"$dir/base\"|\"arch\": \"gpt2\", \"init_from\": \"$dir/gbase.bin\"|" \
      -e "s|\"target_modules\": [^,]*, \"init_from\": \"$dir/start\"|\"target_modules\": [\"c_attn\", \"c_proj\", \"c_fc\"], \"init_from\": \"$dir/gstart\"|" \
      "$dir/c.json" > "$dir/gl.json"
  cp "$dir/c.json" "$dir/c_llama.json" && cp "$dir/gl.json" "$dir/c.json"
  train peft_gpt2 1 --steps 11 --set checkpoint.dir="$dir/glck" --set checkpoint.save_interval=10
  cp "$dir/c_llama.json" "$dir/c.json"
  "$python" - "$dir/peft_gpt2.jsonl" "$dir/gtheirs.json" gpt2 <<'PY' || fail "GPT-2's losses differ from PEFT's"
import json, sys
ours = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l][:10]
theirs = json.load(open(sys.argv[2]))["losses"]
worst = max(abs(a - b) for a, b in zip(ours, theirs))
print(f"{sys.argv[3]}: 10 steps, worst |ztrain - PEFT| loss {worst:.3g}")
sys.exit(0 if len(ours) == len(theirs) == 10 and worst <= 1e-4 else 1)
PY
  "$ztrain" export --checkpoint "$dir/glck/step_10" --format peft --out "$dir/gours" > "$dir/export.out" 2>&1 &&
    "$ztrain" export --checkpoint "$dir/glck/step_10" --format hf --merge-lora --out "$dir/gmerged" >> "$dir/export.out" 2>&1 ||
    fail "GPT-2 exports: $(cat "$dir/export.out")"
  # This tiny random GPT-2 turns the two trajectories' 1e-5 differences in the adapters (f32
  # against f64) into 3e-3 in the logits (its layernorms scale up a residual stream of small
  # variance), so against PEFT's trained adapter the logits only agree loosely; ztrain's own loss
  # with its adapters is the tight check.
  "$python" "$peft" check "$dir/gbase" "$dir/gours" "$dir/gtheirs" "$dir/gmerged" "$dir/data.bin" --batch 6 --seq 16 \
    --tol-logits 1e-2 --index 10 --loss "$(last_loss "$dir/peft_gpt2.jsonl")" ||
    fail "PEFT does not read ztrain's GPT-2 exports back as its own"
else
  fail "GPT-2's base or PEFT's reference: $(cat "$dir/g.out")"
fi

# All of ZeRO with all linear layers adapted (the config left by the loop): every rank count,
# stage and frozen_params policy against one rank at stage 0.
for np in 1 2 3; do
  for stage in 0 1 2 3; do
    for policy in sharded replicated; do
      [ "$np" -eq 1 ] && [ "$stage" -eq 0 ] && [ "$policy" = sharded ] && continue
      train "np${np}_s${stage}_$policy" "$np" --set zero_optimization.stage="$stage" \
        --set train_micro_batch_size_per_gpu=$((6 / np)) --set zero_optimization.frozen_params="$policy"
    done
  done
done
s3="--set zero_optimization.stage=3 --set train_micro_batch_size_per_gpu=3"
train off_cpu 2 $s3 --set zero_optimization.offload_optimizer.device=cpu --set zero_optimization.offload_param.device=cpu
train off_nvme 2 $s3 --set zero_optimization.offload_optimizer.device=nvme \
  --set zero_optimization.offload_optimizer.nvme_path="$dir" --set zero_optimization.offload_param.device=nvme \
  --set zero_optimization.offload_param.nvme_path="$dir" --set zero_optimization.offload_param.max_in_cpu=0
train res_a 2 $s3 --steps 5 --set checkpoint.dir="$dir/rk" --set checkpoint.save_interval=5
cp -r "$dir/rk" "$dir/rk3"
train res_b 2 $s3 --set checkpoint.dir="$dir/rk" --set checkpoint.save_interval=5 --resume
train res_np3 3 --set zero_optimization.stage=1 --set train_micro_batch_size_per_gpu=2 \
  --set zero_optimization.frozen_params=replicated --set checkpoint.dir="$dir/rk3" --resume
train bf16_sharded 2 $s3 --set bf16.enabled=true
train bf16_replicated 2 $s3 --set bf16.enabled=true --set zero_optimization.frozen_params=replicated
# LoRA's dropout: masks drawn from the run's seed, the rank and the pass, so a run repeats itself
# bit for bit and a resume continues it; and they do change what is trained.
drop="$s3 --set lora.dropout=0.1"
train drop_a 2 $drop
train drop_b 2 $drop
train drop_r1 2 $drop --steps 5 --set checkpoint.dir="$dir/dk" --set checkpoint.save_interval=5
train drop_r2 2 $drop --set checkpoint.dir="$dir/dk" --set checkpoint.save_interval=5 --resume

"$python" - "$dir" "$here" <<'PY' || fail "a ZeRO run with LoRA differs (see above)"
import json, os, sys
d = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from compare_metrics import load, worst_relative
def lines(name):
    return load(os.path.join(d, name + ".jsonl"))
def numbers(name):
    return [(r.get("step"), r.get("loss"), r.get("grad_norm")) for r in lines(name)]
ref = lines("peft_all-linear")[:10]  # its 11th step checked the export
bad = 0
for np in (1, 2, 3):
    for stage in (0, 1, 2, 3):
        for policy in ("sharded", "replicated"):
            if (np, stage, policy) == (1, 0, "sharded"):
                continue
            name = f"np{np}_s{stage}_{policy}"
            got = lines(name)
            worst, where = worst_relative(ref, got, ("loss", "grad_norm"))
            # The gradient norm within 5e-5, as in test_zero_llama.sh: its last digits follow the
            # order in which the ranks' parts of the batch are summed.
            worst_norm, where_norm = worst_relative(ref, got, ("grad_norm",))
            worst, where = worst_relative(ref, got, ("loss",))
            if len(got) != len(ref) or worst > 1e-5 or worst_norm > 5e-5:
                print(f"{name}: worst relative difference {worst:.2e} at {where} (loss), {worst_norm:.2e} (norm)")
                bad += 1
print(f"23 runs (np 1-3, stages 0-3, frozen_params sharded/replicated) against one rank: {bad} differ")
base = numbers("np2_s3_sharded")
for name in ("off_cpu", "off_nvme", "res_b"):
    got = numbers(name)
    want = [x for x in base if name != "res_b" or x[0] > 5]
    same = got[-len(want):] == want
    print(f"{name}: {'bitwise equal' if same else 'DIFFERS'} to the same run without offload or a stop")
    bad += not same
worst, where = worst_relative([r for r in ref if r["step"] > 5], [r for r in lines("res_np3") if r["step"] > 5],
                              ("loss",))
print(f"res_np3 (stage 1, replicated, from 2 ranks' stage-3 checkpoint): worst relative difference {worst:.2e}")
bad += worst > 1e-5
same = numbers("bf16_sharded") == numbers("bf16_replicated")
print(f"bf16: frozen model sharded and replicated {'bitwise equal' if same else 'DIFFER'}")
bad += not same
drop = numbers("drop_a")
same = drop == numbers("drop_b") and numbers("drop_r2")[-5:] == [x for x in drop if x[0] > 5]
differs = all(a[1] != b[1] for a, b in zip(drop, base))
print(f"dropout 0.1: runs {'repeat bitwise' if same else 'DIFFER'} (and a resume), losses "
      f"{'differ from' if differs else 'EQUAL'} dropout 0's at every step ({drop[0][1]:.4f} against {base[0][1]:.4f})")
bad += not same or not differs
sys.exit(1 if bad else 0)
PY

# Bad input, each named.
expect 1 'lora.target_modules: "qq_proj" matches no module of this llama model (its linear layers: ' -- \
  "$ztrain" train --config "$dir/c.json" --set 'lora.target_modules=["qq_proj"]'
expect 1 'which is not a linear layer of the blocks' -- \
  "$ztrain" train --config "$dir/c.json" --set 'lora.target_modules=["embed_tokens"]'
expect 1 'lora.r: 20 is larger than model.layers.0.self_attn.k_proj (16 x 32) allows' -- \
  "$ztrain" train --config "$dir/c.json" --set lora.r=20 --set lora.target_modules=all-linear
expect 1 "has r 4, this run's lora section r 8" -- "$ztrain" train --config "$dir/c.json" --set lora.r=8
sed 's|, "init_from": "[^"]*start"||' "$dir/c.json" > "$dir/fresh.json"  # adapters from PEFT's init
expect 1 "saved with lora" -- "$ztrain" train --config "$dir/fresh.json" --set checkpoint.dir="$dir/rk" \
  --set 'lora.target_modules=["q_proj"]' --resume
"$python" "$llama_hf" make "$dir/other" --variant llama --seed 7 > /dev/null 2>&1
expect 1 'its adapters were trained on a frozen model' -- "$ztrain" train --config "$dir/c.json" \
  --set checkpoint.dir="$dir/rk" --set model.init_from="$dir/other" --resume
expect 1 'holds LoRA adapters over a frozen model: --format peft writes the adapters' -- \
  "$ztrain" export --checkpoint "$dir/rk" --format hf --out "$dir/x"
expect 1 'other than' -- sh -c "cp -r '$dir/rk' '$dir/rk_other' && sed -i 's|$dir/base|$dir/other|' '$dir/rk_other/step_10/meta.json' && '$ztrain' export --checkpoint '$dir/rk_other' --format hf --merge-lora --out '$dir/x'"
[ -e "$dir/x/model.safetensors" ] && fail "a refused export left a model in '$dir/x'"

finish "LoRA: PEFT's losses, logits and merge; every ZeRO stage, frozen_params policy, offload and resume"
