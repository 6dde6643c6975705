#include "runtime/text/tokenizer_files.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "files/gguf_file.hpp"
#include "files/json_text.hpp"

namespace zt {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The pre-tokenizers' patterns, as the tokenizers' own files write them.
// GPT-2's (Hugging Face's ByteLevel pre-tokenizer with use_regex, and tiktoken's r50k_base).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's Split step (tiktoken's cl100k_base); Qwen2 takes digits one at a time.
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The document separator, by the names the families give it.
constexpr std::array kEndOfTextNames = {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"};

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw TokenizerError("tokenizer: " + source + ": " + what);
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) fail(path, "read failed");
  return s.str();
}

// [Note: byte-level alphabet] GPT-2 writes each byte of a token as one printable character: the
// bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF as the code point of the same value, the other 68
// (controls, space, 0x7F..0xA0, 0xAD) as U+0100 onwards in byte order. Space is "Ġ" (U+0120).
class ByteAlphabet {
 public:
  ByteAlphabet() {
    byte_of_.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byte_of_[size_t(printable ? b : next++)] = b;
    }
  }
  // The bytes a token string stands for; nullopt when it holds a character outside the alphabet
  // or is not UTF-8.
  std::optional<std::string> decode(std::string_view s) const {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      uint32_t cp;
      size_t len;
      if (c < 0x80) cp = c, len = 1;
      else if ((c & 0xE0) == 0xC0) cp = c & 0x1Fu, len = 2;
      else return std::nullopt;  // 3- and 4-byte characters are all beyond U+0143
      if (i + len > s.size()) return std::nullopt;
      for (size_t k = 1; k < len; ++k) {
        const auto d = static_cast<unsigned char>(s[i + k]);
        if ((d & 0xC0) != 0x80) return std::nullopt;
        cp = cp << 6 | (d & 0x3Fu);
      }
      if (cp >= byte_of_.size() || byte_of_[cp] < 0) return std::nullopt;
      out += static_cast<char>(byte_of_[cp]);
      i += len;
    }
    return out;
  }

 private:
  std::array<int, 324> byte_of_;  // code point -> byte, -1 outside the alphabet
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

// The vocabulary's token strings as bytes; the added tokens' texts are taken as they are (they
// are matched in the text, not built from bytes).
std::vector<std::string> byte_tokens(const std::string& source, const std::vector<std::string>& strings,
                                     const std::vector<bool>& literal) {
  std::vector<std::string> tokens(strings.size());
  for (size_t id = 0; id < strings.size(); ++id) {
    if (literal[id]) {
      tokens[id] = strings[id];
      continue;
    }
    if (strings[id].empty()) continue;
    auto bytes = alphabet().decode(strings[id]);
    if (!bytes)
      fail(source, "token " + std::to_string(id) + " '" + strings[id] +
                       "' is not written in the byte-level alphabet (a SentencePiece vocabulary?); only byte-level BPE is supported");
    tokens[id] = std::move(*bytes);
  }
  return tokens;
}

int32_t end_of_text_by_name(const TokenizerSpec& spec) {
  for (const char* name : kEndOfTextNames)
    for (int32_t id : spec.specials)
      if (spec.tokens[size_t(id)] == name) return id;
  return -1;
}

// Merges written as "left right" (tokenizer.json before tokenizers 0.20, GGUF) or [left, right].
std::vector<TokenizerSpec::Merge> merges_of(const std::string& source, const std::vector<std::pair<std::string, std::string>>& pairs,
                                            const std::unordered_map<std::string, int32_t>& ids) {
  std::vector<TokenizerSpec::Merge> merges;
  merges.reserve(pairs.size());
  for (size_t r = 0; r < pairs.size(); ++r) {
    const auto a = ids.find(pairs[r].first), b = ids.find(pairs[r].second);
    if (a == ids.end() || b == ids.end())
      fail(source, "merge " + std::to_string(r) + " ('" + pairs[r].first + "' '" + pairs[r].second +
                       "') names a token the vocabulary does not hold");
    merges.push_back({a->second, b->second, static_cast<int32_t>(r)});
  }
  return merges;
}

