#!/usr/bin/env bash
# The GPU checks in one call of the lent machine (see /work/.library/device): builds ztrain in a
# fresh build dir (CUDA on; MPI and io_uring off, which that machine lacks), runs the CUDA kernel
# and NCCL tests, then bench/gpu_kernels (every kernel against the copy and GEMM ceilings),
# bench/gpu_step (the Trainer's GPT-2 step on a fixed batch: the loss falls, MFU) and `ztrain train`
# itself on the GPU (GPT-2 124M, bf16, B=16 T=1024, stage 0 and 3, and stage 0 with cuDNN's
# attention, over a data file), each under a timeout. Full logs go to $OUT; a short table is
# printed last. It carries on past a failing step to the table, and exits 1 if any step failed.
#
# That machine has no Eigen, doctest or nlohmann-json and nothing can be fetched there: run
# scripts/vendor-headers.sh here first and carry `vendor`. Where it has no pkg-config,
# scripts/pkg-config-lite.py reads the vendored .pc files; where its toolkit has no NCCL, the one in
# Python's nvidia-nccl wheel is used, and failing that the build goes on without NCCL (test_nccl is
# then reported as not built); cuDNN likewise from the nvidia-cudnn wheel, and failing that the
# build has no cuDNN attention (its test cases then fail by name).
#
#   usage (repository root): OUT=/some/dir bash bench/gpu_check.sh
#   (ZT_GPU_BUILD: the build dir, /tmp/ztrain-gpu-build; ZT_JOBS: 16; ZT_BUILD_TIMEOUT: 240 s)
set -u
root=$(pwd)
OUT=${OUT:-$root/gpu-check-out}
mkdir -p "$OUT"
build=${ZT_GPU_BUILD:-/tmp/ztrain-gpu-build}
jobs=${ZT_JOBS:-16}
summary=$OUT/summary.txt
: >"$summary"
status=0
note() { echo "$*" | tee -a "$summary"; }

if [ ! -d "$root/vendor/pkgconfig" ]; then
  echo "gpu_check: $root/vendor/pkgconfig missing: run scripts/vendor-headers.sh and carry vendor" >&2
  exit 2
fi
export PKG_CONFIG_PATH=$root/vendor/pkgconfig PKG_CONFIG_LIBDIR=$root/vendor/pkgconfig
command -v pkg-config >/dev/null || export PKG_CONFIG=$root/scripts/pkg-config-lite.py
if command -v meson >/dev/null; then meson=(meson); else meson=(python3 -m mesonbuild.mesonmain); fi
if command -v ninja >/dev/null; then ninja=(ninja); else ninja=(python3 -m ninja); fi

# NCCL and cuDNN from their pip wheels where the toolkit has none: gcc finds them through CPATH
# and LIBRARY_PATH (meson's find_library asks gcc for its search dirs), the loader through
# LD_LIBRARY_PATH. The wheels ship versioned libraries alone (libnccl.so.2, libcudnn.so.9), so an
# unversioned link is made for the linker. cuDNN's frontend headers come in vendor/.
cuda_home=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
from_wheel() {  # name: nccl or cudnn (the module nvidia.NAME, its NAME.h and libNAME.so.*)
  [ -e "$cuda_home/include/$1.h" ] && return
  local dir
  dir=$(python3 -c "import nvidia.$1 as m; print(list(m.__path__)[0])" 2>/dev/null)
  [ -n "$dir" ] && [ -e "$dir/include/$1.h" ] || return
  mkdir -p "/tmp/ztrain-$1-link"
  ln -sf "$(ls "$dir"/lib/lib"$1".so* | head -1)" "/tmp/ztrain-$1-link/lib$1.so"
  export CPATH=$dir/include${CPATH:+:$CPATH}
  export LIBRARY_PATH=/tmp/ztrain-$1-link:$dir/lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  note "$1: from $dir"
}
from_wheel nccl
from_wheel cudnn

# step NAME SECONDS COMMAND...: runs it with its log in $OUT/NAME.log; notes ok / skipped / FAIL.
step() {
  local name=$1 secs=$2
  shift 2
  local t0=$SECONDS
  timeout -k 5 "$secs" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local took=$((SECONDS - t0)) what
  case $rc in
    0) what=ok ;;
    77) what=skipped ;;
    124 | 137) what="FAIL (timeout ${secs}s)"; status=1 ;;
    *) what="FAIL (exit $rc)"; status=1 ;;
  esac
  note "$(printf '%-18s %-22s %4ss' "$name" "$what" "$took")"
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >"$OUT/gpu.log" 2>&1
rm -rf "$build"
opts=(--buildtype=release -Dwerror=false -Dmpi=disabled -During=disabled)
if ! step configure 120 "${meson[@]}" setup "$build" "${opts[@]}" -Dcuda=enabled; then
  mv "$OUT/configure.log" "$OUT/configure-enabled.log"
  rm -rf "$build"
  status=0  # judged by what the second try builds: a missing NCCL shows as test_nccl not built
  step configure 120 "${meson[@]}" setup "$build" "${opts[@]}" -Dcuda=auto
fi
targets=()
for t in tests/test_cuda_kernels tests/test_nccl bench/gpu_kernels bench/gpu_step ztrain; do
  # those this configuration lacks are reported as not built below
  "${ninja[@]}" -C "$build" -t targets all 2>/dev/null | grep -q "^$t:" && targets+=("$t")
