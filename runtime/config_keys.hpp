// The configuration's keys, each declared once.
//
// [Note: one declaration per key] Every key a config file takes is one row of the table in
// runtime/config_table.cpp: its dotted name, where its value goes in Config (or, for the few
// whose reading takes code, how to read its value back), its range or allowed values, whether the
// ranks must agree on it, and one line of documentation. Everything else is derived from the rows:
// the reader (runtime/config.cpp) refuses a key with no row as unknown and reads every row with a
// field generically (type, 32-bit fit, refusals, aliases); its code reads the others only through
// `raw`, which refuses an undeclared name; the single-key range checks are the rows' ranges; the
// ranks' agreement (runtime/agreement.cpp) compares every row not marked per_rank; `ztrain config
// --list` and README.md's configuration table are printed from the rows (the config_readme test,
// scripts/config-table.sh --check, holds the README's to the printed one). The model section's dimensions are declared by
// for_each_dim (models/model_dims.hpp) and enter the table as rows of their own, in its order.
// Checks that involve several keys stay code, in check_values.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/config.hpp"

namespace zt {

// Where a key's value lives in Config. Lambdas without captures convert to these.
template <class T>
using FieldOf = T& (*)(Config&);
// A model dimension, by its position in for_each_dim.
struct DimField {
  int index;
};
// int64_t fields are element counts (DeepSpeed writes 5e8): an integral float is taken for one.
using ConfigField = std::variant<std::monostate, FieldOf<int>, FieldOf<int64_t>, FieldOf<uint64_t>, FieldOf<double>,
                                 FieldOf<bool>, FieldOf<std::string>, DimField>;

enum class KeyRole {
  value,    // a setting of the run
  alias,    // another name of the setting `alias_of`, read into the same field
  ignored,  // a DeepSpeed key that changes nothing here: its type is checked, its value unused
  refused,  // a DeepSpeed key ztrain does not implement: an error when given (other than `accepts`)
};

// The JSON a key without a field takes (a key with a field takes its field's type).
enum class KeyType { any, integer, number, boolean, string, object };

// A number's allowed range; an infinite bound is none.
struct KeyRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  bool bounded() const {
    return lo != -std::numeric_limits<double>::infinity() || hi != std::numeric_limits<double>::infinity();
  }
};

struct KeySpec {
  std::string key;  // dotted: "zero_optimization.stage"
  KeyRole role = KeyRole::value;
  ConfigField field;                  // where the value lands; none: the key is read by code, through raw()
  bool custom = false;                // read by the reader's code (through raw()) although it has a field
  KeyType type = KeyType::any;        // a key without a field: the JSON it takes
  const char* type_text = nullptr;    // the listing's type where neither says it ("string or null")
  // A key without a field that is a setting: its value as the ranks compare it and the listing shows it.
  nlohmann::json (*value)(const Config&) = nullptr;
  const char* fallback = nullptr;     // the default shown, where the reader's code (not Config) makes it
  KeyRange range;                     // numbers: the allowed values
  std::vector<std::string_view> allowed;  // strings: the allowed values
  // The range or allowed values in words, where the generic text will not do: the message is
  // "must be <text>, got V" (a range) or "expected <text>, got V" (allowed values).
  const char* range_text = nullptr;
  bool (*checked_when)(const Config&) = nullptr;  // the range holds only when this is true
  bool (*applies)(const nlohmann::json& root) = nullptr;  // the key exists only when this is true
  bool per_rank = false;  // each rank's own (paths, threads, tuning): the ranks need not agree on it
  bool nullable = false;  // null is taken and leaves the default
  std::string_view alias_of;           // KeyRole::alias: the key it is another name of
  const char* warning = nullptr;       // said on stderr when given (a deprecated name)
  const char* refusal = nullptr;       // KeyRole::refused: the message after the key
  const char* accepts = nullptr;       // KeyRole::refused: the one value (JSON) taken, as changing nothing
  std::string_view doc;                // one line
};

// Every key, in the order the reader reads them (the model's dimensions where model.* sits).
std::span<const KeySpec> config_table();
// The row of a dotted key; nullptr when none.
const KeySpec* find_key(std::string_view key);
// Whether `path` is a section: an object some key lies within ("zero_optimization.offload_param").
bool is_config_section(std::string_view path);

// A setting's value in c, as JSON (its field's, or its value()); null for keys that are not settings.
nlohmann::json key_value(const KeySpec& k, const Config& c);
// Reads v into k's field: a ConfigError naming the key where v is not of the field's type.
void read_key_value(const KeySpec& k, Config& c, const nlohmann::json& v);
// What v must be to be a value of k ("an integer"); nullptr when it is one.
const char* key_type_error(const KeySpec& k, const nlohmann::json& v);
// A number as messages show it: "0", "0.5", "1e+300".
std::string number_text(double v);
// What JSON a key takes, in words ("integer", "count (5e8 too)"); nullptr-free.
std::string key_type(const KeySpec& k);
// The default a file without the key gets, as JSON text ("" where there is none to show).
std::string key_default(const KeySpec& k);
// The range or allowed values in words ("0, 1, 2 or 3", ">= 1", "\"cpu\" or \"cuda\""); "" for none.
std::string key_range(const KeySpec& k);

// `ztrain config --list`: "table" (for a terminal), "json" or "markdown" (README.md's table).
std::string config_reference(std::string_view format);

}  // namespace zt