std::pair<std::string, std::string> split_merge(const std::string& source, const std::string& m, size_t r) {
  const size_t space = m.find(' ');
  if (space == std::string::npos || m.find(' ', space + 1) != std::string::npos)
    fail(source, "merge " + std::to_string(r) + " '" + m + "' is not two tokens separated by one space");
  return {m.substr(0, space), m.substr(space + 1)};
}

// ---- tokenizer.json -------------------------------------------------------------------------------

// What the normalizer does: Qwen2's NFC, SentencePiece's Replace(" ", "▁") and Prepend("▁")
// (Llama 2, Mistral, Gemma), alone or in a Sequence.
struct Normalizer {
  bool nfc = false, replace_spaces = false, prepend = false;
};

// Hugging Face's pre-tokenizer: split patterns, and whether a ByteLevel step was seen (the
// vocabulary is then written in the byte-level alphabet) or a Metaspace one.
struct PreTokenizer {
  std::vector<std::string> patterns;
  bool byte_level = false;
  std::optional<SentencePieceRules> metaspace;
};

constexpr const char* kMetaspace = "\xE2\x96\x81";  // '▁'

void read_pre_tokenizer(const std::string& source, const json& p, const Normalizer& norm, PreTokenizer& out) {
  if (p.is_null()) return;
  const std::string type = p.value("type", "");
  if (type == "Sequence") {
    for (const json& step : p.at("pretokenizers")) read_pre_tokenizer(source, step, norm, out);
    return;
  }
  if (type == "ByteLevel") {
    if (p.value("add_prefix_space", false))
      fail(source, "the ByteLevel pre-tokenizer's add_prefix_space is not supported (no GPT-2, Llama 3, Qwen2 or SmolLM2 tokenizer sets it)");
    if (p.value("use_regex", true)) out.patterns.emplace_back(kGpt2Pattern);
    out.byte_level = true;
    return;
  }
  if (type == "Metaspace") {  // [Note: SentencePiece-style BPE] in runtime/text/sentencepiece.hpp
    if (p.value("replacement", kMetaspace) != std::string(kMetaspace))
      fail(source, "the Metaspace pre-tokenizer's replacement '" + p.value("replacement", "") + "' is not supported (only '▁')");
    using P = SentencePieceRules::Prefix;
    SentencePieceRules rules;
    const std::string scheme = p.value("prepend_scheme", p.value("add_prefix_space", true) ? "always" : "never");
    if (scheme == "always") rules.prefix = P::unless_space;
    else if (scheme == "first") rules.prefix = P::first;
    else if (scheme == "never") rules.prefix = P::none;
    else fail(source, "the Metaspace pre-tokenizer's prepend_scheme '" + scheme + "' is not supported (always, first, never)");
    rules.split = p.value("split", true);
    out.metaspace = rules;
    return;
  }
  if (type == "Digits") {
    out.patterns.emplace_back(p.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
    return;
  }
  // Gemma's Split(" ", merged_with_previous) after its Replace(" ", "▁") normalizer finds no space.
  if (type == "Split" && norm.replace_spaces && p.at("pattern").value("String", "") == " ") return;
  if (type == "Split") {
    const std::string behavior = p.value("behavior", "");
    if (behavior != "Isolated")
      fail(source, "the Split pre-tokenizer's behavior '" + behavior + "' is not supported (only \"Isolated\")");
    if (p.value("invert", false)) fail(source, "the Split pre-tokenizer's invert is not supported");
    const json& pat = p.at("pattern");
    if (pat.contains("Regex")) out.patterns.push_back(pat.at("Regex").get<std::string>());
    else out.patterns.push_back("\\Q" + pat.at("String").get<std::string>() + "\\E");  // a literal
    return;
  }
  fail(source, "the pre-tokenizer '" + type + "' is not supported (ByteLevel, Metaspace, Split, Digits and Sequence are)");
}

void read_normalizer(const std::string& source, const json& n, Normalizer& out) {
  if (n.is_null()) return;
  const std::string type = n.value("type", "?");
  if (type == "NFC") {
    out.nfc = true;
  } else if (type == "Sequence") {
    for (const json& step : n.at("normalizers")) read_normalizer(source, step, out);
  } else if (type == "Replace") {
    if (n.at("pattern").value("String", "") != " " || n.value("content", "") != kMetaspace)
      fail(source, "the Replace normalizer is supported only as SentencePiece's, of \" \" by \"▁\"");
    out.replace_spaces = true;
  } else if (type == "Prepend") {
    if (n.value("prepend", "") != kMetaspace) fail(source, "the Prepend normalizer is supported only as SentencePiece's, of \"▁\"");
    out.prepend = true;
  } else {
    fail(source, "the normalizer '" + type + "' is not supported (NFC, and SentencePiece's Replace and Prepend of '▁' are)");
  }
}

TokenizerSpec tokenizer_json(const std::string& path) {
  json j;
  try {
    JsonParsed<json> parsed = parse_json(read_whole(path));  // [Note: JSON from files] in files/json_text.hpp
    if (!parsed.ok()) fail(path, "not a usable tokenizer.json: not valid JSON: " + parsed.error);
    j = std::move(parsed.value);
    TokenizerSpec spec;
    spec.source = path;
    const json& model = j.at("model");
    const std::string type = model.value("type", "");
    if (type != "BPE") fail(path, "model type '" + type + "' is not supported (only byte-level \"BPE\")");
    if (!model.value("dropout", json()).is_null()) fail(path, "BPE dropout is not supported");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (const json v = model.value(key, json()); !v.is_null() && !v.get<std::string>().empty())
        fail(path, std::string("BPE's ") + key + " is not supported");
    Normalizer norm;
    read_normalizer(path, j.value("normalizer", json()), norm);
    spec.nfc = norm.nfc;
    PreTokenizer pre;
    read_pre_tokenizer(path, j.value("pre_tokenizer", json()), norm, pre);
    spec.split_patterns = std::move(pre.patterns);
    const bool sentencepiece = norm.replace_spaces || pre.metaspace;
    if (pre.byte_level && sentencepiece)
      fail(path, "mixes a ByteLevel pre-tokenizer with SentencePiece's '▁' (Metaspace or Replace): not supported");
    if (!pre.byte_level && !sentencepiece)
      fail(path, "is neither byte-level BPE (a ByteLevel pre-tokenizer: GPT-2, Llama 3, Qwen2, SmolLM2) nor SentencePiece-style "
                 "BPE (a Metaspace pre-tokenizer or a Replace(\" \", \"▁\") normalizer: Llama 2, Mistral, Gemma)");
    if (norm.prepend && !norm.replace_spaces && !pre.metaspace)
      fail(path, "has a Prepend(\"▁\") normalizer but writes spaces as they are (no Replace or Metaspace): not supported");
    if (sentencepiece) {  // [Note: SentencePiece-style BPE] in runtime/text/sentencepiece.hpp
      spec.sentencepiece = pre.metaspace.value_or(SentencePieceRules{});
      if (!pre.metaspace) spec.sentencepiece->split = false;
      if (norm.prepend) spec.sentencepiece->prefix = SentencePieceRules::Prefix::always;
    }
    const bool byte_fallback = model.value("byte_fallback", false);
    if (byte_fallback && !sentencepiece) fail(path, "BPE's byte_fallback is supported only for a SentencePiece-style vocabulary");
    spec.ignore_merges = model.value("ignore_merges", false);

    std::vector<std::string> strings;
    std::vector<bool> literal;
    // Ids are dense in every real vocabulary; a stray huge one would allocate its whole range.
    const int64_t max_id = 4 * int64_t(model.at("vocab").size() + j.value("added_tokens", json::array()).size()) + 1024;
    auto put = [&](int64_t id, const std::string& s, bool lit) {
      if (id < 0 || id >= max_id)
        fail(path, "token id " + std::to_string(id) + " for '" + s + "' is out of range for a vocabulary of " +
                       std::to_string(model.at("vocab").size()) + " entries");
      if (size_t(id) >= strings.size()) strings.resize(size_t(id) + 1), literal.resize(size_t(id) + 1);
      strings[size_t(id)] = s;
      literal[size_t(id)] = lit;
    };
    std::unordered_map<std::string, int32_t> ids;  // token string -> id, as the merges name them
    for (const auto& [s, id] : model.at("vocab").items()) {
      put(id.get<int64_t>(), s, false);
      ids[s] = id.get<int32_t>();
    }
    for (const json& a : j.value("added_tokens", json::array())) {
      const std::string content = a.at("content");
      for (const char* flag : {"single_word", "lstrip", "rstrip"})
        if (a.value(flag, false))
          fail(path, "added token '" + content + "' sets " + flag + ", which is not supported");
      put(a.at("id").get<int64_t>(), content, true);
      spec.specials.push_back(a.at("id").get<int32_t>());
    }
    std::vector<std::pair<std::string, std::string>> pairs;
    const json& merges = model.at("merges");
    for (size_t r = 0; r < merges.size(); ++r)
      pairs.push_back(merges[r].is_string() ? split_merge(path, merges[r], r)
                                            : std::pair{merges[r].at(0).get<std::string>(), merges[r].at(1).get<std::string>()});
    spec.merges = merges_of(path, pairs, ids);
    if (sentencepiece) read_sentencepiece_pieces(spec, strings, literal, byte_fallback);
    else spec.tokens = byte_tokens(path, strings, literal);
    spec.end_of_text = end_of_text_by_name(spec);
    if (const json u = model.value("unk_token", json()); !u.is_null()) {
      const auto it = ids.find(u.get<std::string>());
      if (it == ids.end()) fail(path, "the unk_token '" + u.get<std::string>() + "' is not in the vocabulary");
      spec.unknown = it->second;
      spec.fuse_unknown = model.value("fuse_unk", false);
    }
    return spec;
  } catch (const json::exception& e) {
    fail(path, std::string("not a usable tokenizer.json: ") + e.what());
  }
}

// ---- GGUF ---------------------------------------------------------------------------------------

// llama.cpp's names for the pre-tokenizers (tokenizer.ggml.pre), as the patterns the families'
// tokenizer.json files split with.
std::optional<std::vector<std::string>> gguf_pre_patterns(const std::string& pre) {
  static const std::map<std::string, std::vector<std::string>> known = {
      {"gpt-2", {kGpt2Pattern}},          {"gpt2", {kGpt2Pattern}},           {"default", {kGpt2Pattern}},
      {"smollm", {R"(\p{N})", kGpt2Pattern}}, {"starcoder", {R"(\p{N})", kGpt2Pattern}},
      {"llama-bpe", {kLlama3Pattern}},    {"llama3", {kLlama3Pattern}},       {"qwen2", {kQwen2Pattern}},
  };
  const auto it = known.find(pre);
  if (it == known.end()) return std::nullopt;
  return it->second;
}

// llama.cpp's token types (tokenizer.ggml.token_type).
enum GgufTokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// "llama": SentencePiece's vocabulary as llama.cpp writes it for Llama 2, Mistral and Gemma:
// pieces with '▁' and <0xNN>, their scores, which order the merges as llama.cpp's SPM tokenizer
// does (merges_from_scores), and add_space_prefix (Gemma's false).
void gguf_sentencepiece(const GgufFile& gguf, const std::string& path, const std::vector<std::string>& strings,
                        const std::optional<std::vector<int64_t>>& types, const std::vector<bool>& literal, TokenizerSpec& spec) {
  const auto scores = gguf.meta_floats("tokenizer.ggml.scores");
  if (!scores) fail(path, "tokenizer.ggml.scores is missing (a \"llama\" vocabulary merges by its scores)");
  if (scores->size() != strings.size())
    fail(path, "tokenizer.ggml.scores has " + std::to_string(scores->size()) + " entries for " + std::to_string(strings.size()) +
                   " tokens");
  spec.sentencepiece = SentencePieceRules{};
  if (gguf.meta_bool("tokenizer.ggml.add_space_prefix").value_or(true)) spec.sentencepiece->prefix = SentencePieceRules::Prefix::always;
  bool byte_fallback = false;
  std::vector<bool> ordinary(strings.size(), true);
  for (size_t id = 0; id < strings.size(); ++id) {
    const int64_t type = types ? (*types)[id] : int64_t{kNormal};
    byte_fallback |= type == kByte;
    ordinary[id] = type == kNormal && !literal[id];
  }
  read_sentencepiece_pieces(spec, strings, literal, byte_fallback);
  merges_from_scores(spec, *scores, ordinary);
  // llama.cpp needs the byte tokens for a character the vocabulary lacks; without them it is the
  // unknown token, consecutive ones fused, as Hugging Face's conversions (fuse_unk) have it.
  if (const auto unk = gguf.meta_int("tokenizer.ggml.unknown_token_id"); unk && *unk >= 0 && *unk < int64_t(strings.size()))
    spec.unknown = static_cast<int32_t>(*unk);
  for (size_t id = 0; spec.unknown < 0 && types && id < types->size(); ++id)
    if ((*types)[id] == kUnknown) spec.unknown = static_cast<int32_t>(id);
  spec.fuse_unknown = true;
}

// "gpt2": byte-level BPE, its merges listed. tokenizer.ggml.unknown_token_id is not used for bytes
// the vocabulary lacks: the families' tokenizer.json files (SmolLM2's) set no unk_token for their
// BPE, which drops such bytes.
void gguf_byte_level(const GgufFile& gguf, const std::string& path, const std::vector<std::string>& strings,
                     const std::vector<bool>& literal, TokenizerSpec& spec) {
  std::unordered_map<std::string, int32_t> ids;
  for (size_t id = 0; id < strings.size(); ++id) ids.try_emplace(strings[id], static_cast<int32_t>(id));
  const auto merge_strings = gguf.meta_strings("tokenizer.ggml.merges");
  if (!merge_strings) fail(path, "tokenizer.ggml.merges is missing");
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t r = 0; r < merge_strings->size(); ++r) pairs.push_back(split_merge(path, (*merge_strings)[r], r));
  spec.merges = merges_of(path, pairs, ids);
  spec.tokens = byte_tokens(path, strings, literal);
}

