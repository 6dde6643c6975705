#!/bin/sh
# An HPC pipeline links libztrain through pkg-config: install into a scratch prefix, then build
# and run a program against the installed headers and library only.
# usage: test_pkgconfig.sh BUILD_DIR
set -eu
build=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# A sanitizer build's library needs the sanitizer runtime in whatever links it: no use to a
# plain consumer, so that build skips this (the plain build runs it).
sanitize=$(meson introspect "$build" --buildoptions | python3 -c \
  "import json,sys; print(next(o['value'] for o in json.load(sys.stdin) if o['name']=='b_sanitize'))")
[ "$sanitize" = none ] || { echo "skipped: a -Db_sanitize=$sanitize build"; exit 77; }
meson install -C "$build" --quiet --destdir "$dir/root" >/dev/null
prefix=$(meson introspect "$build" --buildoptions | python3 -c \
  "import json,sys; print(next(o['value'] for o in json.load(sys.stdin) if o['name']=='prefix'))")
libdir=$(meson introspect "$build" --buildoptions | python3 -c \
  "import json,sys; print(next(o['value'] for o in json.load(sys.stdin) if o['name']=='libdir'))")
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
pc=$(find "$dir/root" -name ztrain.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no ztrain.pc installed"; exit 1; }
cat > "$dir/use.cpp" <<'CPP'
#include <runtime/config.hpp>
#include <models/gpt2.hpp>
#include <cstdio>
int main() {
  zt::GPT2Dims d;  // GPT-2 124M
  std::printf("%lld\n", static_cast<long long>(zt::gpt2_num_params(d)));
  return zt::gpt2_num_params(d) == 124475904 ? 0 : 1;
}
CPP
export PKG_CONFIG_PATH="$(dirname "$pc")"
export PKG_CONFIG_SYSROOT_DIR="$dir/root"
c++ -std=c++20 "$dir/use.cpp" -o "$dir/use" $(pkg-config --cflags --libs ztrain)
LD_LIBRARY_PATH="$dir/root$libdir" "$dir/use"
echo "pkg-config link check passed"
