# Sourced: two "hosts" for Open MPI, each a network namespace on this machine with its own
# hostname (a UTS namespace), joined by a veth pair $if (10.77.0.1 and 10.77.0.2, which exist only
# inside the two namespaces); tests/netns_rsh.sh starts host b's daemon. Needs root (CAP_SYS_ADMIN).
# The caller sets $mpirun and $tests_dir (this folder) and defines skip() (called where namespaces
# cannot be made) and fail(). Provides $dir (a temporary folder), $nsa, $nsb, $if, $hosts (2 ranks
# a host), launch OUT HOSTS ARGS... (mpirun on host a over TCP on the veth only, -np 4, bounded by
# `timeout ${launch_timeout:-120}`; sets rc) and veth_bytes (both directions' bytes so far). The
# namespaces, whatever runs in them and $dir go on exit.
agent=$tests_dir/netns_rsh.sh
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
  timeout -k 10 "${launch_timeout:-120}" ip netns exec "$nsa" unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh "$host_a" \
    "$mpirun" --allow-run-as-root --bind-to none --host "$hosts" -np 4 --mca plm_rsh_agent "$agent" \
    --mca oob_tcp_if_include $if --mca btl_tcp_if_include $if --mca pml ob1 --mca btl tcp,self \
    "$@" >"$out" 2>&1 </dev/null &
  wait $!
  rc=$?
  case $rc in 124 | 137) fail "mpirun $* timed out after ${launch_timeout:-120} s: $(tail -n 20 "$out")" ;; esac
}
veth_bytes() { ip netns exec "$nsa" cat /sys/class/net/$if/statistics/rx_bytes /sys/class/net/$if/statistics/tx_bytes |
  awk '{ s += $1 } END { print s }'; }
hosts="$ip_a:2,$ip_b:2"