TokenizerSpec gguf_tokenizer_of(const GgufFile& gguf, const std::string& path) {
  TokenizerSpec spec;
  spec.source = path;
  const auto model = gguf.meta_string("tokenizer.ggml.model");
  if (!model) fail(path, "holds no tokenizer (no tokenizer.ggml.model)");
  if (*model != "gpt2" && *model != "llama")
    fail(path, "tokenizer.ggml.model '" + *model + "' is not supported (byte-level BPE, \"gpt2\", and SentencePiece's BPE, \"llama\")");
  if (*model == "gpt2") {
    const std::string pre = gguf.meta_string("tokenizer.ggml.pre").value_or("default");
    auto patterns = gguf_pre_patterns(pre);
    if (!patterns)
      fail(path, "tokenizer.ggml.pre '" + pre + "' is not a pre-tokenizer ztrain knows (gpt-2, smollm, starcoder, llama-bpe, qwen2)");
    spec.split_patterns = std::move(*patterns);
    spec.ignore_merges = pre == "llama-bpe" || pre == "llama3";  // as Llama 3's tokenizer.json sets it
  }

  const auto strings = gguf.meta_strings("tokenizer.ggml.tokens");
  if (!strings || strings->empty()) fail(path, "tokenizer.ggml.tokens is missing or empty");
  const auto types = gguf.meta_ints("tokenizer.ggml.token_type");
  if (types && types->size() != strings->size())
    fail(path, "tokenizer.ggml.token_type has " + std::to_string(types->size()) + " entries for " +
                   std::to_string(strings->size()) + " tokens");
  // Control and user-defined tokens (and SentencePiece's unknown one) are matched in the text as
  // written, as llama.cpp does.
  std::vector<bool> literal(strings->size(), false);
  for (size_t id = 0; types && id < types->size(); ++id)
    if ((*types)[id] == kControl || (*types)[id] == kUserDefined || (*model == "llama" && (*types)[id] == kUnknown)) {
      literal[id] = true;
      spec.specials.push_back(static_cast<int32_t>(id));
    }
  if (*model == "llama") gguf_sentencepiece(gguf, path, *strings, types, literal, spec);
  else gguf_byte_level(gguf, path, *strings, literal, spec);
  spec.end_of_text = end_of_text_by_name(spec);
  if (spec.end_of_text < 0)
    if (const auto eos = gguf.meta_int("tokenizer.ggml.eos_token_id"); eos && *eos >= 0 && *eos < int64_t(strings->size()))
      spec.end_of_text = static_cast<int32_t>(*eos);
  return spec;
}

