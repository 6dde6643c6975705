// "File too large (EFBIG)": the message and the name, for errors that name an errno. Internal to
// offload/.
#pragma once

#include <cstring>
#include <string>

namespace zt::detail {

inline std::string errno_text(int err) {
  const char* name = ::strerrorname_np(err);
  return std::string(std::strerror(err)) + " (" + (name ? name : "errno " + std::to_string(err)) + ")";
}

}  // namespace zt::detail
