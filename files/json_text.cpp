#include "files/json_text.hpp"

namespace zt {

namespace {

// Appends v as compact JSON to out, stopping soon after out holds more than `limit` characters:
// every level of nesting adds a character, so the recursion ends within `limit` levels.
template <class Json>
void dump_prefix(const Json& v, std::string& out, size_t limit) {
  // Strings (and keys) are cut before they are escaped; a cut inside a UTF-8 sequence is replaced.
  auto quoted = [&](const std::string& s) {
    out += Json(s.substr(0, limit)).dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  if (v.is_object() || v.is_array()) {
    out += v.is_object() ? '{' : '[';
    for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
      if (it != v.begin()) out += ',';
      if (v.is_object()) {
        quoted(it.key());
        out += ':';
      }
      dump_prefix(*it, out, limit);
    }
    out += v.is_object() ? '}' : ']';
  } else if (v.is_string()) {
    quoted(v.template get_ref<const std::string&>());
  } else {
    out += v.dump();
  }
}

template <class Json>
std::string show(const Json& v, size_t limit) {
  std::string s;
  dump_prefix(v, s, limit);
  return s.size() > limit ? s.substr(0, limit > 3 ? limit - 3 : 0) + "..." : s;
}

}  // namespace

std::string json_detail::parse_error_text(const char* what) {
  std::string msg = what;
  if (const size_t close = msg.find("] "); msg.starts_with("[json.exception") && close != std::string::npos)
    msg.erase(0, close + 2);
  return msg;
}

std::string show_json(const nlohmann::json& v, size_t limit) { return show(v, limit); }
std::string show_json(const nlohmann::ordered_json& v, size_t limit) { return show(v, limit); }

}  // namespace zt
