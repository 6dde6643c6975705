#!/usr/bin/env bash
# The io_uring engine's sequential write and read bandwidth through O_DIRECT against fio's
# io_uring engine in the same run, on the same file system, at the same block size and queue
# depth (one ring, fio --numjobs=1). Each write goes to a fresh file laid out before the clock
# starts (fio does so by default; io_bench fallocates), each read reads what its program's write
# left; the table gives the medians of the repetitions. About 3 minutes on a 2-core VM disk.
#   bench/io_bench.sh [build-dir] [dir] [size-bytes] [repetitions]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dir=${2:-}
size=${3:-$((512 << 20))}
reps=${4:-5}
bin="$build/bench/io_bench"
[ -x "$bin" ] || { echo "no $bin (built only with liburing)" >&2; exit 1; }
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 1; }
own=""
if [ -z "$dir" ]; then
  dir=$(mktemp -d /tmp/ztrain_io_bench.XXXXXX)
  own=$dir
fi
trap 'rm -f "$dir/fio.bin" "$dir/ztrain_io_bench.bin"; [ -z "$own" ] || rm -rf "$own"' EXIT

echo "== $(date), $dir: $(df -T "$dir" | awk 'NR == 2 {print $1 " (" $2 ")"}'), size $size bytes, $reps repetitions"

fio_gbps() {  # rw, bs, qd
  fio --name=seq --ioengine=io_uring --direct=1 --rw="$1" --bs="$2" --iodepth="$3" --size="$size" --numjobs=1 \
    --filename="$dir/fio.bin" --output-format=json |
    /usr/bin/python3 -c "import json, sys; j = json.load(sys.stdin)['jobs'][0]; print(j['$1']['bw_bytes'] / 1e9)"
}

ztrain_gbps() {  # write|read, bs, qd
  local line
  line=$("$bin" --dir "$dir" --size "$size" --block-size "$2" --queue-depth "$3" --mode "$1" | tail -n 1)
  [ "$(awk '{print $7}' <<<"$line")" = 0 ] || { echo "io_bench read back wrong data: $line" >&2; exit 1; }
  if [ "$1" = write ]; then awk '{print $3}' <<<"$line"; else awk '{print $5}' <<<"$line"; fi
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

rows=()
for cfg in "1048576 8" "131072 8" "1048576 32" "131072 32"; do
  read -r bs qd <<<"$cfg"
  fw=() fr=() zw=() zr=()
  for ((r = 0; r < reps; ++r)); do
    # Each direction runs fio and io_bench back to back, who goes first alternating, so a device
    # whose speed drifts (a shared VM disk) treats them alike.
    rm -f "$dir/fio.bin"
    if ((r % 2 == 0)); then
      fw+=("$(fio_gbps write "$bs" "$qd")")
      zw+=("$(ztrain_gbps write "$bs" "$qd")")
      fr+=("$(fio_gbps read "$bs" "$qd")")
      zr+=("$(ztrain_gbps read "$bs" "$qd")")
    else
      zw+=("$(ztrain_gbps write "$bs" "$qd")")
      fw+=("$(fio_gbps write "$bs" "$qd")")
      zr+=("$(ztrain_gbps read "$bs" "$qd")")
      fr+=("$(fio_gbps read "$bs" "$qd")")
    fi
  done
  rm -f "$dir/fio.bin" "$dir/ztrain_io_bench.bin"
  echo "-- bs $bs qd $qd: fio write ${fw[*]} | ztrain write ${zw[*]} | fio read ${fr[*]} | ztrain read ${zr[*]}"
  rows+=("$((bs / 1024)) KiB|$qd|write|$(median "${fw[@]}")|$(median "${zw[@]}")")
  rows+=("$((bs / 1024)) KiB|$qd|read|$(median "${fr[@]}")|$(median "${zr[@]}")")
done

echo
echo "| block | queue depth | direction | fio GB/s | ztrain GB/s | ztrain / fio |"
echo "| --- | --- | --- | --- | --- | --- |"
for row in "${rows[@]}"; do
  IFS='|' read -r b q d f z <<<"$row"
  printf '| %s | %s | %s | %.3f | %.3f | %.0f%% |\n' "$b" "$q" "$d" "$f" "$z" "$(awk -v f="$f" -v z="$z" 'BEGIN {print 100 * z / f}')"
done
