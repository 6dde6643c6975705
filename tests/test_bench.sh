#!/bin/sh
# `ztrain bench` under mpirun (2 ranks): a sweep of ZeRO stages with a refused point in it gives a
# row per point, the refused one saying why, and the sweep goes on; each point's losses equal a
# separate `ztrain train` run of that point (its warm-up step and timed steps); each point's peak
# memory per rank is within 10% of `ztrain estimate` (the model of tests/test_estimate.sh, whose
# peaks are held there); crossed sweeps make every combination; csv and the table carry the same
# rows; a sweep's JSON values set whole sections; a peer that cannot run (no such Python) is a row
# saying so; --plot writes a PNG; bad flags are usage errors.
# usage: test_bench.sh MPIRUN ZTRAIN
set -u
mpirun=$1 ztrain=$2
here=$(dirname "$0")
. "$here/common.sh"

held_model "$dir/c.json"
bench() {  # NAME ARGS...: `ztrain bench` on 2 ranks, its stdout in $dir/NAME.out
  name=$1
  shift
  timeout 300 "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 2 "$ztrain" bench --config "$dir/c.json" \
    --warmup 1 --steps 3 "$@" > "$dir/$name.out" 2> "$dir/$name.err" || fail "bench $name failed: $(cat "$dir/$name.err")"
}

bench stages --sweep zero_optimization.stage=0,7,3 --format json --peers --python /nonexistent/python
for stage in 0 3; do
  train "s$stage" 2 --set zero_optimization.stage=$stage --steps 4
done
/usr/bin/python3 - "$dir" <<'PY' || fail "the bench's rows (above)"
import json, sys
d = sys.argv[1]
rows = json.load(open(f"{d}/stages.out"))["rows"]
labels = [r["label"] for r in rows]
assert labels == ["zero_optimization.stage=0", "zero_optimization.stage=7", "zero_optimization.stage=3", "peers"], labels
assert "error" in rows[1] and "zero_optimization.stage" in rows[1]["error"], rows[1]
assert "error" in rows[3] and "/nonexistent/python" in rows[3]["error"], rows[3]
for r, name in ((rows[0], "s0"), (rows[2], "s3")):
    ref = [json.loads(l)["loss"] for l in open(f"{d}/{name}.jsonl")]
    assert len(r["losses"]) == 4 and all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(r["losses"], ref)), (r["losses"], ref)
    ratio = r["estimate_total_bytes"] / r["peak_total_bytes"]
    print(f"{r['label']}: losses as ztrain train's; {r['ms_median']:.1f} ms a step; peak {r['peak_total_bytes'] / 2**20:.2f} MiB, "
          f"estimate {r['estimate_total_bytes'] / 2**20:.2f} MiB ({ratio - 1:+.1%}); sent {r['sent_intra_bytes']:.0f} B a step")
    assert abs(ratio - 1) <= 0.10, ratio
    assert r["rss_bytes"] > r["peak_total_bytes"] and r["tokens_per_s"] > 0 and r["mfu"] > 0, r
    assert r["ms_min"] <= r["ms_median"] <= r["ms_max"], r
assert rows[0]["sent_intra_bytes"] > 0 and rows[2]["comm_exposed_ms"] + rows[2]["comm_hidden_ms"] > 0, rows
# Stage 3 shards AdamW's states (its parameter peak holds the whole embedding, one unit, when gathered).
p0, p3 = rows[0]["peak_bytes"], rows[2]["peak_bytes"]
assert p3["optimizer"] < 0.75 * p0["optimizer"], (p0, p3)
PY

bench crossed --sweep zero_optimization.stage=2,3 --sweep train_micro_batch_size_per_gpu=2,4 --format csv
/usr/bin/python3 - "$dir/crossed.out" <<'PY' || fail "crossed sweep: $(cat "$dir/crossed.out")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
want = [f"zero_optimization.stage={s}, train_micro_batch_size_per_gpu={b}" for s in (2, 3) for b in (2, 4)]
assert [r["label"] for r in rows] == want, [r["label"] for r in rows]
assert all(not r["error"] and float(r["ms_median"]) > 0 for r in rows), rows
t2, t4 = float(rows[0]["tokens_per_s"]), float(rows[1]["tokens_per_s"])
print(f"crossed: 4 rows; stage 2 at micro-batch 2 and 4: {t2:.0f} and {t4:.0f} tokens/s")
PY

if /usr/bin/python3 -c "import matplotlib" 2> /dev/null; then
  # JSON values: an object sets several keys of a section (the commas inside do not split it).
  bench table --plot "$dir/bench.png" --python /usr/bin/python3 \
    --sweep 'activation_checkpointing={"mode":"none"},{"mode":"selective","selective_ac_option":"op"}'
  for mode in '{"mode":"none"}' '{"mode":"selective","selective_ac_option":"op"}'; do
    grep -qF "| activation_checkpointing=$mode | ztrain | " "$dir/table.out" || fail "the table lacks $mode's row: $(cat "$dir/table.out")"
  done
  grep -q "failed" "$dir/table.out" && fail "a point failed: $(cat "$dir/table.out")"
  head -c 8 "$dir/bench.png" | od -An -c | grep -q "P   N   G" || fail "--plot wrote no PNG"
else
  fail "/usr/bin/python3 has no matplotlib (scripts/install-deps.sh installs python3-matplotlib)"
fi

expect 2 "--sweep expects KEY=V1,V2" -- "$ztrain" bench --config "$dir/c.json" --sweep zero_optimization.stage
expect 2 "--format must be table, json or csv" -- "$ztrain" bench --config "$dir/c.json" --format xml
# Outputs that cannot be written fail before the sweep runs, naming the flag and the path.
expect 1 "bench --out: cannot create the folder '$dir/c.json'" -- timeout 60 "$mpirun" --allow-run-as-root --oversubscribe \
  --bind-to none -np 2 "$ztrain" bench --config "$dir/c.json" --out "$dir/c.json/rows.json"
printf '%s' "$out" | grep -q "ms a step" && fail "the sweep ran before --out was found unwritable: $out"
expect 1 "bench --plot: '$dir' is a folder" -- timeout 60 "$mpirun" --allow-run-as-root --oversubscribe \
  --bind-to none -np 2 "$ztrain" bench --config "$dir/c.json" --plot "$dir"
expect 2 "bench needs --config" -- "$ztrain" bench --steps 2
finish "ztrain bench: rows as separate runs, memory within 10% of the estimate, failed points as rows"
