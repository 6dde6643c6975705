#!/bin/sh
# run_fuzzer.sh FUZZER SECONDS SEED_CORPUS NEW_CORPUS: runs a libFuzzer target for SECONDS from the
# seeds, keeping what it finds in NEW_CORPUS (the seed folder in the source tree is only read);
# a crash, an escaped exception, a leak or a sanitizer report fails the test with its input saved.
set -eu
fuzzer=$1 seconds=$2 seeds=$3 found=$4
mkdir -p "$found"
cd "$found"
# libFuzzer's own default exit status for a finding is 77, which meson would count as skipped.
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -error_exitcode=1 -timeout_exitcode=1 \
  -print_final_stats=1 "$found" "$seeds"
