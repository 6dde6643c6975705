#!/usr/bin/env bash
# Copies the header-only dependencies (Eigen, doctest, nlohmann-json, and cuDNN's frontend where
# installed) from this machine into vendor/ (git-ignored), with pkg-config files that point at them, so that a
# machine without these packages (the lent GPU machine: bench/gpu_check.sh) can configure ztrain
# with PKG_CONFIG_PATH=vendor/pkgconfig. Run from the repository root; carry `vendor` along.
set -euo pipefail
dest=vendor
rm -rf "$dest"
mkdir -p "$dest/include" "$dest/pkgconfig"
cp -r /usr/include/eigen3 "$dest/include/eigen3"
cp -r /usr/include/doctest "$dest/include/doctest"
cp -r /usr/include/nlohmann "$dest/include/nlohmann"
# cuDNN's frontend headers, where scripts/install-deps.sh unpacked them (cuDNN's fused attention).
cudnn_fe_inc=$(pkg-config --variable=includedir cudnn_frontend 2>/dev/null || true)
[ -n "$cudnn_fe_inc" ] && cp -r "$cudnn_fe_inc" "$dest/include/cudnn-frontend"

# Versions as this machine's packages state them (meson.build asks for eigen3 >= 3.4, json >= 3.10).
eigen_version=$(pkg-config --modversion eigen3)
json_version=$(pkg-config --modversion nlohmann_json)
doctest_version=$(awk '/define DOCTEST_VERSION_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END{print v}' \
  /usr/include/doctest/doctest.h)

# ${pcfiledir}: the .pc files stay valid wherever the folder travels.
pc() {  # name version include-subdir
  cat >"$dest/pkgconfig/$1.pc" <<PC
prefix=\${pcfiledir}/..
includedir=\${prefix}/include

Name: $1
Description: $1 headers vendored by scripts/vendor-headers.sh
Version: $2
Cflags: -isystem \${includedir}$3
PC
}
pc eigen3 "$eigen_version" /eigen3
pc nlohmann_json "$json_version" ""
pc doctest "$doctest_version" ""
[ -n "$cudnn_fe_inc" ] && pc cudnn_frontend "$(pkg-config --modversion cudnn_frontend)" /cudnn-frontend
du -sh "$dest"
