# Inputs: config files and values, command-line numbers, sampling, weights to start from, data the
# model cannot take, models no host can hold, and runs stopped by signals. Each names the file,
# key or flag; what must survive (checkpoints, nothing left under nvme_path) is checked after.
in_dir="$dir/inputs"
mkdir -p "$in_dir"
tiny_config "$in_dir/c.json"

# ---- config files and values -----------------------------------------------------------------
printf '{"model": %s%s}' "$(printf '%*s' 100000 '' | tr ' ' '[')" "$(printf '%*s' 100000 '' | tr ' ' ']')" > "$in_dir/deep.json"
probe in_cfg_deep 1 10 "deep.json': arrays or objects nest more than 32 deep" -- "$ztrain" train --config "$in_dir/deep.json"
probe in_set_deep 1 10 "config: --set model: the value's arrays or objects nest more than 32 deep" -- \
  "$ztrain" train --config "$in_dir/c.json" --set "model=$(printf '%*s' 60000 '' | tr ' ' '[')"
# 1.5 million elements (12 MB) where an object belongs: the message shows 60 characters, and costs as much.
{ printf '{"model": ['; seq -s, 1500000; printf ']}'; } > "$in_dir/wide.json"
probe in_cfg_wide 1 10 "config: model: expected an object, got \[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22\.\.\.$" -- \
  "$ztrain" train --config "$in_dir/wide.json"
probe in_cfg_endless 1 10 "config: '/dev/zero' is larger than 16 MiB" -- "$ztrain" train --config /dev/zero
probe in_cfg_empty 1 10 "config: '/dev/null' is not valid JSON" -- "$ztrain" train --config /dev/null
probe in_cfg_folder 1 10 "config: cannot read '$in_dir': Is a directory" -- "$ztrain" train --config "$in_dir"
head -c 1048576 "$ztrain" > "$in_dir/binary.cfg"  # a program's bytes (the whole one passes 16 MiB in some builds)
probe in_cfg_binary 1 10 "binary.cfg' is not valid JSON" -- "$ztrain" train --config "$in_dir/binary.cfg"
probe in_cfg_long_key 1 10 "config: train\.k{1000}: unknown key" -- "$ztrain" train --config "$in_dir/c.json" \
  --set "train.$(printf '%*s' 1000 '' | tr ' ' k)=\"$(printf '%*s' 100000 '' | tr ' ' v)\""
probe in_estimate_deep 1 10 "nest more than 32 deep" -- "$ztrain" estimate --config "$in_dir/deep.json"
# A byte-level llm.c config without padded_vocab_size pads 256 to 256, not to GPT-2's 50304.
probe in_vocab_padding 0 20 "vocab_size 256, padded_vocab_size 256" -- "$ztrain" estimate --config "$in_dir/c.json" \
  --set data.format=llmc --set model.vocab_size=256 --set data.train=/nonexistent/x

# ---- command-line numbers --------------------------------------------------------------------
probe in_steps_huge 2 10 "--steps must be in \[1, 2147483647\], got 4294967301" -- "$ztrain" train --config "$in_dir/c.json" --steps 4294967301
probe in_steps_negative 2 10 "--steps must be in \[1, 2147483647\], got -3" -- "$ztrain" train --config "$in_dir/c.json" --steps -3
probe in_steps_float 2 10 "--steps expects an integer, got '1e3'" -- "$ztrain" train --config "$in_dir/c.json" --steps 1e3
probe in_steps_missing 2 10 "--steps needs a value" -- "$ztrain" train --config "$in_dir/c.json" --steps
probe in_seed_negative 2 10 "--seed expects an integer in \[0, 18446744073709551615\], got '-1'" -- \
  "$ztrain" train --config "$in_dir/c.json" --seed -1
probe in_world_zero 2 10 "--world-size must be in \[1, 16777216\], got 0" -- "$ztrain" estimate --config "$in_dir/c.json" --world-size 0
# The command line through CLI11 (runtime/cli/commands.hpp): help wins over everything after it,
# needs no MPI under mpirun, a single-valued flag given twice takes the last, a bare --resume
# means checkpoint.dir, and an absurd argument is named in a line.
probe cli_help_first 0 10 "Usage: ztrain sample \[OPTIONS\]" -- "$ztrain" sample --checkpoint /nonexistent --help --tokens x
probe cli_help_mpirun 0 30 "Usage: ztrain train \[OPTIONS\]" -- "${mp[@]}" -np 2 "$ztrain" train --help
probe cli_config_format 2 10 "--format must be table, json or markdown, got 'xml'" -- "$ztrain" config --list --format xml
probe cli_flag_twice 0 30 "step +2/2" -- "$ztrain" train --config "$in_dir/c.json" --steps 1 --steps 2
probe cli_resume_bare 1 10 "train.resume: true \(resume from checkpoint.dir\) needs checkpoint.dir" -- \
  "$ztrain" train --config "$in_dir/c.json" --resume
probe cli_long_argument 2 10 "^ztrain: unknown argument '-{2}x{75}\.\.\.'$" -- \
  "$ztrain" train --config "$in_dir/c.json" "--$(printf '%*s' 100000 '' | tr ' ' x)"

