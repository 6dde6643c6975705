#!/usr/bin/env bash
# Configures (once) and builds ztrain in build/ with warnings as errors. Extra arguments go to
# `meson setup` when the build folder is first made (e.g. -Dcuda=disabled).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=release -Dwerror=true "$@"
fi
ninja -C build
