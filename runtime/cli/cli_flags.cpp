#include "runtime/cli/cli_flags.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <system_error>

namespace zt {

namespace {

// The whole of `value` as a T: std::from_chars takes no sign '+', no spaces and no locale, and
// says when the number is out of T's range rather than wrapping it.
template <class T>
std::errc parse_whole(const std::string& value, T& out) {
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec == std::errc() && ptr != end) return std::errc::invalid_argument;
  return value.empty() ? std::errc::invalid_argument : ec;
}

}  // namespace

int64_t int_flag(const std::string& flag, const std::string& value, int64_t lo, int64_t hi) {
  int64_t x = 0;
  const std::errc ec = parse_whole(value, x);
  if (ec == std::errc::invalid_argument) throw UsageError(flag + " expects an integer, got '" + value + "'");
  if (ec != std::errc() || x < lo || x > hi)
    throw UsageError(flag + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + value);
  return x;
}

uint64_t seed_flag(const std::string& flag, const std::string& value) {
  uint64_t x = 0;
  const std::errc ec = parse_whole(value, x);
  if (ec != std::errc())
    throw UsageError(flag + " expects an integer in [0, 18446744073709551615], got '" + value + "'");
  return x;
}

uint64_t byte_size_flag(const std::string& flag, const std::string& value) {
  static const std::pair<const char*, uint64_t> kUnits[] = {{"GB", 1'000'000'000}, {"MB", 1'000'000}, {"KB", 1'000}, {"B", 1}};
  std::string digits = value;
  uint64_t unit = 1;
  for (const auto& [suffix, bytes] : kUnits)
    if (value.size() > std::strlen(suffix) && value.ends_with(suffix)) {
      digits = value.substr(0, value.size() - std::strlen(suffix));
      unit = bytes;
      break;
    }
  uint64_t x = 0;
  const std::errc ec = parse_whole(digits, x);
  if (ec != std::errc() || x == 0 || x > UINT64_MAX / unit)
    throw UsageError(flag + " expects a size such as 5GB, 500MB or 1000000 (bytes), got '" + value + "'");
  return x * unit;
}

double number_flag(const std::string& flag, const std::string& value, double lo) {
  double x = 0;
  const std::errc ec = parse_whole(value, x);
  if (ec == std::errc::invalid_argument) throw UsageError(flag + " expects a number, got '" + value + "'");
  if (ec != std::errc() || !std::isfinite(x) || x < lo) {
    char min[32];
    std::snprintf(min, sizeof min, "%g", lo);
    throw UsageError(flag + " must be a finite number >= " + min + ", got " + value);
  }
  return x;
}

}  // namespace zt
