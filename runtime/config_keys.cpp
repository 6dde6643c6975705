// What is derived from each key's row ([Note: one declaration per key] in runtime/config_keys.hpp):
// its value in a Config, its type, default and range in words, and the reference that
// `ztrain config --list` prints and README.md's configuration table holds.
#include "runtime/config_keys.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>
#include <type_traits>

#include "files/json_text.hpp"
#include "models/model_dims.hpp"

namespace zt {
namespace {

using nlohmann::json;

// Calls f(the field's reference) for k's field in c, a model dimension's too; false when k has none.
template <class F>
bool visit_field(const KeySpec& k, Config& c, F&& f) {
  return std::visit(
      [&](auto field) {
        using T = decltype(field);
        if constexpr (std::is_same_v<T, std::monostate>) {
          return false;
        } else if constexpr (std::is_same_v<T, DimField>) {
          int i = 0;
          for_each_dim([&](const char*, auto& v) { if (i++ == field.index) f(v); }, c.model.dims);
          return true;
        } else {
          f(field(c));
          return true;
        }
      },
      k.field);
}

// What a value must be to fill a field of the pointed-to type; nullptr when it is that. Integers
// must be integral JSON numbers (3.0 is not), while floats accept integers; counts take 5e8.
const char* expected(const json& v, const int*) { return v.is_number_integer() ? nullptr : "an integer"; }
const char* expected(const json& v, const uint64_t*) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0) ? nullptr : "a non-negative integer";
}
const char* expected(const json& v, const int64_t*) {
  const double d = v.is_number() ? v.get<double>() : -1.0;
  return v.is_number() && d >= 0 && d == std::floor(d) && d <= 9.0e18 ? nullptr : "a non-negative whole number of elements";
}
const char* expected(const json& v, const double*) { return v.is_number() ? nullptr : "a number"; }
const char* expected(const json& v, const bool*) { return v.is_boolean() ? nullptr : "true or false"; }
const char* expected(const json& v, const std::string*) { return v.is_string() ? nullptr : "a string"; }

const char* type_name(const int*) { return "integer"; }
const char* type_name(const uint64_t*) { return "integer >= 0"; }
const char* type_name(const int64_t*) { return "count (5e8 too)"; }
const char* type_name(const double*) { return "number"; }
const char* type_name(const bool*) { return "true|false"; }
const char* type_name(const std::string*) { return "string"; }

[[noreturn]] void fail(const std::string& key, const std::string& what) { throw ConfigError("config: " + key + ": " + what); }

}  // namespace

std::string number_text(double v) {
  std::string s = show_json(json(v));
  return s.ends_with(".0") ? s.substr(0, s.size() - 2) : s;
}

const KeySpec* find_key(std::string_view key) {
  const auto table = config_table();
  const auto it = std::find_if(table.begin(), table.end(), [&](const KeySpec& k) { return k.key == key; });
  return it == table.end() ? nullptr : &*it;
}

bool is_config_section(std::string_view path) {
  if (path.empty()) return true;
  for (const KeySpec& k : config_table())
    if (k.key.size() > path.size() && k.key.starts_with(path) && k.key[path.size()] == '.') return true;
  return false;
}

json key_value(const KeySpec& k, const Config& c) {
  if (k.role != KeyRole::value) return nullptr;
  if (k.value) return k.value(c);
  json out;
  visit_field(k, const_cast<Config&>(c), [&](const auto& v) { out = v; });  // reads only
  return out;
}

const char* key_type_error(const KeySpec& k, const json& v) {
  const char* want = nullptr;
  if (visit_field(k, *std::make_unique<Config>(), [&](const auto& f) { want = expected(v, &f); })) return want;
  switch (k.type) {
    case KeyType::integer: return v.is_number_integer() ? nullptr : "an integer";
    case KeyType::number: return v.is_number() ? nullptr : "a number";
    case KeyType::boolean: return v.is_boolean() ? nullptr : "true or false";
    case KeyType::string: return v.is_string() ? nullptr : "a string";
    case KeyType::object: return v.is_object() ? nullptr : "an object";
    case KeyType::any: return nullptr;
  }
  return nullptr;
}

void read_key_value(const KeySpec& k, Config& c, const json& v) {
  visit_field(k, c, [&](auto& dst) {
    using T = std::decay_t<decltype(dst)>;
    if (const char* want = expected(v, &dst)) fail(k.key, std::string("expected ") + want + ", got " + show_json(v));
    if constexpr (std::is_same_v<T, int>) {
      if (v.is_number_unsigned() ? v.get<uint64_t>() > INT_MAX : v.get<int64_t>() < INT_MIN || v.get<int64_t>() > INT_MAX)
        fail(k.key, show_json(v) + " does not fit in a 32-bit integer");
    }
    if constexpr (std::is_same_v<T, int64_t>) dst = v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>());
    else dst = v.get<T>();
  });
}

