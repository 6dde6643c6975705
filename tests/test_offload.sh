#!/bin/sh
# Offload under real runs ([Note: optimizer offload], [Note: parameter offload]): training results
# (every step's loss and gradient norm, and the saved model) are bitwise identical with offload
# none, cpu and nvme, for optimizer offload at stages 1-3 and parameter offload at stage 3, fp32
# and bf16, at np 1 and 2, through sub-groups smaller than a unit and the pipeline's variants,
# with the NVMe update behind the next forward (validation passes in between) or done at once.
# Bad situations end with a clear error: nvme_path missing, not a folder, read-only; the disk full
# during a write (RLIMIT_FSIZE, and a real 1 MiB file system where mount is permitted). Swap
# folders are gone after every run, failed ones included.
# usage: test_offload.sh MPIRUN ZTRAIN
set -u
mpirun=$1 ztrain=$2
here=$(dirname "$0")
. "$here/common.sh"
mnt="$dir/small"
trap 'umount "$mnt" 2>/dev/null; rm -rf "$dir"' EXIT
nvme="$dir/nvme"
mkdir -p "$nvme"

# 6 blocks of 12704 parameters; sub-groups of 5000 elements cut every unit's shard in several.
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 6, "n_head": 2, "n_embd": 32, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 8, "threads": 1, "val_interval": 4, "val_batches": 1},
 "train_micro_batch_size_per_gpu": 6, "steps_per_print": 1, "gradient_clipping": 0.5,
 "optimizer": {"params": {"lr": 0.003}},
 "zero_optimization": {"stage3_param_persistence_threshold": 0, "sub_group_size": 5000,
                       "offload_optimizer": {"nvme_path": "$nvme"}, "offload_param": {"nvme_path": "$nvme"}}}
JSON

opt() { echo "--set zero_optimization.offload_optimizer.$1"; }
par() { echo "--set zero_optimization.offload_param.$1"; }
# same NAME REF: NAME's metrics and saved model are REF's, bit for bit.
same() {
  cmp -s "$dir/$2.bin" "$dir/$1.bin" || fail "$1: saved model differs from $2's"
  /usr/bin/python3 "$here/compare_metrics.py" "$dir/$2.jsonl" "$dir/$1.jsonl" --rtol 0 > /dev/null \
    || fail "$1: losses differ from $2's: $(/usr/bin/python3 "$here/compare_metrics.py" "$dir/$2.jsonl" "$dir/$1.jsonl" --rtol 0 2>&1)"
}
run() {  # run NAME NP [args]: trains, saving the model to NAME.bin
  name=$1
  train "$@" --set train.save_model="$dir/$name.bin"
}

for np in 1 2; do
  mb=$((12 / np))
  for prec in f32 bf16; do
    p="--set train_micro_batch_size_per_gpu=$mb"
    [ $prec = bf16 ] && p="$p --set bf16.enabled=true"
    for stage in 1 2 3; do
      s="$p --set zero_optimization.stage=$stage"
      run "np${np}_${prec}_s${stage}" "$np" $s
      run "np${np}_${prec}_s${stage}_cpu" "$np" $s $(opt device=cpu)
      same "np${np}_${prec}_s${stage}_cpu" "np${np}_${prec}_s${stage}"
      run "np${np}_${prec}_s${stage}_nvme" "$np" $s $(opt device=nvme)
      same "np${np}_${prec}_s${stage}_nvme" "np${np}_${prec}_s${stage}"
    done
    s="$p --set zero_optimization.stage=3"
    # Parameters alone; then both, with the reads pipelined through 2 buffers and a host cache
    # that holds some units' shards and not others.
    run "np${np}_${prec}_param_cpu" "$np" $s $(par device=cpu)
    same "np${np}_${prec}_param_cpu" "np${np}_${prec}_s3"
    run "np${np}_${prec}_param_nvme" "$np" $s $(par device=nvme) $(par max_in_cpu=0)
    same "np${np}_${prec}_param_nvme" "np${np}_${prec}_s3"
    run "np${np}_${prec}_both_nvme" "$np" $s $(par device=nvme) $(par max_in_cpu=20000) $(par buffer_count=2) \
      $(opt device=nvme) $(opt pipeline_read=true) $(opt pipeline_write=true) $(opt buffer_count=2)
    same "np${np}_${prec}_both_nvme" "np${np}_${prec}_s3"
  done
done
# The engine's knobs change nothing either: one buffer, small requests over 3 rings, waves; nor
# does the update done at once rather than behind the next forward (overlap_step false).
run np2_aio 2 --set train_micro_batch_size_per_gpu=6 --set zero_optimization.stage=2 $(opt device=nvme) \
  $(opt overlap_step=false) \
  $(opt buffer_count=1) $(opt pipeline_read=true) --set aio.block_size=4096 --set aio.queue_depth=2 \
  --set aio.intra_op_parallelism=3 --set aio.single_submit=true --set aio.overlap_events=false
same np2_aio np2_f32_s2
grep -q "optimizer states offloaded to $nvme/ztrain-[0-9-]*/rank0/optimizer.swp" "$dir/np2_aio.out" \
  || fail "the banner does not say where the optimizer states went: $(head -4 "$dir/np2_aio.out")"

# expect_error NAME PATTERN [args]: a one-rank stage-2 nvme run fails, saying PATTERN.
expect_error() {
  name=$1 pattern=$2
  shift 2
  timeout 60 "$ztrain" train --config "$dir/c.json" --set zero_optimization.stage=2 $(opt device=nvme) "$@" \
    > "$dir/$name.out" 2>&1
  rc=$?
  [ $rc -ne 0 ] && [ $rc -lt 124 ] || fail "$name: expected a failure, exit status $rc"
  grep -q "$pattern" "$dir/$name.out" || fail "$name: expected '$pattern' in: $(tail -3 "$dir/$name.out")"
  if grep -q "Segmentation\|Aborted\|core dumped\|terminate called" "$dir/$name.out"; then
    fail "$name crashed: $(tail -3 "$dir/$name.out")"
  fi
}
# The kernel lets go of a file system a moment after the last io_uring user exits.
unmount() {
  for _ in 1 2 3 4 5 6 7 8 9 10; do umount "$mnt" 2>/dev/null && return 0; sleep 0.3; done
  fail "cannot unmount $mnt"
}
expect_error missing "nvme_path '$dir/none': No such file or directory" $(opt nvme_path="$dir/none")
touch "$dir/file"
expect_error not_dir "nvme_path '$dir/file' is not a directory" $(opt nvme_path="$dir/file")
# The disk fills during the swap file's writes (a file-size limit of 64 blocks; the states are ~900 KiB).
(ulimit -f 64 && expect_error full_fsize "File too large" && [ "$failures" -eq 0 ]) || failures=$((failures + 1))
if mkdir -p "$mnt" && mount -t tmpfs -o size=256k none "$mnt" 2>/dev/null; then
  expect_error full_fs "No space left on device" $(opt nvme_path="$mnt")
  unmount
  mount -t tmpfs -o ro none "$mnt" && expect_error read_only "nvme_path '$mnt' is not writable" $(opt nvme_path="$mnt")
  unmount
else
  echo "mount not permitted here: the full and read-only file system cases are left to RLIMIT_FSIZE"
fi
left=$(find "$nvme" -mindepth 1 | head -3)
[ -z "$left" ] || fail "swap files or folders left behind: $left"
finish "offload checks passed"
