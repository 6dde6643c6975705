#!/usr/bin/env bash
# Builds ztrain with clang under AddressSanitizer and UndefinedBehaviorSanitizer in build-fuzz/,
# with the libFuzzer targets ([Note: fuzzing] in fuzz/meson.build), and runs each target for
# SECONDS (default 60) from its corpus in fuzz/corpus/. Exit status 0 only if no target found
# anything. scripts/test.sh runs the whole test suite in the same build afterwards.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-fuzz --buildtype=debugoptimized -Dfuzz=enabled -Dcuda=disabled \
    -Db_sanitize=address,undefined -Db_lundef=false -Dwerror=true -Dfuzz_seconds="$seconds"
else
  meson configure build-fuzz -Dfuzz_seconds="$seconds"
fi
ninja -C build-fuzz
meson test -C build-fuzz --suite fuzz --print-errorlogs --logbase fuzz
