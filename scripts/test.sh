#!/usr/bin/env bash
# Installs the dependencies, builds (with the CUDA kernels: -Dcuda=enabled), and runs the whole test suite twice: in build/ (gcc, release),
# then in build-fuzz/ (clang, AddressSanitizer and UndefinedBehaviorSanitizer, with the libFuzzer
# targets run for a bounded time: scripts/fuzz.sh). Ends with the line
# "N passed, N failed, N skipped" summed over both runs from meson's results. Exit status 0 only
# if none failed.
#   ZT_FUZZ_SECONDS (default 60): each fuzz target's time; ZT_SANITIZE=0 skips the second run.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh || exit 1
# CI builds the CUDA kernels too (they compile and link here; their tests skip without a GPU).
# A build/ the main job made (without the tests) gets them here.
if [ -f build/build.ninja ]; then meson configure build -Dcuda=enabled -Dtests=true > /dev/null || exit 1; fi
scripts/build.sh -Dcuda=enabled || exit 1
meson test -C build --print-errorlogs
status=$?
logs=(build/meson-logs/testlog.json)
if [ "${ZT_SANITIZE:-1}" != 0 ]; then
  # Leak checks are off under mpirun-launched ranks' sanitizer runtime: Open MPI's plugins leave
  # allocations at exit whose modules are already unloaded, which LeakSanitizer cannot attribute
  # (the unit tests alone, with leak checks on, run first).
  scripts/fuzz.sh "${ZT_FUZZ_SECONDS:-60}" || status=1
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 meson test -C build-fuzz --no-rebuild --suite unit --print-errorlogs \
    --logbase unit-leaks || status=1
  # The suite "zero" (the stage x rank-count matrix, the estimate against measured peaks, the
  # precision matrix) checks numbers, not memory: the engine paths it drives run under the
  # sanitizers in the checkpoint and offload suites (stages 0-3, 1-3 ranks, bf16 and fp16), so the
  # second pass leaves it out to keep CI within its time, as it does the suite "model" (a real
  # 135M-parameter model against transformers: numbers again).
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-fuzz --no-rebuild --no-suite unit --no-suite fuzz --no-suite zero --no-suite model \
      --print-errorlogs || status=1
  logs+=(build-fuzz/meson-logs/fuzz.json build-fuzz/meson-logs/unit-leaks.json build-fuzz/meson-logs/testlog.json)
fi
/usr/bin/python3 - "${logs[@]}" <<'PY'
import json, os, sys
counts = {"OK": 0, "FAIL": 0, "SKIP": 0, "TIMEOUT": 0, "ERROR": 0, "UNEXPECTEDPASS": 0, "EXPECTEDFAIL": 0}
for path in sys.argv[1:]:
    if not os.path.exists(path):
        counts["ERROR"] += 1  # a run that left no results failed
        continue
    for line in open(path):
        r = json.loads(line)["result"]
        counts[r] = counts.get(r, 0) + 1
passed = counts["OK"] + counts["EXPECTEDFAIL"]
failed = counts["FAIL"] + counts["TIMEOUT"] + counts["ERROR"] + counts["UNEXPECTEDPASS"]
print(f"{passed} passed, {failed} failed, {counts['SKIP']} skipped")
PY
exit $status
