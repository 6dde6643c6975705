#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the whole test suite; ends with the line
# "N passed, N failed, N skipped" taken from meson's results. Exit status 0 only if none failed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1
scripts/build.sh || exit 1
meson test -C build --print-errorlogs
status=$?
log=build/meson-logs/testlog.json
if [ -f "$log" ]; then
  python3 - "$log" <<'PY'
import json, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0, "TIMEOUT": 0, "ERROR": 0, "UNEXPECTEDPASS": 0, "EXPECTEDFAIL": 0}
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    counts[r] = counts.get(r, 0) + 1
passed = counts["OK"] + counts["EXPECTEDFAIL"]
failed = counts["FAIL"] + counts["TIMEOUT"] + counts["ERROR"] + counts["UNEXPECTEDPASS"]
print(f"{passed} passed, {failed} failed, {counts['SKIP']} skipped")
PY
fi
exit $status
