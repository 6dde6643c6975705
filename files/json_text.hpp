// JSON read from files and shown in messages, bounded. [Note: JSON from files]
//
// [Note: JSON from files] Every JSON ztrain reads (other tools' files: a Hugging Face config.json,
// a safetensors header or index, a tokenizer.json, PEFT's adapter_config.json; chat data and
// tokenize's .jsonl lines; a checkpoint's meta.json, the cluster file, a metrics file resumed) is
// parsed through parse_json, whose nesting is bounded, and a value is named in a message through
// show_json, which writes its first characters only. nlohmann's parser and destructor are
// iterative, but dump(), copies and any reader walking a value recurse once per level: a file
// nested 300,000 deep (a config.json's "architectures", a header's "data_offsets", a
// tokenizer.json's Sequence of pre-tokenizers) overflowed the stack with no message. No format
// ztrain reads nests deeper than a handful of levels; kJsonMaxDepth leaves room for any of them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zt {

inline constexpr int kJsonMaxDepth = 64;

template <class Json = nlohmann::json>
struct JsonParsed {
  Json value;         // discarded when error is set
  std::string error;  // why the text is not JSON ztrain reads (with nlohmann's line and column), or ""
  bool ok() const { return error.empty(); }
};

namespace json_detail {
struct TooDeep {};
// nlohmann's "[json.exception.x.y] " tag dropped; the rest has the line and column.
std::string parse_error_text(const char* what);
}  // namespace json_detail

// `text` as JSON (nlohmann::json, or ordered_json where the file's key order matters); arrays and
// objects nested deeper than `max_depth` are an error, as a syntax error is (never an exception).
template <class Json = nlohmann::json>
JsonParsed<Json> parse_json(std::string_view text, int max_depth = kJsonMaxDepth) {
  // nlohmann's callback sees each container open with the depth of those already open.
  const auto bounded = [max_depth](int depth, typename Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) && depth >= max_depth)
      throw json_detail::TooDeep{};
    return true;
  };
  JsonParsed<Json> p;
  try {
    p.value = Json::parse(text.begin(), text.end(), bounded);
  } catch (const json_detail::TooDeep&) {
    p.value = Json(Json::value_t::discarded);
    p.error = "arrays or objects nest more than " + std::to_string(max_depth) + " deep";
  } catch (const typename Json::exception& e) {  // a syntax error, or a number too large for a double
    p.value = Json(Json::value_t::discarded);
    p.error = json_detail::parse_error_text(e.what());
  }
  return p;
}

// `v` as compact JSON, cut to `limit` characters ("..." at the end when cut): a value of millions
// of elements costs what is shown, and the recursion ends within `limit` levels however deep `v`.
std::string show_json(const nlohmann::json& v, size_t limit = 60);
std::string show_json(const nlohmann::ordered_json& v, size_t limit = 60);

}  // namespace zt
