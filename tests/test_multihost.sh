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
#   4. ztrain train on 4 ranks x micro-batch 2 over 2 hosts matches 1 rank x micro-batch 8.
# Exits 77 (skipped) where namespaces cannot be made (no CAP_SYS_ADMIN, no `ip`, no veth). Every
# mpirun is bounded by `timeout 120`; the namespaces and whatever runs in them go on exit.
# usage: test_multihost.sh MPIRUN TEST_COMM ZTRAIN
set -u
[ $# -eq 3 ] || { echo "usage: test_multihost.sh MPIRUN TEST_COMM ZTRAIN" >&2; exit 2; }
mpirun=$1 test_comm=$2 ztrain=$3
agent=$(cd "$(dirname "$0")" && pwd)/netns_rsh.sh
nsa=ztmh$$a nsb=ztmh$$b host_a=ztmh-host-a host_b=ztmh-host-b ip_a=10.77.0.1 ip_b=10.77.0.2 if=ztmh0
dir=$(mktemp -d "${TMPDIR:-/tmp}/ztrain_multihost.XXXXXX")
made=""
cleanup() {
  for ns in $made; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null  # ours: only what this script started runs there
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' INT TERM HUP
skip() { echo "SKIP: $*"; exit 77; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2)"
command -v unshare >/dev/null 2>&1 || skip "no unshare command (util-linux)"
for ns in $nsa $nsb; do
  ip netns add "$ns" 2>"$dir/err" || skip "cannot create a network namespace: $(head -n 1 "$dir/err")"
  made="$made $ns"
  ip netns exec "$ns" unshare --uts true 2>"$dir/err" ||
    skip "cannot enter a network + UTS namespace: $(head -n 1 "$dir/err")"
done
ip link add name $if netns "$nsa" type veth peer name $if netns "$nsb" 2>"$dir/err" ||
  skip "cannot create a veth pair: $(head -n 1 "$dir/err")"
{ ip -n "$nsa" addr add $ip_a/24 dev $if && ip -n "$nsb" addr add $ip_b/24 dev $if &&
  ip -n "$nsa" link set lo up && ip -n "$nsa" link set $if up &&
  ip -n "$nsb" link set lo up && ip -n "$nsb" link set $if up; } || { echo "FAIL: cannot configure the veth pair"; exit 1; }
export ZT_NETNS_HOSTS="$ip_a=$nsa=$host_a $ip_b=$nsb=$host_b"

# launch OUT HOSTS ARGS...: mpirun on host a, output to OUT; sets rc. In the background so that a
# signal runs the cleanup at once.
launch() {
  out=$1 hosts=$2
  shift 2
  timeout -k 10 120 ip netns exec "$nsa" unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "$host_a" \
    "$mpirun" --allow-run-as-root --bind-to none --host "$hosts" -np 4 --mca plm_rsh_agent "$agent" \
    --mca oob_tcp_if_include $if --mca btl_tcp_if_include $if --mca pml ob1 --mca btl tcp,self \
    "$@" >"$out" 2>&1 </dev/null &
  wait $!
  rc=$?
  case $rc in 124 | 137) fail "mpirun $* timed out after 120 s: $(tail -n 20 "$out")" ;; esac
}
veth_bytes() { ip netns exec "$nsa" cat /sys/class/net/$if/statistics/rx_bytes /sys/class/net/$if/statistics/tx_bytes |
  awk '{ s += $1 } END { print s }'; }
hosts="$ip_a:2,$ip_b:2"

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
python3 "$(dirname "$0")/compare_metrics.py" "$dir/np1.jsonl" "$dir/np4.jsonl" --lines $((6 + 2)) ||
  fail "losses of 4 ranks on 2 hosts differ from 1 rank"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "multi-host checks passed"
