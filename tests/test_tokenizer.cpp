// The tokenizer's own rules on small vocabularies built here (merge order, ties, special tokens,
// unknown bytes, bad files), GPT-2's real tokenizer (gpt2.tiktoken, installed by
// scripts/install-deps.sh) on any bytes, and llm.c's uint32 shards through the loader. The ids
// against Hugging Face tokenizers are checked by tests/test_tokenize.sh.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "runtime/data/data.hpp"
#include "runtime/data/token_shards.hpp"
#include "runtime/text/tokenizer.hpp"
#include "runtime/text/tokenizer_files.hpp"
#include "tests/test_util.hpp"

namespace fs = std::filesystem;
using zt::Tokenizer;
using zt::TokenizerError;
using zt::TokenizerSpec;

namespace {

const char* kGpt2Tiktoken = "/usr/local/share/ztrain/gpt2.tiktoken";

// Ids 0-255 are the bytes; then each extra token, made by the merges given as (left, right)
// token texts in rank order.
TokenizerSpec spec_with(const std::vector<std::pair<std::string, std::string>>& merges,
                        const std::vector<std::string>& specials = {}) {
  TokenizerSpec s;
  s.source = "test";
  for (int b = 0; b < 256; ++b) s.tokens.emplace_back(1, static_cast<char>(b));
  auto id = [&](const std::string& t) {
    for (size_t i = 0; i < s.tokens.size(); ++i)
      if (s.tokens[i] == t) return static_cast<int32_t>(i);
    s.tokens.push_back(t);
    return static_cast<int32_t>(s.tokens.size() - 1);
  };
  for (size_t r = 0; r < merges.size(); ++r) {
    const int32_t a = id(merges[r].first), b = id(merges[r].second);
    id(merges[r].first + merges[r].second);
    s.merges.push_back({a, b, static_cast<int32_t>(r)});
  }
  for (const std::string& t : specials) {
    s.tokens.push_back(t);
    s.specials.push_back(static_cast<int32_t>(s.tokens.size() - 1));
  }
  return s;
}

std::vector<std::string> pieces(const Tokenizer& tok, std::string_view text) {
  std::vector<std::string> out;
  for (int32_t id : tok.encode(text)) out.push_back(tok.token(id));
  return out;
}

using Pieces = std::vector<std::string>;

template <class E = TokenizerError>
std::string error_of(const std::function<void()>& f) {
  return zt::test::error_of<E>(f);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST_CASE("BPE merges the lowest rank first, the leftmost of equal ones") {
  // "ab" before "bc": in "abc" the pair ab merges (rank 0) and bc never can.
  const Tokenizer t(spec_with({{"a", "b"}, {"b", "c"}, {"ab", "c"}}));
  CHECK(pieces(t, "abc") == Pieces{"abc"});
  const Tokenizer u(spec_with({{"b", "c"}, {"a", "b"}}));
  CHECK(pieces(u, "abc") == Pieces{"a", "bc"});
  // Equal pairs: the leftmost merges first, so "aaa" is "aa" "a", not "a" "aa".
  const Tokenizer v(spec_with({{"a", "a"}}));
  CHECK(pieces(v, "aaa") == Pieces{"aa", "a"});
  CHECK(pieces(v, "aaaa") == Pieces{"aa", "aa"});
  // tiktoken's ranks: pairs that make the same token share its rank; "ab"+"c" and "a"+"bc" both
  // make "abc", and whichever pair the text reaches merges.
  TokenizerSpec s = spec_with({{"a", "b"}, {"b", "c"}, {"ab", "c"}});
  s.merges.push_back({'a', *Tokenizer(s).find("bc"), 2});
  const Tokenizer w(std::move(s));
  CHECK(pieces(w, "abc") == Pieces{"abc"});
  CHECK(pieces(w, "xbc") == Pieces{"x", "bc"});
}

TEST_CASE("the pre-tokenizer's patterns cut pieces that BPE never merges across") {
  TokenizerSpec s = spec_with({{"a", " "}, {"a ", "b"}});
  CHECK(pieces(Tokenizer(s), "a b") == Pieces{"a b"});
  s.split_patterns = {R"( ?\p{L}+|\s+)"};
  CHECK(pieces(Tokenizer(s), "a b") == Pieces{"a", " ", "b"});
  // Patterns apply in turn, each to the pieces of the one before (Digits then ByteLevel).
  s.split_patterns = {R"(\p{N})", R"( ?\p{L}+| ?\p{N}+|\s+)"};
  CHECK(pieces(Tokenizer(s), "x 123") == Pieces{"x", " ", "1", "2", "3"});
  // A pattern that does not compile names the file, the step and PCRE2's reason.
  s.split_patterns = {"(unclosed"};
  const std::string e = error_of<std::runtime_error>([&] { Tokenizer{s}; });
  CHECK(contains(e, "test"));
  CHECK(contains(e, "(unclosed"));
  CHECK(contains(e, "missing closing parenthesis"));
}

TEST_CASE("special tokens are matched before BPE, the longest at the leftmost position") {
  const Tokenizer t(spec_with({{"<", "|"}}, {"<|end|>", "<|end|>x", "<|e"}));
  const std::vector<int32_t> ids = t.encode("a<|end|>xb<|end|><|e");
  REQUIRE(ids.size() == 5);
  CHECK(t.token(ids[1]) == "<|end|>x");
  CHECK(t.is_special(ids[1]));
  CHECK(t.token(ids[3]) == "<|end|>");
  CHECK(t.token(ids[4]) == "<|e");
  CHECK(t.decode(ids) == "a<|end|>xb<|end|><|e");
  // A special token's text is never cut by the patterns: the specials go first.
  TokenizerSpec s = spec_with({}, {"<|end|>"});
  s.split_patterns = {R"(\p{L}+|[^\p{L}]+)"};
  const Tokenizer u(std::move(s));
  CHECK(u.encode("x<|end|>y").size() == 3);
}

TEST_CASE("ignore_merges takes a piece that is a token whole") {
  TokenizerSpec s = spec_with({{"b", "c"}, {"a", "b"}, {"ab", "c"}});
  CHECK(pieces(Tokenizer(s), "abc") == Pieces{"a", "bc"});
  s.ignore_merges = true;
  CHECK(pieces(Tokenizer(s), "abc") == Pieces{"abc"});
}

TEST_CASE("bytes the vocabulary lacks are dropped or the unknown token, and counted") {
  TokenizerSpec s = spec_with({{"a", "b"}});
  const int32_t ab = *Tokenizer(s).find("ab");
  s.tokens[0xFF].clear();  // byte 0xFF has no token
  s.tokens[0xFE].clear();
  {
    const Tokenizer t(s);
    CHECK_FALSE(t.covers_all_bytes());
    zt::TokenEncoder enc(t);
    std::vector<int32_t> ids;
    enc.encode("a\xff" "b", ids);  // dropped: a and b meet and merge, as Hugging Face's BPE has it
    CHECK(ids == std::vector<int32_t>{ab});
    CHECK(enc.unknown_bytes() == 1);
    enc.encode("a\xff" "b", ids);  // a second time (cached pieces would not count it)
    CHECK(enc.unknown_bytes() == 2);
  }
  s.tokens.push_back("<unk>");
  s.unknown = static_cast<int32_t>(s.tokens.size() - 1);
  CHECK(Tokenizer(s).encode("a\xff\xfe" "b").size() == 4);
  s.fuse_unknown = true;
  CHECK(Tokenizer(s).encode("a\xff\xfe" "b") == std::vector<int32_t>{'a', s.unknown, 'b'});
}

TEST_CASE("NFC (Qwen2's normalizer) composes the text between special tokens before the split") {
  TokenizerSpec s = spec_with({{"\xC3", "\xA9"}}, {"<s>"});  // "é" in UTF-8, one merge
  const std::string composed = "caf\xC3\xA9", decomposed = "cafe\xCC\x81";  // é, and e + U+0301
  CHECK(Tokenizer(s).encode(decomposed) != Tokenizer(s).encode(composed));
  s.nfc = true;
  const Tokenizer t(std::move(s));
  CHECK(t.encode(decomposed) == t.encode(composed));
  CHECK(t.encode(decomposed + "<s>" + decomposed).size() == 2 * t.encode(composed).size() + 1);
  // Bytes that are not UTF-8 stay as they are; the valid stretches around them are composed.
  CHECK(t.decode(t.encode("e\xCC\x81\xFF" "a\xCC\x81")) == "\xC3\xA9\xFF" "\xC3\xA1");
}

TEST_CASE("a spec that cannot work is refused by name") {
  TokenizerSpec s = spec_with({{"a", "b"}});
  s.merges.push_back({'x', 'y', 1});  // "xy" is no token
  CHECK(contains(error_of([&] { Tokenizer{s}; }), "merge 1 makes a token the vocabulary does not hold"));
  s = spec_with({});
  s.specials = {70000};
  CHECK(contains(error_of([&] { Tokenizer{s}; }), "special token 70000 is outside the vocabulary"));
  s = spec_with({});
  for (int b = 0; b < 200; ++b) s.tokens[size_t(b)].clear();
  CHECK(contains(error_of([&] { Tokenizer{s}; }), "not a byte-level vocabulary"));
  const Tokenizer t(spec_with({}));
  CHECK(contains(error_of([&] { t.end_of_text(); }), "no end-of-text token"));
  CHECK(contains(error_of([&] { t.decode(std::vector<int32_t>{5, 256}); }), "token id 256 is not in the vocabulary"));
}

TEST_CASE("GPT-2's tokenizer: decode(encode(x)) == x for any bytes, and known ids") {
  REQUIRE_MESSAGE(fs::exists(kGpt2Tiktoken), kGpt2Tiktoken << " is missing: run scripts/install-deps.sh");
  const Tokenizer t = zt::load_tokenizer(kGpt2Tiktoken);
  CHECK(t.vocab_size() == 50257);
  CHECK(t.end_of_text() == 50256);
  CHECK(t.covers_all_bytes());
  // Ids everyone who has used GPT-2 has seen.
  CHECK(t.encode("Hello world") == std::vector<int32_t>{15496, 995});
  CHECK(t.encode("<|endoftext|>\n\n") == std::vector<int32_t>{50256, 628});
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string x(rng() % 300, '\0');
    for (char& c : x) {
      // Random bytes, and stretches of ASCII and of UTF-8 letters, so merges happen too.
      const uint64_t r = rng();
      c = static_cast<char>(round % 3 == 0 ? r & 0xFF : round % 3 == 1 ? ' ' + r % 95 : (r & 1 ? 0xC3 : 0xA9));
    }
    const std::vector<int32_t> ids = t.encode(x);
    REQUIRE(t.decode(ids) == x);
  }
}

TEST_CASE("tokenizer files: what cannot be read is named") {
  zt::test::TempDir dir;
  const std::string json = dir / "tokenizer.json";
  write_text(fs::path(json), "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}");
  CHECK(contains(error_of([&] { zt::load_tokenizer(json); }), "model type 'Unigram' is not supported"));
  write_text(fs::path(json), R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                       "pre_tokenizer": {"type": "Metaspace", "replacement": "_"}})");
  CHECK(contains(error_of([&] { zt::load_tokenizer(json); }), "the Metaspace pre-tokenizer's replacement '_' is not supported"));
  write_text(fs::path(json), R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "byte_fallback": true},
                       "pre_tokenizer": {"type": "Metaspace"}})");
  CHECK(contains(error_of([&] { zt::load_tokenizer(json); }), "byte_fallback is set but the vocabulary has no byte token <0x00>"));
  write_text(fs::path(json), R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "normalizer": {"type": "NFKC"},
                       "pre_tokenizer": {"type": "ByteLevel"}})");
  CHECK(contains(error_of([&] { zt::load_tokenizer(json); }), "the normalizer 'NFKC' is not supported (NFC, and SentencePiece's"));
  write_text(fs::path(json), R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": null})");
  CHECK(contains(error_of([&] { zt::load_tokenizer(json); }), "is neither byte-level BPE"));
  write_text(fs::path(json), R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]},
                       "pre_tokenizer": {"type": "ByteLevel"}})");
  CHECK(contains(error_of([&] { zt::load_tokenizer(json); }), "merge 0 ('a' 'c') names a token the vocabulary does not hold"));
  write_text(fs::path(json), "{\"model\": ");
  CHECK(contains(error_of([&] { zt::load_tokenizer(json); }), "not a usable tokenizer.json"));
  CHECK(contains(error_of([&] { zt::load_tokenizer(dir.path.string()); }), "not a usable tokenizer.json"));  // the folder's
  CHECK(contains(error_of([&] { zt::load_tokenizer(dir / "none.json"); }), "no such file"));
  const std::string tt = dir / "x.tiktoken";
  write_text(tt, "IQ== 0\nIg== 1\n");
  CHECK(contains(error_of([&] { zt::load_tokenizer(tt); }), "only GPT-2's (50256 ranks"));
  write_text(tt, "IQ== 0\nnot base64! 1\n");
  CHECK(contains(error_of([&] { zt::load_tokenizer(tt); }), "line 2 is not"));
  write_text(dir / "x.txt", "hello");
  CHECK(contains(error_of([&] { zt::load_tokenizer(dir / "x.txt"); }), "not a tokenizer.json, a GGUF file or a .tiktoken file"));
}

