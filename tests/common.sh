# Sourced by the shell tests: a temporary folder $dir removed on exit (a test that must clean up
# more sets its own trap after sourcing), fail() to count a failed check with its message, and
# finish() to end with the count.
dir=$(mktemp -d "${TMPDIR:-/tmp}/ztrain_test.XXXXXX")
trap 'rm -rf "$dir"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# finish MESSAGE: exit 1 naming the number of failed checks, else print MESSAGE.
finish() {
  [ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
  echo "$1"
}
