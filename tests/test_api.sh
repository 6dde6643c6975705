#!/bin/sh
# The embedding API as an HPC pipeline uses it (include/ztrain/ztrain.h): install into a scratch
# prefix, then build the examples of tests/api/ against the installed header, Fortran bindings and
# library only, through pkg-config, and run them:
# - C (sim_train.c): 3 MPI ranks, one simulating, two training at ZeRO stage 3 on batches sent to
#   them; every step's loss equals `ztrain train` on 2 ranks over the same tokens, and its
#   checkpoint resumes in `ztrain train`, which then goes on as an unbroken run does;
# - Fortran (sim_train.f90): one simulating rank, one training; losses equal `ztrain train` on 1 rank;
# - Python (ctypes, train_numpy.py): one process from NumPy arrays: the same losses, evaluation,
#   the metrics, a learning rate set from Python, and a checkpoint loaded back;
# - bad use (bad_use.c, 2 ranks): each an error status with its message, the host going on; a batch
#   without targets skipped (loss NaN); a second thread's calls refused while one is in; a trainer
#   destroyed after MPI_Finalize;
# - only zt_* symbols exported.
# usage: test_api.sh BUILD_DIR MPIRUN ZTRAIN
set -u
build=$1 mpirun=$2 ztrain=$3
here=$(dirname "$0")
. "$here/common.sh"
# A sanitizer build's library needs the sanitizer runtime in whatever links it: no use to a
# plain consumer, so that build skips this (the plain build runs it).
option() {
  meson introspect "$build" --buildoptions | /usr/bin/python3 -c \
    "import json,sys; print(next(o['value'] for o in json.load(sys.stdin) if o['name']=='$1'))"
}
sanitize=$(option b_sanitize)
[ "$sanitize" = none ] || { echo "skipped: a -Db_sanitize=$sanitize build"; exit 77; }
for tool in mpicc mpifort pkg-config; do
  command -v "$tool" > /dev/null || { echo "FAIL: $tool is missing (scripts/install-deps.sh installs it)"; exit 1; }
