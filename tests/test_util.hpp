// Helpers shared by the test programs: a scratch directory, running a command, comparing buffers.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace zt::test {

// A fresh directory under $TMPDIR, removed with everything in it at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ztrain_test_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  // Writes `text` to a file of that name here; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = path / name;
    std::ofstream(p) << text;
    return p.string();
  }
};

// The message of the E that f throws, failing the test if f throws nothing or another type.
template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("unexpected exception type: " << e.what());
  }
  FAIL("no exception");
  return "";
}

struct Run {
  int status;  // exit code, or -1 if the command could not run
  std::string output;  // stdout and stderr together
};

inline Run run(const std::string& command) {
  Run r{-1, ""};
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, "cannot read " << path);
  in.seekg(0, std::ios::end);
  std::vector<float> v(static_cast<size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

// The references' token file: int32 B, int32 T, then B*T inputs and B*T targets (-1 ignored).
inline void write_token_batch(const std::string& path, int B, int T, const std::vector<int32_t>& in,
                              const std::vector<int32_t>& tg) {
  std::ofstream f(path, std::ios::binary);
  const int32_t bt[2] = {B, T};
  f.write(reinterpret_cast<const char*>(bt), sizeof bt);
  f.write(reinterpret_cast<const char*>(in.data()), static_cast<std::streamsize>(in.size() * 4));
  f.write(reinterpret_cast<const char*>(tg.data()), static_cast<std::streamsize>(tg.size() * 4));
  REQUIRE(f.good());
}

// ||a - b|| / ||b||, with NaN anywhere giving NaN (which fails every <= check).
inline double rel_error(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace zt::test