# ---- sampling and weights to start from ------------------------------------------------------
"$ztrain" train --config "$in_dir/c.json" --set train.save_model="$in_dir/m.bin" --set checkpoint.dir="$in_dir/ck" \
  --set checkpoint.save_interval=2 > "$in_dir/train.out" 2>&1 || fail "in: the model for the sample probes failed: $(tail -n 3 "$in_dir/train.out")"
probe in_temperature_word 2 10 "--temperature expects a number, got 'abc'" -- "$ztrain" sample --checkpoint "$in_dir/m.bin" --temperature abc
probe in_temperature_negative 2 10 "--temperature must be a finite number >= 0, got -1" -- \
  "$ztrain" sample --checkpoint "$in_dir/m.bin" --temperature -1
probe in_temperature_nan 2 10 "--temperature must be a finite number >= 0, got nan" -- "$ztrain" sample --checkpoint "$in_dir/m.bin" --temperature nan
probe in_temperature_huge 2 10 "--temperature must be a finite number >= 0, got 1e999" -- \
  "$ztrain" sample --checkpoint "$in_dir/m.bin" --temperature 1e999
probe in_tokens_wrap 2 10 "--tokens must be in \[0, 2147483647\], got 4294967301" -- "$ztrain" sample --checkpoint "$in_dir/m.bin" --tokens 4294967301
probe in_topk_zero 2 10 "--top-k must be in \[1, 2147483647\], got 0" -- "$ztrain" sample --checkpoint "$in_dir/m.bin" --top-k 0
probe in_sample_folder 1 10 "is a folder, but neither a ztrain checkpoint" -- "$ztrain" sample --checkpoint "$in_dir"
probe in_sample_endless 1 10 "checkpoint '/dev/zero': bad magic number 0" -- "$ztrain" sample --checkpoint /dev/zero
probe in_sample_not_llmc 1 10 "checkpoint '$in_dir/c.json': " -- "$ztrain" sample --checkpoint "$in_dir/c.json"
probe in_sample_ckpt_root 0 20 "^GNU" -- "$ztrain" sample --checkpoint "$in_dir/ck" --prompt GNU --tokens 20
probe in_sample_ckpt_step 0 20 "^GNU" -- "$ztrain" sample --checkpoint "$in_dir/ck/step_4" --prompt GNU --tokens 20
probe in_sample_binary_prompt 0 20 "" -- "$ztrain" sample --checkpoint "$in_dir/m.bin" --prompt "$(printf '\001\377\200 \t')" --tokens 5
probe in_init_from_ckpt 0 30 "step     4/4" -- "$ztrain" train --config "$in_dir/c.json" --init-from "$in_dir/ck"
probe in_init_from_other 1 20 "config: model.n_embd: 64 disagrees with 32 in the checkpoint '$in_dir/ck'" -- \
  "$ztrain" train --config "$in_dir/c.json" --init-from "$in_dir/ck" --set model.n_embd=64
probe in_init_from_folder 1 20 "is a folder, but neither a ztrain checkpoint" -- "$ztrain" train --config "$in_dir/c.json" --init-from /usr/share
[ -s "$in_dir/ck/latest" ] && [ -s "$in_dir/m.bin" ] || fail "in: sampling or starting from a checkpoint changed it"
# The sample streams: text shows up long before 2^31 - 1 tokens could be written (the first 20
# within 10 s), and a SIGTERM then ends it.
probe in_sample_streams 0 20 "streamed [0-9]+ bytes" -- bash -c '"$0" sample --checkpoint "$1" --prompt GNU --tokens 2147483647 > "$2" &
  for _ in $(seq 100); do [ "$(wc -c < "$2")" -ge 23 ] && break; sleep 0.1; done
  n=$(wc -c < "$2"); kill -TERM $!; wait $!; [ $? -eq 143 ] && [ "$n" -ge 23 ] && echo "streamed $n bytes"' \
  "$ztrain" "$in_dir/m.bin" "$in_dir/stream.txt"

# ---- data the model cannot take --------------------------------------------------------------
/usr/bin/python3 - "$in_dir/bad_train_000.bin" <<'PY'
import struct, sys
tokens = [i % 200 for i in range(5000)]
tokens[3001] = 300
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, len(tokens), *[0] * 253) + struct.pack(f"<{len(tokens)}H", *tokens))
PY
probe in_token_range 1 20 "data: $in_dir/bad_train_000.bin: token 3001 \(byte 7026\) is 300, outside the model's vocabulary \[0, 256\)" -- \
  "$ztrain" train --config "$in_dir/c.json" --set data.format=llmc --set model.vocab_size=256 --steps 100 \
  --train-data "$in_dir/bad_train_000.bin"
probe in_token_range_np2 '!0' 30 "token 3001 \(byte 7026\) is 300" -- "${mp[@]}" -np 2 "$ztrain" train --config "$in_dir/c.json" \
  --set data.format=llmc --set model.vocab_size=256 --steps 100 --train-data "$in_dir/bad_train_000.bin"