std::string key_type(const KeySpec& k) {
  if (k.type_text) return k.type_text;
  if (k.role == KeyRole::refused && !k.accepts) return "refused (not implemented)";
  std::string name;
  if (visit_field(k, *std::make_unique<Config>(), [&](const auto& f) { name = type_name(&f); })) return name;
  switch (k.type) {
    case KeyType::integer: return "integer";
    case KeyType::number: return "number";
    case KeyType::boolean: return "true|false";
    case KeyType::string: return "string";
    case KeyType::object: return "object";
    case KeyType::any: return "value";
  }
  return "value";
}

std::string key_default(const KeySpec& k) {
  if (k.fallback) return k.fallback;
  if (k.role != KeyRole::value) return "";
  return show_json(key_value(k, *std::make_unique<Config>()));
}

std::string key_range(const KeySpec& k) {
  if (k.range_text) return k.range_text;
  if (k.accepts) return std::string("only ") + k.accepts;
  if (!k.allowed.empty()) {
    std::string s;
    for (size_t i = 0; i < k.allowed.size(); ++i)
      s += (i == 0 ? "" : i + 1 == k.allowed.size() ? " or " : ", ") + ("\"" + std::string(k.allowed[i]) + "\"");
    return s;
  }
  const KeyRange& r = k.range;
  if (!r.bounded()) return "";
  const bool lo = std::isfinite(r.lo), hi = std::isfinite(r.hi);
  if (lo && hi)
    return std::string("in ") + (r.lo_open ? "(" : "[") + number_text(r.lo) + ", " + number_text(r.hi) + (r.hi_open ? ")" : "]");
  if (lo) return (r.lo_open ? "> " : ">= ") + number_text(r.lo);
  return (r.hi_open ? "< " : "<= ") + number_text(r.hi);
}

namespace {

std::string markdown_cell(std::string s) {
  for (size_t at = s.find('|'); at != std::string::npos; at = s.find('|', at + 2)) s.replace(at, 1, "\\|");
  return s;
}

std::string ranks_text(const KeySpec& k) {
  if (k.role != KeyRole::value) return "";
  return k.per_rank ? "own" : "agree";
}

// The doc line, naming the key an alias is another name of.
std::string doc_text(const KeySpec& k) {
  std::string doc(k.doc);
  if (k.role == KeyRole::alias) doc += " (another name of " + std::string(k.alias_of) + ")";
  return doc;
}

// Consecutive refused keys with one refusal and no accepted value: one row of the README.
bool same_refusal(const KeySpec& a, const KeySpec& b) {
  return a.role == KeyRole::refused && b.role == KeyRole::refused && !a.accepts && !b.accepts && !a.custom && !b.custom &&
         a.refusal && b.refusal && std::string_view(a.refusal) == b.refusal;
}

}  // namespace

std::string config_reference(std::string_view format) {
  const auto table = config_table();
  std::ostringstream out;
  if (format == "json") {
    json rows = json::array();
    for (const KeySpec& k : table)
      rows.push_back({{"key", k.key}, {"type", key_type(k)}, {"default", key_default(k)}, {"range", key_range(k)},
                      {"ranks", ranks_text(k)}, {"doc", doc_text(k)}});
    out << rows.dump(1) << "\n";
    return out.str();
  }
  if (format == "markdown") {
    out << "| key | type | default | allowed | ranks | meaning |\n| --- | --- | --- | --- | --- | --- |\n";
    for (size_t i = 0; i < table.size();) {
      size_t j = i + 1;
      while (j < table.size() && same_refusal(table[i], table[j])) ++j;
      std::string keys;
      for (size_t n = i; n < j; ++n) keys += (n == i ? "`" : ", `") + table[n].key + "`";
      const KeySpec& k = table[i];
      const std::string fallback = key_default(k);
      out << "| " << keys << " | " << markdown_cell(key_type(k)) << " | "
          << (fallback.empty() ? "" : "`" + markdown_cell(fallback) + "`") << " | " << markdown_cell(key_range(k)) << " | "
          << ranks_text(k) << " | " << markdown_cell(doc_text(k)) << " |\n";
      i = j;
    }
    return out.str();
  }
  size_t width = 0;
  for (const KeySpec& k : table) width = std::max(width, k.key.size());
  out << "The keys of ztrain's configuration file (README.md's Configuration has this table); --set KEY=VALUE\n"
         "gives any of them on the command line. \"own\": each rank's own; every other setting must be equal on\n"
         "every rank.\n\n";
  for (const KeySpec& k : table) {
    std::string line = k.key;
    line.resize(width + 2, ' ');
    const std::string type = key_type(k);
    line += type;
    const std::string fallback = key_default(k);
    if (!fallback.empty()) line += (type.size() < 14 ? std::string(14 - type.size(), ' ') : " ") + "default " + fallback;
    if (const std::string range = key_range(k); !range.empty()) line += "  (" + range + ")";
    if (k.role == KeyRole::value && k.per_rank) line += "  [own]";
    line += "  " + doc_text(k);
    out << line << "\n";
  }
  return out.str();
}

}  // namespace zt