done
meson install -C "$build" --quiet --destdir "$dir/root" > /dev/null || { echo "FAIL: meson install"; exit 1; }
prefix=$(option prefix) libdir=$(option libdir) includedir=$(option includedir)
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
case $includedir in /*) ;; *) includedir=$prefix/$includedir ;; esac
pc=$(find "$dir/root" -name ztrain.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no ztrain.pc installed"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_SYSROOT_DIR="$dir/root"
export LD_LIBRARY_PATH="$dir/root$libdir"
flags=$(pkg-config --cflags --libs ztrain)
lib=$(ls "$dir/root$libdir"/libztrain.so)

others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^zt_')
[ -z "$others" ] || fail "libztrain.so exports more than zt_*: $(echo $others | head -c 300)"
# shellcheck disable=SC2086
mpicc -std=c11 -Wall -Wextra -Wpedantic -Werror "$here/api/sim_train.c" -o "$dir/sim_train" $flags \
  || fail "sim_train.c does not build against the installed library"
# shellcheck disable=SC2086
mpicc -std=c11 -Wall -Wextra -Wpedantic -Werror "$here/api/bad_use.c" -o "$dir/bad_use" $flags -lm -pthread \
  || fail "bad_use.c does not build against the installed library"
# shellcheck disable=SC2086
(cd "$dir" && mpifort -std=f2018 -Wall -Wno-missing-include-dirs "$dir/root$includedir/ztrain/ztrain.f90" "$here/api/sim_train.f90" \
  -o "$dir/sim_train_f" $flags) || fail "sim_train.f90 does not build against the installed bindings"
[ "$failures" -eq 0 ] || finish ""

# An llm.c token shard of a text's bytes, and the configs: the CLI's reads it; the API's has no
# data.train (the batches come from the host).
/usr/bin/python3 - "$dir" <<'PY'
import array, json, sys
d = sys.argv[1]
data = open("/usr/share/common-licenses/GPL-3", "rb").read()
header = array.array("i", [0] * 256)
header[0:3] = array.array("i", [20240520, 1, len(data)])
with open(f"{d}/shard_train_000.bin", "wb") as f:
    header.tofile(f)
    array.array("H", list(data)).tofile(f)
c = {"model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "max_seq_len": 32, "vocab_size": 256},
     "data": {"train": f"{d}/shard_train_000.bin", "seq_len": 32}, "train": {"steps": 6, "threads": 1},
     "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, "zero_optimization": {"stage": 3}}
json.dump(c, open(f"{d}/c.json", "w"))
del c["data"]["train"]
json.dump(c, open(f"{d}/api.json", "w"))
PY
run_mpi() {  # NP PROGRAM ARGS...: under mpirun, within 120 s
  np=$1
  shift
  timeout 120 "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -x LD_LIBRARY_PATH -np "$np" "$@"
}
# losses NAME: "step N loss X" lines of $dir/NAME.out against the CLI's metrics $dir/REF.jsonl
same_losses() {
  /usr/bin/python3 - "$dir/$1.out" "$dir/$2.jsonl" "$3" <<'PY' || fail "$1's losses differ from the CLI's ($2): $(cat "$dir/$1.out")"
import json, re, sys
got = [float(m.group(1)) for m in re.finditer(r"^step \d+ loss +(\S+)", open(sys.argv[1]).read(), re.M)]
ref = [json.loads(l)["loss"] for l in open(sys.argv[2]) if "loss" in json.loads(l)][:int(sys.argv[3])]
print(f"{sys.argv[1]}: {len(got)} steps, losses {got[0]:.6f} .. {got[-1]:.6f}; the CLI's {ref[0]:.6f} .. {ref[-1]:.6f}")
assert len(got) == len(ref), (len(got), len(ref))
assert all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(got, ref)), list(zip(got, ref))
PY
}

train ref2 2
train ref2_8 2 --set train.steps=8
train ref1 1
run_mpi 3 "$dir/sim_train" "$dir/api.json" "$dir/shard_train_000.bin" 6 1 "$dir/ck" > "$dir/c_api.out" 2>&1 \
  || fail "sim_train failed: $(cat "$dir/c_api.out")"
same_losses c_api ref2 6
train resumed 2 --set train.steps=8 --resume "$dir/ck"
/usr/bin/python3 - "$dir/ref2_8.jsonl" "$dir/resumed.jsonl" <<'PY' || fail "the CLI resumed from the API's checkpoint differs from an unbroken run"
import json, sys
unbroken, resumed = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:])
print(f"steps 7-8 resumed from the API's checkpoint: {resumed}; unbroken: {unbroken[6:]}")
assert len(resumed) == 2 and all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(resumed, unbroken[6:]))
PY

run_mpi 2 "$dir/sim_train_f" "$dir/api.json" "$dir/shard_train_000.bin" 6 4 32 2 "$dir/ckf" > "$dir/fortran.out" 2>&1 \
  || fail "sim_train_f failed: $(cat "$dir/fortran.out")"
same_losses fortran ref1 6
[ -f "$dir/ckf/step_6/meta.json" ] || fail "the Fortran example saved no checkpoint"

timeout 120 /usr/bin/python3 "$here/api/train_numpy.py" "$lib" "$dir/api.json" "$dir/shard_train_000.bin" 6 "$dir/ckp" \
  > "$dir/python.out" 2>&1 || fail "train_numpy.py failed: $(cat "$dir/python.out")"
same_losses python ref1 6
/usr/bin/python3 - "$dir/python.out" <<'PY' || fail "train_numpy.py: $(cat "$dir/python.out")"
import json, re, sys
out = open(sys.argv[1]).read()
value = lambda key: float(re.search(rf"^{key} (\S+)", out, re.M).group(1))
metrics = json.loads(re.search(r"^metrics (.*)$", out, re.M).group(1))
assert metrics["step"] == 6 and metrics["peak_bytes"]["parameters"] > 0, metrics
assert re.search(r"^lr 0.05 at step 7$", out, re.M), "the learning rate set from Python was not the step's"
assert value("moved eval") != value("eval"), "the step at lr 0.05 changed nothing"
assert value("reloaded eval") == value("eval"), "the checkpoint loaded back does not give the saved model's loss"
print("python: evaluation, metrics, set_lr, save and load back as expected")
PY

run_mpi 2 "$dir/bad_use" "$dir" > "$dir/bad_use.out" 2>&1 || fail "bad use: $(cat "$dir/bad_use.out")"
grep -q "rank 1: 0 failed checks" "$dir/bad_use.out" || fail "bad use: $(cat "$dir/bad_use.out")"
finish "embedding API: the C, Fortran and Python examples train as ztrain train does, from the installed prefix"
