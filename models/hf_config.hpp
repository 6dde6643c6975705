// A Hugging Face config.json as a model spec reads its dims from it (ModelSpec::dims_from_hf):
// typed lookups that name the file and the key of what they refuse.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace zt {

class HfConfig {
 public:
  // `architecture`: the one name of config.json's "architectures" (e.g. "LlamaForCausalLM").
  HfConfig(std::string path, nlohmann::json j, std::string architecture)
      : path_(std::move(path)), j_(std::move(j)), architecture_(std::move(architecture)) {}

  const std::string& path() const { return path_; }
  const std::string& architecture() const { return architecture_; }
  const nlohmann::json& root() const { return j_; }

  // std::runtime_error "'<path>': <key>: <what>".
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  // The key's value in `in` (the top level by default); nullptr where absent or null.
  const nlohmann::json* find(const char* key) const { return find(j_, key); }
  static const nlohmann::json* find(const nlohmann::json& in, const char* key);
  // A positive 32-bit integer; `fallback` where absent (else missing is an error).
  int integer(const char* key, std::optional<int> fallback = std::nullopt) const;
  double number(const nlohmann::json& in, const char* key, double fallback) const;
  double number(const char* key, double fallback) const { return number(j_, key, fallback); }
  bool flag(const char* key, bool fallback) const;

 private:
  std::string path_;
  nlohmann::json j_;
  std::string architecture_;
};

}  // namespace zt