TEST_CASE("SentencePiece-style BPE: characters, '▁' as a space, byte fallback, and back") {
  zt::test::TempDir dir;
  std::string vocab = R"("<unk>": 0, "</s>": 1)";
  for (int b = 0; b < 256; ++b) {
    char name[16];
    std::snprintf(name, sizeof name, ", \"<0x%02X>\": %d", b, 2 + b);
    vocab += name;
  }
  vocab += R"(, "▁": 258, "h": 259, "i": 260, "é": 261, "▁h": 262, "▁hi": 263, "hé": 264)";
  const std::string json = dir / "tokenizer.json";
  write_text(fs::path(json), R"({"added_tokens": [{"id": 1, "content": "</s>", "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                   {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
              "vocab": {)" + vocab + R"(}, "merges": ["▁ h", "▁h i", "h é"]}})");
  const Tokenizer t = zt::load_tokenizer(json);
  // The prefix space, merges over characters ("é" is one), '▁' in the text read as a space, a
  // character without a token as its UTF-8 bytes' tokens.
  CHECK(t.encode("hi hé") == std::vector<int32_t>{263, 262, 261});  // "▁h" before "hé" by rank
  CHECK(t.encode("hé") == std::vector<int32_t>{262, 261});
  CHECK(t.decode(std::vector<int32_t>{259, 264}) == "hhé");
  CHECK(t.encode("hi\xE2\x96\x81hé") == t.encode("hi hé"));
  CHECK(t.encode("ж") == std::vector<int32_t>{258, 2 + 0xD0, 2 + 0xB6});
  CHECK(t.encode("hi</s>hi") == std::vector<int32_t>{263, 1, 263});  // each stretch prefixed
  CHECK(!t.covers_all_bytes());
  CHECK(!t.cuts_at_line_starts());
  std::mt19937_64 rng(11);
  for (int round = 0; round < 200; ++round) {  // any bytes but '▁' round-trip
    std::string x(rng() % 60, '\0');
    for (char& c : x) c = static_cast<char>(round % 2 ? rng() & 0xFF : "hi \xC3\xA9\n"[rng() % 6]);
    if (x.find("\xE2\x96\x81") != std::string::npos) continue;
    REQUIRE(t.decode(t.encode(x)) == x);
  }
}

