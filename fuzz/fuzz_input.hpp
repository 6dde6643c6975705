// libFuzzer targets ([Note: fuzzing] in fuzz/meson.build): each writes the input where the parser
// under test reads from (a file in a scratch folder made once per process) and calls it. The
// parser's own error type is the expected outcome for bad input; any other exception escapes and
// libFuzzer reports it, as it reports crashes, leaks and sanitizer findings.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace zt::fuzz {

inline const std::string& scratch() {
  static const std::string dir = [] {
    std::string tmpl = std::string(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") + "/ztrain_fuzz_XXXXXX";
    if (!mkdtemp(tmpl.data())) abort();
    return tmpl;
  }();
  return dir;
}

// Writes the input to scratch()/name; returns the path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace zt::fuzz