probe in_val_batches 0 30 "warning: train.val_batches 100000 is more than the [0-9]+ batches the validation data holds" -- \
  "$ztrain" train --config "$in_dir/c.json" --set train.val_interval=2 --set train.val_batches=100000
probe in_data_device 1 10 "data: /dev/zero: not a regular file or folder" -- "$ztrain" train --config "$in_dir/c.json" --train-data /dev/zero

# ---- models no host can hold -----------------------------------------------------------------
probe in_model_huge 1 10 "config: model: does not fit in this host's memory: 4\.8e\+13 parameters need at least" -- \
  "$ztrain" train --config "$in_dir/c.json" --set model.n_embd=2000000
probe in_model_huge_np2 '!0' 20 "does not fit in this host's memory" -- "${mp[@]}" -np 2 "$ztrain" train --config "$in_dir/c.json" \
  --set model.n_embd=2000000 --set zero_optimization.stage=3
probe in_model_deep 1 10 "does not fit in this host's memory" -- "$ztrain" train --config "$in_dir/c.json" --set model.n_layer=2000000000
probe in_estimate_huge 0 10 "TiB" -- "$ztrain" estimate --config "$in_dir/c.json" --set model.n_embd=2000000

# ---- runs stopped by signals -----------------------------------------------------------------
# An offload run to NVMe stopped by SIGTERM or SIGINT dies by it and leaves nothing under
# nvme_path; mpirun passes SIGINT on to its ranks as SIGTERM.
in_nv="$in_dir/nvme"
mkdir -p "$in_nv"
in_offload="--set zero_optimization={\"stage\":3,\"offload_optimizer\":{\"device\":\"nvme\",\"nvme_path\":\"$in_nv\"},\"offload_param\":{\"device\":\"nvme\",\"nvme_path\":\"$in_nv\",\"max_in_cpu\":0}}"
# stop.sh SIGNAL NP NVME WAIT RUN...: starts RUN (with SIGINT's default action, which a background
# command of a script would otherwise ignore), sends it SIGNAL once NP ranks' swap files and the
# path WAIT ("-": none) exist, and exits as RUN did.
cat > "$in_dir/stop.sh" <<'SH'
sig=$1 np=$2 nv=$3 until=$4
shift 4
env --default-signal=INT "$@" &
for _ in $(seq 200); do
  [ "$(find "$nv" -name '*.swp' | wc -l)" -ge $((2 * np)) ] && { [ "$until" = - ] || [ -e "$until" ]; } && break
  sleep 0.1
done
kill -"$sig" $!
wait $!
SH
for sig in TERM INT; do
  probe "in_offload_sig$sig" $((128 + $(kill -l $sig))) 30 "ztrain: stopped by SIG$sig; its temporary files were removed" -- \
    bash "$in_dir/stop.sh" $sig 1 "$in_nv" - "$ztrain" train --config "$in_dir/c.json" --steps 1000000 $in_offload
  [ -z "$(find "$in_nv" -mindepth 1)" ] || fail "in_offload_sig$sig: left under nvme_path: $(find "$in_nv" -mindepth 1)"
  rm -rf "${in_nv:?}"/*
done
# mpirun passes SIGINT on as SIGTERM; the rank that ends first may see the other killed before it
# speaks, so either rank's word counts, and no rank may leave a file behind.
probe in_offload_mpirun_sigINT '!0' 30 "\[rank [01]\] ztrain: stopped by SIGTERM; its temporary files were removed" -- \
  bash "$in_dir/stop.sh" INT 2 "$in_nv" - "${mp[@]}" -np 2 "$ztrain" train --config "$in_dir/c.json" --steps 1000000 $in_offload
[ -z "$(find "$in_nv" -mindepth 1)" ] || fail "in_offload_mpirun_sigINT: left under nvme_path: $(find "$in_nv" -mindepth 1)"
rm -rf "${in_nv:?}"/*
# Saving a checkpoint every step when SIGTERM comes: `latest` still names a complete one, which resumes.
probe in_ckpt_sigterm 143 30 "stopped by SIGTERM" -- bash "$in_dir/stop.sh" TERM 1 "$in_nv" "$in_dir/ck_sig/step_2" "$ztrain" train --config "$in_dir/c.json" \
  --steps 1000000 $in_offload --set checkpoint.dir="$in_dir/ck_sig" --set checkpoint.save_interval=1
in_latest=$(cat "$in_dir/ck_sig/latest" 2> /dev/null)
[ -n "$in_latest" ] && [ -s "$in_dir/ck_sig/$in_latest/meta.json" ] || fail "in_ckpt_sigterm: latest ('$in_latest') names no complete checkpoint"
probe in_ckpt_sigterm_resume 0 30 "resumed from $in_dir/ck_sig at step ${in_latest#step_}" -- "$ztrain" train --config "$in_dir/c.json" \
  --resume "$in_dir/ck_sig" --steps $((${in_latest#step_} + 1)) $in_offload
[ -z "$(find "$in_nv" -mindepth 1)" ] || fail "in_ckpt_sigterm: left under nvme_path: $(find "$in_nv" -mindepth 1)"