done
[ ${#targets[@]} -gt 0 ] && step build "${ZT_BUILD_TIMEOUT:-240}" "${ninja[@]}" -C "$build" -j"$jobs" "${targets[@]}"

run() {  # dir name seconds: the program $build/dir/name, where it was built
  if [ -x "$build/$1/$2" ]; then step "$2" "$3" "$build/$1/$2"; else
    note "$(printf '%-18s %-22s' "$2" "FAIL (not built)")"
    status=1
  fi
}
run tests test_cuda_kernels 150
run tests test_nccl 45
run bench gpu_kernels 90
run bench gpu_step 90

# The runtime end to end: ztrain train on the GPU, GPT-2 124M's shape with llm.c's padded
# vocabulary, over an llm.c token shard written here (random GPT-2 token ids: the step's cost does
# not depend on the text), bf16 (the default on cuda), 12 steps; the last step's line gives
# tokens/s and the FLOP rate, MFU against gpu_step's GEMM ceiling.
mkdir -p /tmp/ztrain-gpu-data
shard=/tmp/ztrain-gpu-data/tokens_train_000.bin  # not under $OUT: nothing to bring back
python3 - "$shard" <<'PY'
import random, struct, sys
n = 4 * 16 * 1025 * 13  # 13 steps of B=16 x (T+1), with room
r = random.Random(5)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *(r.randrange(50257) for _ in range(n))))
PY
train_e2e() {  # name stage attention [activation_checkpointing section]
  local ac=""
  [ -n "${4:-}" ] && ac=", \"activation_checkpointing\": $4"
  cat >"$OUT/$1.json" <<JSON
{"model": {"n_layer": 12, "n_head": 12, "n_embd": 768, "max_seq_len": 1024, "vocab_size": 50257, "padded_vocab_size": 50304},
 "data": {"format": "llmc", "train": "$shard", "seq_len": 1024},
 "train": {"steps": 12, "seed": 5, "val_interval": 0, "device": "cuda", "attention": "${3:-ztrain}"},
 "zero_optimization": {"stage": $2}, "train_micro_batch_size_per_gpu": 16, "steps_per_print": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 6e-4, "weight_decay": 0.1}}, "gradient_clipping": 1.0$ac}
JSON
  if [ -x "$build/ztrain" ]; then step "$1" 120 "$build/ztrain" train --config "$OUT/$1.json" --metrics "$OUT/$1.jsonl"; else
    note "$(printf '%-18s %-22s' "$1" "FAIL (not built)")"
    status=1
  fi
}
train_e2e ztrain_stage0 0
train_e2e ztrain_stage3 3
train_e2e ztrain_cudnn 0 cudnn  # the same as stage 0, attention through cuDNN
# Activation checkpointing on the device: full with the inputs in pinned host memory, and selective
# by op; each must give stage 3's losses bit for bit ([Note: activation checkpointing]).
train_e2e ztrain_ac_full 3 ztrain '{"mode": "full", "cpu_checkpointing": true}'
train_e2e ztrain_ac_op 3 ztrain '{"mode": "selective", "selective_ac_option": "op"}'

echo
echo "==== test cases (doctest) ===="
grep -h "test cases:" "$OUT/test_cuda_kernels.log" 2>/dev/null | tail -1
grep -h -A3 "ERROR\|FAILED" "$OUT/test_cuda_kernels.log" 2>/dev/null | head -20
echo "==== gpu_kernels ===="
tail -44 "$OUT/gpu_kernels.log" 2>/dev/null
echo "==== gpu_step ===="
grep -h "^RESULT\|^#\|LOSS\|gpu_step:" "$OUT/gpu_step.log" 2>/dev/null
echo "==== ztrain train on cuda (GPT-2 124M, bf16, B=16 T=1024; MFU against the GEMM ceiling above) ===="
gemm=$(grep -ho "GEMM ceiling (bf16 8192^3): [0-9.]*" "$OUT/gpu_step.log" 2>/dev/null | awk '{print $NF}')
for n in ztrain_stage0 ztrain_stage3 ztrain_cudnn; do
  line=$(grep -h "^step" "$OUT/$n.log" 2>/dev/null | tail -1)
  gf=$(echo "$line" | grep -o "[0-9.]* GFLOP/s" | awk '{print $1}')
  mfu=$( [ -n "$gf" ] && [ -n "$gemm" ] && awk -v g="$gf" -v c="$gemm" 'BEGIN{printf "%.1f%%", g/1000/c*100}')
  echo "$n: ${line:-no step line} | MFU ${mfu:-?}"
  grep -h "error" "$OUT/$n.log" 2>/dev/null | head -3
done
echo "==== activation checkpointing on cuda: losses against stage 3's, step time and activations against none ===="
for n in ztrain_ac_full ztrain_ac_op; do
  python3 - "$OUT/ztrain_stage3.jsonl" "$OUT/$n.jsonl" "$n" <<'PY' || status=1
import json, statistics, sys
def rows(p):
    try:
        return [json.loads(l) for l in open(p) if '"loss"' in l]
    except OSError:
        return []
ref, got = rows(sys.argv[1]), rows(sys.argv[2])
if not ref or not got:
    sys.exit(print(f"{sys.argv[3]}: no metrics"))
same = [r["loss"] for r in ref] == [r["loss"] for r in got]
ms = lambda rs: statistics.median(r["ms"] for r in rs[1:])
act = lambda rs: rs[-1]["peak_bytes"]["activations"]
print(f"{sys.argv[3]}: losses {'bitwise equal' if same else 'DIFFER'}; step {ms(got) / ms(ref):.2f}x, "
      f"activations {act(got) / act(ref):.2f}x of stage 3 without")
sys.exit(0 if same else 1)
PY
done
echo "==== steps (logs in $OUT) ===="
cat "$summary"
exit $status
