#!/bin/sh
# netns_rsh.sh [OPTIONS] HOST COMMAND...: Open MPI's remote shell (--mca plm_rsh_agent) for "hosts"
# that are network namespaces on this machine (tests/test_multihost.sh). ZT_NETNS_HOSTS maps each
# host to a namespace and a hostname, "HOST=NETNS=HOSTNAME ...". COMMAND (orted's command line,
# quoted for a remote shell as ssh would pass it) runs in that namespace, in a UTS namespace of its
# own named HOSTNAME, so each "host" has its own name.
set -u
while [ $# -gt 0 ]; do  # ssh-style options before the host (Open MPI adds none for this agent)
  case $1 in -*) shift ;; *) break ;; esac
done
[ $# -ge 2 ] || { echo "usage: netns_rsh.sh HOST COMMAND..." >&2; exit 255; }
host=$1
shift
for entry in ${ZT_NETNS_HOSTS:-}; do
  case $entry in
    "$host"=*=*)
      rest=${entry#"$host"=}
      ns=${rest%%=*} name=${rest#*=}
      exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1" && exec sh -c "$2"' sh "$name" "$*"
      ;;
  esac
done
echo "netns_rsh.sh: no namespace for host '$host' in ZT_NETNS_HOSTS='${ZT_NETNS_HOSTS:-}'" >&2
exit 255