TEST_CASE("llm.c's uint32 shards (version 7) are written and read back through the loader") {
  zt::test::TempDir dir;
  std::vector<int32_t> tokens(700);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(65536 + 97 * i);
  // [Note: a corpus appears whole]: finished shards stay out of sight until published, and a
  // writer that never publishes leaves nothing behind.
  {
    zt::ShardWriter unpublished(dir.path.string(), "train", zt::shard_format_for(200000), 400);
    unpublished.write(tokens);
    unpublished.finish();
    CHECK(unpublished.files().empty());
    int seen = 0;
    for (const auto& e : fs::directory_iterator(dir.path)) {
      CHECK_MESSAGE(e.path().filename().string().find(".tmp-") != std::string::npos, e.path());
      ++seen;
    }
    CHECK(seen == 2);  // both shards, under their temporary names
  }
  CHECK(fs::is_empty(dir.path));
  zt::ShardWriter w(dir.path.string(), "train", zt::shard_format_for(200000), 400);
  w.write(tokens);
  w.finish();
  w.publish();
  REQUIRE(w.files().size() == 2);  // 400 + 300
  CHECK(fs::file_size(w.files()[0]) == 1024 + 4 * 400);
  zt::DataConfig c;
  c.format = "llmc";
  c.train = dir / "train_*.bin";
  c.shuffle = false;
  auto loader = zt::make_loader(c, zt::Split::train, 2, 8, 0, 1, 1);
  std::vector<int32_t> in(16), tg(16);
  loader->next(in.data(), tg.data());
  CHECK(in[0] == tokens[0]);
  CHECK(tg[15] == tokens[16]);
  loader->limit_tokens(65536 + 97 * 5);  // tokens 5 on are beyond the model's vocabulary
  loader->reset();
  CHECK(contains(error_of<zt::DataError>([&] { loader->next(in.data(), tg.data()); }), "train_000000.bin: token 5 (byte 1044)"));
  // A token that does not fit the format is refused, not wrapped.
  zt::ShardWriter narrow(dir.path.string(), "val", zt::kShardU16, 100);
  CHECK(contains(error_of<zt::DataError>([&] { narrow.write(tokens); }), "does not fit a version 1 shard"));
}
