#!/bin/sh
# README.md's table of configuration keys is `ztrain config --list --format markdown`, printed from
# the keys' one declaration (runtime/config_table.cpp). This writes it into README.md between its
# two marker lines; with --check it changes nothing and fails where README.md's table differs
# (the test config_readme runs that, so the README cannot drift from the keys).
# usage: scripts/config-table.sh PATH/TO/ztrain [README.md] [--check]
set -eu
ztrain=$1
readme=${2:-$(dirname "$0")/../README.md}
check=${3:-}
begin='<!-- BEGIN: ztrain config --list --format markdown (scripts/config-table.sh writes this table) -->'
end='<!-- END: ztrain config --list --format markdown -->'
grep -qxF "$begin" "$readme" && grep -qxF "$end" "$readme" || { echo "$readme has no configuration table markers" >&2; exit 1; }
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.table"' EXIT
"$ztrain" config --list --format markdown > "$tmp.table"
# Everything up to the begin marker, the generated table, everything from the end marker on.
awk -v b="$begin" -v e="$end" -v t="$tmp.table" '
  $0 == b { print; while ((getline line < t) > 0) print line; skip = 1; next }
  $0 == e { skip = 0 }
  !skip { print }' "$readme" > "$tmp"
if [ "$check" = --check ]; then
  if ! cmp -s "$readme" "$tmp"; then
    diff -u "$readme" "$tmp" | head -40 >&2
    echo "README.md's configuration table differs from ztrain config --list --format markdown;" \
         "run scripts/config-table.sh $ztrain to write it" >&2
    exit 1
  fi
  exit 0
fi
cat "$tmp" > "$readme"
