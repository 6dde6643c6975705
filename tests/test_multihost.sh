#!/bin/sh
# ztrain's ranks on several hosts: Open MPI's --host launch of 4 ranks onto 2 "hosts", each a
# network namespace on this machine with its own hostname (a UTS namespace), joined by a veth pair
# (10.77.0.1 and 10.77.0.2, which exist only inside the two namespaces). mpirun runs on host a and
# starts host b's daemon through tests/netns_rsh.sh (--mca plm_rsh_agent); MPI runs over TCP on
# the veth only (pml ob1, btl tcp,self). Checks:
#   1. Open MPI puts ranks 0,1 on host a and 2,3 on host b (the launcher variables ztrain reads);
#   2. ztrain's Communicator sees local_size 2 and local_rank 0,1 on each host (MPI_Comm_split_type),
#      read from test_comm's identity case run with -s (doctest prints every CHECK's values);
#   3. test_comm's collectives all pass across the hosts, and the traffic went over the veth;
#   4. ztrain train on 4 ranks x micro-batch 2 over 2 hosts matches 1 rank x micro-batch 8;
#   5. FULL_SHARD, HYBRID_SHARD (groups = hosts) and hpZ over the 2 hosts match 1 rank, and the bytes
#      crossing the veth a step fall as the groups imply (see there).
# Exits 77 (skipped) where namespaces cannot be made (no CAP_SYS_ADMIN, no `ip`, no veth). Every
# mpirun is bounded by `timeout 120`; the namespaces and whatever runs in them go on exit.
# usage: test_multihost.sh MPIRUN TEST_COMM ZTRAIN
set -u
[ $# -eq 3 ] || { echo "usage: test_multihost.sh MPIRUN TEST_COMM ZTRAIN" >&2; exit 2; }
mpirun=$1 test_comm=$2 ztrain=$3
skip() { echo "SKIP: $*"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
tests_dir=$(cd "$(dirname "$0")" && pwd)
. "$tests_dir/netns_hosts.sh"

# 1. Placement, as Open MPI tells each rank (OMPI_COMM_WORLD_LOCAL_*, what detect_launch reads).
launch "$dir/where.out" "$hosts" sh -c \
  'echo "rank $OMPI_COMM_WORLD_RANK host $(hostname) local $OMPI_COMM_WORLD_LOCAL_RANK of $OMPI_COMM_WORLD_LOCAL_SIZE"'
[ $rc -eq 0 ] || fail "placement run exited $rc: $(cat "$dir/where.out")"
sort "$dir/where.out" > "$dir/where.sorted"
cat > "$dir/where.want" <<EOF
rank 0 host $host_a local 0 of 2
rank 1 host $host_a local 1 of 2
rank 2 host $host_b local 0 of 2
rank 3 host $host_b local 1 of 2
EOF
if cmp -s "$dir/where.sorted" "$dir/where.want"; then echo "placement:"; sed 's/^/  /' "$dir/where.sorted"
else fail "placement: expected
$(cat "$dir/where.want")
got
$(cat "$dir/where.out")"; fi

# 2. ztrain's own local rank and size (MpiCommunicator's MPI_Comm_split_type), on every rank: the
# identity case's CHECK(w.local_size() == n) and CHECK(w.local_rank() == r), with their values.
launch "$dir/id.out" "$hosts" --tag-output "$test_comm" --no-colors -s '--test-case=rank? size? local rank? backend'
awk '/^\[[0-9]+,[0-9]+\]<stdout>:/ {
  r = $0; sub(/\]<stdout>:.*/, "", r); sub(/^\[[0-9]+,/, "", r)
  line = $0; sub(/^[^<]*<stdout>:/, "", line)
  if (line ~ /CHECK\( w\.local_size\(\) ==/) what[r] = "local_size"
  else if (line ~ /CHECK\( w\.local_rank\(\) ==/) what[r] = "local_rank"
  else if (what[r] != "" && line ~ /values: CHECK\( [0-9]+ ==/) {
    v = line; sub(/.*values: CHECK\( /, "", v); sub(/ .*/, "", v); print "rank " r " " what[r] " " v; what[r] = ""
  }
}' "$dir/id.out" | sort > "$dir/id.got"
for r in 0 1 2 3; do
  echo "rank $r local_rank $((r % 2))"
  echo "rank $r local_size 2"
done > "$dir/id.want"
if cmp -s "$dir/id.got" "$dir/id.want"; then echo "ztrain's view:"; sed 's/^/  /' "$dir/id.got"
else fail "ztrain's local rank/size: expected
$(cat "$dir/id.want")
got
$(cat "$dir/id.got")
from test_comm (exit $rc):
$(grep -A 1 -e 'w\.local_' "$dir/id.out" | grep -v '^--' | head -n 40)"; fi

# 3. Every collective across the hosts, and the identity case against the launcher's placement.
before=$(veth_bytes)
launch "$dir/comm.out" "$hosts" "$test_comm" --no-colors
moved=$(( $(veth_bytes) - before ))
if [ $rc -eq 0 ] && [ "$(grep -c 'Status: SUCCESS' "$dir/comm.out")" -eq 4 ]; then
  echo "test_comm on 4 ranks, 2 hosts: $(grep -m 1 '^\[doctest\] test cases' "$dir/comm.out"); $moved bytes over the veth"
else fail "test_comm on 2 hosts exited $rc: $(tail -n 60 "$dir/comm.out")"; fi
[ "$moved" -gt 1000000 ] || fail "test_comm moved only $moved bytes over the veth (expected MPI traffic there)"

# 4. ztrain train: 4 ranks x micro-batch 2 over 2 hosts trains as 1 rank x micro-batch 8.
cat > "$dir/c.json" <<JSON
{"model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "max_seq_len": 32},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 6, "threads": 1, "val_interval": 3, "val_batches": 2},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
 "optimizer": {"params": {"lr": 0.002}}}
JSON
launch "$dir/np4.out" "$hosts" "$ztrain" train --config "$dir/c.json" --metrics "$dir/np4.jsonl"
[ $rc -eq 0 ] || fail "ztrain train on 2 hosts exited $rc: $(cat "$dir/np4.out")"
grep -q "x 4 ranks (mpi, 2 on this host)" "$dir/np4.out" || fail "banner does not show 4 MPI ranks, 2 a host: $(cat "$dir/np4.out")"
timeout 120 "$ztrain" train --config "$dir/c.json" --set train_micro_batch_size_per_gpu=8 --metrics "$dir/np1.jsonl" \
  >"$dir/np1.out" 2>&1 </dev/null || fail "np=1 run failed: $(cat "$dir/np1.out")"
/usr/bin/python3 "$(dirname "$0")/compare_metrics.py" "$dir/np1.jsonl" "$dir/np4.jsonl" --lines $((6 + 2)) ||
  fail "losses of 4 ranks on 2 hosts differ from 1 rank"

# 5. Hybrid sharding across the hosts ([Note: shard groups]): FULL_SHARD, HYBRID_SHARD (its
# default group, the ranks per host) and hpZ (groups of 2) each train as one rank does, and the
# bytes crossing between the hosts a step fall as the groups imply. Per step: the veth's counters
# over a 6-step run less those over a 2-step one, / 4; beside them the communicator's inter-group
# bytes a rank sent, and what a ring implies crosses the hosts: a world ring 0-1-2-3 crosses twice
# (2 of its 4 ranks send to the other host), a replica pair {0,2} or {1,3} with both its ranks,
# so 2 x a rank's world bytes and 4 x its replica bytes. Open MPI picks its own all-gather and
# all-reduce algorithms (the reduce-scatter is ztrain's ring): its all-gather over 4 ranks
# (recursive doubling) crosses with 4 ranks x 2 shards where a ring crosses with 2 x 3, so a world
# that gathers twice for each reduce-scatter sends (2 x 4/3 + 1) / 3 = 1.22 x the ring's count
# (measured 1.21 for FULL_SHARD, 1.18 for hpZ, 1.00 for hybrid's replica all-reduces), and TCP adds
# its headers: the veth must hold within [0.9, 1.4] x the ring's count, and hybrid must send less
# than half of FULL_SHARD's.
cat > "$dir/h.json" <<JSON
{"model": {"arch": "llama", "n_layer": 4, "n_head": 4, "n_kv_head": 2, "n_embd": 64, "intermediate_size": 96,
           "tie_word_embeddings": false, "max_seq_len": 32, "wte_units": 2},
 "data": {"format": "bytes", "train": "/usr/share/common-licenses", "seq_len": 32},
 "train": {"steps": 6, "threads": 1, "val_interval": 0},
 "train_micro_batch_size_per_gpu": 2, "steps_per_print": 1,
 "optimizer": {"params": {"lr": 0.003}},
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}}
JSON
timeout 120 "$ztrain" train --config "$dir/h.json" --set train_micro_batch_size_per_gpu=8 --metrics "$dir/h1.jsonl" \
  >"$dir/h1.out" 2>&1 </dev/null || fail "np=1 Llama run failed: $(cat "$dir/h1.out")"
for mode in full hybrid hpz; do
  case $mode in
    full) set -- ;;
    hybrid) set -- --set zero_optimization.sharding_strategy=HYBRID_SHARD ;;
    hpz) set -- --set zero_optimization.zero_hpz_partition_size=2 ;;
  esac
  for steps in 2 6; do
    before=$(veth_bytes)
    launch "$dir/$mode$steps.out" "$hosts" "$ztrain" train --config "$dir/h.json" --set train.steps=$steps "$@" \
      --metrics "$dir/$mode$steps.jsonl"
    echo $(( $(veth_bytes) - before )) > "$dir/$mode$steps.veth"
    [ $rc -eq 0 ] || fail "$mode over 2 hosts exited $rc: $(cat "$dir/$mode$steps.out")"
  done
  /usr/bin/python3 "$(dirname "$0")/compare_metrics.py" "$dir/h1.jsonl" "$dir/${mode}6.jsonl" --lines 6 > "$dir/$mode.cmp" ||
    fail "$mode on 2 hosts differs from 1 rank: $(cat "$dir/$mode.cmp")"
done
grep -q "hybrid sharding: 2 groups of 2 ranks" "$dir/hybrid6.out" || fail "hybrid's default group is not the host: $(cat "$dir/hybrid6.out")"
/usr/bin/python3 - "$dir" <<'PY' || fail "bytes between the hosts do not fall as the groups imply (see above)"
import json, sys
d = sys.argv[1]
crossing = {"full": 2, "hybrid": 4, "hpz": 2}  # ranks whose inter-group sends cross the hosts, as a ring
veth = {}
bad = 0
for mode, k in crossing.items():
    per_step = (int(open(f"{d}/{mode}6.veth").read()) - int(open(f"{d}/{mode}2.veth").read())) / 4
    inter = {json.loads(l)["comm_bytes_inter"] for l in open(f"{d}/{mode}6.jsonl")}
    ring = k * max(inter)
    veth[mode] = per_step
    print(f"{mode}: {per_step / 1e6:.3f} MB a step over the veth; a rank sent {sorted(inter)} bytes across groups; "
          f"the ring implies {ring / 1e6:.3f} MB between the hosts (veth / ring {per_step / ring:.2f}); "
          f"{open(f'{d}/{mode}.cmp').read().strip()}")
    bad += not 0.9 <= per_step / ring <= 1.4
print(f"between the hosts: hybrid {veth['hybrid'] / veth['full']:.2f} x FULL_SHARD's, hpZ {veth['hpz'] / veth['full']:.2f} x")
bad += not veth["hybrid"] < 0.5 * veth["full"] or not veth["hpz"] < veth["full"]
sys.exit(1 if bad else 0)
PY

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "multi-host checks passed"
