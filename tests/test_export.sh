#!/bin/sh
# ztrain export and the 16-bit model save ([Note: export formats]): a checkpoint saved at 2 ranks,
# stage 3, with the embedding in 4 units, exported as llm.c's format is the run's own saved model
# byte for byte, and as safetensors holds every Hugging Face GPT-2 tensor with the llm.c file's
# values (read with Python's safetensors); stage3_gather_16bit_weights_on_model_save writes the
# bf16 model into the checkpoint, equal to the saved weights rounded to bf16. Bad exports end with
# a message (no checkpoint, an unknown format).
# usage: test_export.sh MPIRUN ZTRAIN PYTHON CHECK_EXPORT_PY
set -u
mpirun=$1 ztrain=$2 python=$3 check=$4
here=$(dirname "$0")
. "$here/common.sh"
"$python" -c "import safetensors, torch" 2>/dev/null || { echo "Python's safetensors or torch is missing"; exit 1; }

cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 3, "n_head": 2, "n_embd": 32, "max_seq_len": 32, "wte_units": 4},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 6, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 3, "steps_per_print": 1,
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}
JSON
train f32 2 --set checkpoint.dir="$dir/ck" --set checkpoint.save_interval=6 --set train.save_model="$dir/f32.bin"
"$ztrain" export --checkpoint "$dir/ck" --format llmc --out "$dir/export.bin" > "$dir/e1.out" 2>&1 \
  || fail "export llmc: $(cat "$dir/e1.out")"
cmp -s "$dir/f32.bin" "$dir/export.bin" || fail "the llm.c export differs from the run's saved model"
"$ztrain" export --checkpoint "$dir/ck" --format safetensors --out "$dir/export.safetensors" > "$dir/e2.out" 2>&1 \
  || fail "export safetensors: $(cat "$dir/e2.out")"
"$python" "$check" "$dir/export.safetensors" "$dir/f32.bin" || fail "the safetensors export differs (see above)"

# bf16: the model file written with each checkpoint, against the saved (rounded) weights.
train bf16 2 --set bf16.enabled=true --set zero_optimization.stage3_gather_16bit_weights_on_model_save=true \
  --set checkpoint.dir="$dir/ck16" --set checkpoint.save_interval=6 --set train.save_model="$dir/bf16.bin"
[ -f "$dir/ck16/step_6/model.safetensors" ] || fail "no model.safetensors in the bf16 checkpoint"
"$python" "$check" "$dir/ck16/step_6/model.safetensors" "$dir/bf16.bin" --dtype BF16 \
  || fail "the bf16 model save differs (see above)"

"$ztrain" export --checkpoint "$dir/nothing" --format llmc --out "$dir/x.bin" > "$dir/e3.out" 2>&1
[ $? -eq 1 ] && grep -q "no checkpoint in '$dir/nothing'" "$dir/e3.out" || fail "export of no checkpoint: $(cat "$dir/e3.out")"
"$ztrain" export --checkpoint "$dir/ck" --format onnx --out "$dir/x.bin" > "$dir/e4.out" 2>&1
[ $? -eq 2 ] && grep -q "safetensors, llmc or peft" "$dir/e4.out" || fail "export --format onnx: $(cat "$dir/e4.out")"
[ -e "$dir/x.bin" ] && fail "a failed export left its output"
finish "export checks passed"