TokenizerSpec gguf_tokenizer(const std::string& path) {
  try {
    return gguf_tokenizer_of(*GgufFile::open(path), path);
  } catch (const TokenizerError&) {
    throw;
  } catch (const std::runtime_error& e) {  // the GGUF reader's own: a broken file, a key of the wrong type
    fail(path, e.what());
  }
}

// ---- tiktoken -----------------------------------------------------------------------------------

std::optional<std::string> base64_decode(std::string_view s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!s.empty() && s.back() == '=') s.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    const int v = value(c);
    if (v < 0) return std::nullopt;
    acc = acc << 6 | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

// A rank file holds the ordinary tokens only; their split pattern and special tokens belong to
// the encoding, which tiktoken names in code. GPT-2's (r50k_base) is the one known here.
TokenizerSpec tiktoken_file(const std::string& path) {
  TokenizerSpec spec;
  spec.source = path;
  std::istringstream in(read_whole(path));
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    std::optional<std::string> bytes = space == std::string::npos ? std::nullopt : base64_decode(std::string_view(line).substr(0, space));
    int64_t rank = -1;
    if (bytes) try {
        size_t used = 0;
        rank = std::stoll(line.substr(space + 1), &used);
        if (used != line.size() - space - 1) rank = -1;
      } catch (const std::exception&) {
      }
    if (!bytes || bytes->empty() || rank != int64_t(spec.tokens.size()))
      fail(path, "line " + std::to_string(n) + " is not '<base64 token> " + std::to_string(spec.tokens.size()) +
                     "' (a tiktoken rank file lists its tokens in rank order)");
    spec.tokens.push_back(std::move(*bytes));
  }
  if (spec.tokens.size() != 50256)
    fail(path, "a tiktoken file of " + std::to_string(spec.tokens.size()) +
                   " ranks: only GPT-2's (50256 ranks, gpt2.tiktoken) is known; give other tokenizers as tokenizer.json");
  spec.split_patterns = {kGpt2Pattern};
  spec.tokens.emplace_back("<|endoftext|>");
  spec.specials = {50256};
  spec.end_of_text = 50256;
  spec.ignore_merges = true;  // tiktoken takes a piece that is a token whole
  // tiktoken merges the adjacent pair whose concatenation has the lowest rank: every way of
  // cutting a token into two tokens is a merge of that token's rank.
  std::unordered_map<std::string_view, int32_t> ids;
  for (size_t id = 0; id + 1 < spec.tokens.size(); ++id) ids.emplace(spec.tokens[id], static_cast<int32_t>(id));
  for (size_t id = 0; id + 1 < spec.tokens.size(); ++id) {
    const std::string_view t = spec.tokens[id];
    for (size_t k = 1; k < t.size(); ++k) {
      const auto a = ids.find(t.substr(0, k)), b = ids.find(t.substr(k));
      if (a != ids.end() && b != ids.end()) spec.merges.push_back({a->second, b->second, static_cast<int32_t>(id)});
    }
  }
  return spec;
}

bool is_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace

bool holds_tokenizer(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return fs::exists(fs::path(path) / "tokenizer.json", ec);
  return fs::is_regular_file(path, ec) && is_gguf(path);
}

Tokenizer load_tokenizer(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const std::string json_path = (fs::path(path) / "tokenizer.json").string();
    if (!fs::exists(json_path, ec)) fail(path, "the folder holds no tokenizer.json");
    return Tokenizer(tokenizer_json(json_path));
  }
  if (!fs::exists(path, ec)) fail(path, "no such file");
  if (is_gguf(path)) return Tokenizer(gguf_tokenizer(path));
  if (fs::path(path).extension() == ".tiktoken") return Tokenizer(tiktoken_file(path));
  if (fs::path(path).extension() == ".json") return Tokenizer(tokenizer_json(path));
  fail(path, "not a tokenizer.json, a GGUF file or a .tiktoken file");
}

}  // namespace zt
