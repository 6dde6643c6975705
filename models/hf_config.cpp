#include "models/hf_config.hpp"

#include <cstdint>
#include <stdexcept>

#include "files/json_text.hpp"

namespace zt {

using nlohmann::json;

void HfConfig::fail(const std::string& key, const std::string& what) const {
  throw std::runtime_error("'" + path_ + "': " + key + ": " + what);
}

const json* HfConfig::find(const json& in, const char* key) {
  const auto it = in.find(key);
  return it == in.end() || it->is_null() ? nullptr : &*it;
}

int HfConfig::integer(const char* key, std::optional<int> fallback) const {
  const json* v = find(key);
  if (!v) {
    if (fallback) return *fallback;
    fail(key, "missing");
  }
  if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > INT32_MAX)
    fail(key, "expected a positive integer, got " + show_json(*v));
  return v->get<int>();
}

double HfConfig::number(const json& in, const char* key, double fallback) const {
  const json* v = find(in, key);
  if (!v) return fallback;
  if (!v->is_number()) fail(key, "expected a number, got " + show_json(*v));
  return v->get<double>();
}

bool HfConfig::flag(const char* key, bool fallback) const {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(key, "expected true or false, got " + show_json(*v));
  return v->get<bool>();
}

}  // namespace zt
