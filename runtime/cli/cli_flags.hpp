// The command line's values, each checked against what its flag takes, so a bad value is a usage
// error naming the flag (exit status 2) and never a number that silently wrapped or a library's
// bare exception text (the flags themselves: runtime/cli/commands.hpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace zt {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An integer in [lo, hi], written in decimal and nothing else ("12", "-3"; not "12x", " 12", "1e3").
int64_t int_flag(const std::string& flag, const std::string& value, int64_t lo, int64_t hi);
// A seed: any 64-bit unsigned integer.
uint64_t seed_flag(const std::string& flag, const std::string& value);
// A size in bytes as Hugging Face writes max_shard_size: a whole number with an optional decimal
// unit ("5GB", "500MB", "10KB", "1234"), at least 1 byte.
uint64_t byte_size_flag(const std::string& flag, const std::string& value);
// A finite number >= lo ("0.8", "1e-2"; not "nan", "inf").
double number_flag(const std::string& flag, const std::string& value, double lo);

}  // namespace zt
