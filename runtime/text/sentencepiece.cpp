#include "runtime/text/sentencepiece.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "runtime/text/tokenizer.hpp"

namespace zt {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // '▁', U+2581

// '▁' as a space, appended to out.
void unescape(std::string_view s, std::string& out) {
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i, kSpace.size()) == kSpace) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += s[i++];
    }
  }
}

}  // namespace

std::string_view sentencepiece_text(std::string_view text, const SentencePieceRules& rules, bool first, std::string& buf) {
  using P = SentencePieceRules::Prefix;
  buf.clear();
  unescape(text, buf);
  const bool starts_spaced = !buf.empty() && buf[0] == ' ';
  const bool prefix = !buf.empty() && (rules.prefix == P::always || (rules.prefix == P::unless_space && !starts_spaced) ||
                                       (rules.prefix == P::first && first && !starts_spaced));
  if (prefix) buf.insert(buf.begin(), ' ');
  return buf;
}

size_t utf8_char_bytes(std::string_view s) {
  const auto c = static_cast<unsigned char>(s[0]);
  size_t len;
  uint32_t min;  // the smallest code point of that length: shorter forms are not UTF-8
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) len = 2, min = 0x80;
  else if ((c & 0xF0) == 0xE0) len = 3, min = 0x800;
  else if ((c & 0xF8) == 0xF0) len = 4, min = 0x10000;
  else return 1;
  if (len > s.size()) return 1;
  uint32_t cp = c & (0x7Fu >> len);
  for (size_t k = 1; k < len; ++k) {
    const auto d = static_cast<unsigned char>(s[k]);
    if ((d & 0xC0) != 0x80) return 1;
    cp = cp << 6 | (d & 0x3Fu);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 1;
  return len;
}

void read_sentencepiece_pieces(TokenizerSpec& spec, const std::vector<std::string>& pieces, const std::vector<bool>& literal,
                               bool byte_fallback) {
  SentencePieceRules& rules = spec.sentencepiece.value();
  spec.tokens.assign(pieces.size(), std::string());
  std::vector<int32_t> bytes(256, -1);
  for (size_t id = 0; id < pieces.size(); ++id) {
    const std::string& p = pieces[id];
    if (literal[id]) {
      spec.tokens[id] = p;
      continue;
    }
    unsigned byte = 0;
    char tail = 0;
    if (p.size() == 6 && std::sscanf(p.c_str(), "<0x%2X%c", &byte, &tail) == 2 && tail == '>') {
      spec.tokens[id] = std::string(1, static_cast<char>(byte));
      if (bytes[byte] < 0) bytes[byte] = static_cast<int32_t>(id);
      continue;
    }
    unescape(p, spec.tokens[id]);
  }
  if (!byte_fallback) return;
  const auto missing = std::find(bytes.begin(), bytes.end(), -1);
  if (missing != bytes.end()) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", unsigned(missing - bytes.begin()));
    throw TokenizerError("tokenizer: " + spec.source + ": byte_fallback is set but the vocabulary has no byte token " + name +
                         " (" + std::to_string(std::count(bytes.begin(), bytes.end(), -1)) + " of the 256 <0xNN> are missing)");
  }
  rules.byte_tokens = std::move(bytes);
}

void merges_from_scores(TokenizerSpec& spec, const std::vector<double>& scores, const std::vector<bool>& ordinary) {
  // Ranks: the distinct scores, highest first.
  std::map<double, int32_t, std::greater<>> rank_of;
  for (size_t id = 0; id < scores.size(); ++id)
    if (ordinary[id]) rank_of.emplace(scores[id], 0);
  int32_t next = 0;
  for (auto& [score, rank] : rank_of) rank = next++;
  std::unordered_map<std::string_view, int32_t> ids;
  for (size_t id = 0; id < spec.tokens.size(); ++id)
    if (ordinary[id] && !spec.tokens[id].empty()) ids.emplace(spec.tokens[id], static_cast<int32_t>(id));
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const std::string_view t = spec.tokens[id];
    if (!ordinary[id] || t.empty() || ids.at(t) != static_cast<int32_t>(id)) continue;  // a repeated piece: the first id is the token
    for (size_t k = 1; k < t.size(); ++k) {
      const auto a = ids.find(t.substr(0, k)), b = ids.find(t.substr(k));
      if (a != ids.end() && b != ids.end()) spec.merges.push_back({a->second, b->second, rank_of.at(scores[id])});
    }
  }
}

}  // namespace zt
