#!/usr/bin/env bash
# Configures (once) and builds ztrain in build/ with warnings as errors.
#   build.sh [-Dname=value]... [TARGET]...
# -D options go to `meson setup` when the build folder is first made (e.g. -Dcuda=disabled); an
# existing folder keeps its configuration (scripts/test.sh changes it with `meson configure`).
# Targets go to ninja (the main job builds `ztrain` alone); none builds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
options=()
targets=()
for a in "$@"; do
  case "$a" in
    -D*) options+=("$a") ;;
    *) targets+=("$a") ;;
  esac
done
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release -Dwerror=true "${options[@]}"
fi
ninja -C build "${targets[@]}"
