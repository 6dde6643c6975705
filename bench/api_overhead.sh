#!/usr/bin/env bash
# The embedding API's cost (include/ztrain/ztrain.h): the same run through `ztrain train` (batches
# read from a token shard by its loader) and through zt_trainer_step (tests/api/sim_train.c with
# NSIM 0: each training rank cuts its batches from the shard in memory and hands them over), on
# the same ranks, model and tokens (random ids: the time does not depend on the text). Rounds
# alternate the two. A step's time: the CLI's metrics `ms` (the step from its first forward, the
# loader's reading left out), against the time inside the step's zt_trainer_step calls (the API's
# batch checks, agreed over the ranks, and its copies included); each run's is rank 0's median over
# steps 6..N. Then the library's memory after zt_trainer_destroy: build/tests/api_cycles
# (rounds of create, 3 steps, destroy in one process; the resident set after round 10 and after the
# last).
#   bench/api_overhead.sh [build-dir] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(cd "${1:-build}" && pwd)
rounds=${2:-3}
res=$(mktemp -d)
trap 'rm -rf "$res"' EXIT
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)
steps=40

mpicc -std=c11 -O2 -I"$root/include" -I"$build/include" "$root/tests/api/sim_train.c" -o "$res/sim_train" \
  -L"$build" -l:libztrain.so.1 -Wl,-rpath,"$build"
/usr/bin/python3 "$root/bench/random_tokens.py" "$res/shard_train_000.bin" 1048576 256  # timing does not depend on the text
cat > "$res/c.json" <<JSON
{"model": {"n_layer": 4, "n_head": 4, "n_embd": 256, "max_seq_len": 128, "vocab_size": 256},
 "data": {"train": "$res/shard_train_000.bin", "seq_len": 128}, "train": {"steps": $steps, "threads": 1},
 "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 3}, "steps_per_print": 1000}
JSON

median() { /usr/bin/python3 -c "import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
cli=() api=()
for r in $(seq "$rounds"); do
  "${mpirun[@]}" "$build/ztrain" train --config "$res/c.json" --metrics "$res/cli.jsonl" > /dev/null
  cli+=("$(median $(/usr/bin/python3 -c "
import json, sys
print(' '.join(str(json.loads(l)['ms']) for l in list(open(sys.argv[1]))[5:]))" "$res/cli.jsonl"))")
  "${mpirun[@]}" "$res/sim_train" "$res/c.json" "$res/shard_train_000.bin" "$steps" 0 > "$res/api.out"
  api+=("$(median $(awk '/^step/ && ++n > 5 {print $8}' "$res/api.out"))")
  echo "round $r: ztrain train ${cli[-1]} ms a step, zt_trainer_step ${api[-1]} ms"
done
c=$(median "${cli[@]}") a=$(median "${api[@]}")
/usr/bin/python3 -c "import sys; c,a=map(float,sys.argv[1:]); print(f'median of rounds: ztrain train {c:.2f} ms, zt_trainer_step {a:.2f} ms: API / CLI = {a/c:.3f} ({(a/c-1)*100:+.1f}%)')" "$c" "$a"
for n in 50 200; do "$build/tests/api_cycles" "$n" 3 10; done
