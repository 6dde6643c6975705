// BPE as the model families tokenize: text is cut at the special (added) tokens, each stretch
// between them is split into pieces by the pre-tokenizer's patterns, and each piece is merged by
// BPE, lowest merge rank first (leftmost on a tie), as Hugging Face tokenizers' BPE and tiktoken
// both do. Two kinds of vocabulary share that core:
//   - byte-level (GPT-2, Llama 3, Qwen2, SmolLM2): a piece starts as its bytes; the vocabulary
//     holds raw bytes, so any byte string encodes, and decode(encode(x)) == x wherever every byte
//     has a token and no normalizer (Qwen2's NFC) rewrites the text;
//   - SentencePiece-style (Llama 2, Mistral, Gemma): a piece starts as its characters, spaces
//     written '▁', a character without a token becomes its <0xNN> byte tokens (byte fallback) or
//     the unknown token ([Note: SentencePiece-style BPE] in runtime/text/sentencepiece.hpp).
// The files' spellings (GPT-2's byte-to-character alphabet, '▁' and <0xNN>) are undone by the
// loaders (runtime/text/tokenizer_files.hpp, runtime/text/sentencepiece.hpp), so the Tokenizer's
// tokens are the bytes they decode to.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/text/regex.hpp"
#include "runtime/text/sentencepiece.hpp"

namespace zt {

// A tokenizer file that cannot be used: names the file and what is wrong with it.
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a file format hands over to build a Tokenizer.
struct TokenizerSpec {
  std::string source;                               // the file, for messages
  std::vector<std::string> tokens;                  // id -> raw bytes ("" for an id the file leaves out)
  // The merges: the ids of a pair's two halves and its rank (lowest merges first). tiktoken's
  // ranks are the merged token's rank, so two pairs making the same token share one.
  struct Merge {
    int32_t left, right, rank;
  };
  std::vector<Merge> merges;
  std::vector<std::string> split_patterns;          // the pre-tokenizer: each splits every piece in turn
  std::vector<int32_t> specials;                    // ids matched in the text as they are, before BPE
  bool ignore_merges = false;  // a piece that is itself a token is that token (Llama 3, tiktoken)
  int32_t end_of_text = -1;    // the document separator, -1 when the file names none
  // A byte the vocabulary lacks (SmolLM2's has no token for 21 bytes that UTF-8 text never
  // holds) becomes this token, -1: none, and then it is dropped, as Hugging Face's BPE does.
  int32_t unknown = -1;
  bool fuse_unknown = false;  // consecutive unknown bytes become one unknown token
  // Unicode NFC before the split (Qwen2's normalizer), on the text between special tokens; bytes
  // that are not valid UTF-8 are left as they are.
  bool nfc = false;
  // Set for a SentencePiece-style vocabulary: how the text is prepared, and its byte tokens.
  std::optional<SentencePieceRules> sentencepiece;
};

class Tokenizer {
 public:
  // Checks the spec (every merge's result is a token, every byte has a token, the specials are
  // tokens) and compiles its patterns; throws TokenizerError naming spec.source.
  explicit Tokenizer(TokenizerSpec spec);

  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  // The most bytes one token holds: text of n bytes encodes to at least n / max_token_bytes() tokens.
  size_t max_token_bytes() const { return max_token_bytes_; }
  // Whether decode(encode(x)) == x for any bytes x: every byte has a token and nothing rewrites
  // the text (a SentencePiece-style vocabulary reads '▁' as a space, and may drop a leading one).
  bool covers_all_bytes() const;
  // Whether text cut just after a line break that an ASCII letter follows encodes as the whole
  // does (every byte-level pre-tokenizer cuts there; a SentencePiece piece may run across it).
  bool cuts_at_line_starts() const { return !sentencepiece_; }
  const std::string& source() const { return source_; }
  // The document separator; throws TokenizerError when the file named none.
  int32_t end_of_text() const;
  // The id of the token whose bytes are exactly `bytes` (special or not), if any.
  std::optional<int32_t> find(std::string_view bytes) const;
  bool is_special(int32_t id) const;
  // The token's bytes; throws TokenizerError for an id outside the vocabulary.
  const std::string& token(int32_t id) const;

  // One-off encoding; for many texts, keep a TokenEncoder (it caches pieces).
  std::vector<int32_t> encode(std::string_view text) const;
  // The tokens' bytes, concatenated (less the space a SentencePiece-style tokenizer put in front);
  // throws TokenizerError for an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids) const;

 private:
  friend class TokenEncoder;
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }
  // Looks up a token by its bytes: heterogeneous, so a piece is looked up without a copy.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::string source_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> ids_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};  // -1: the byte has no token
  int32_t unknown_;
  bool fuse_unknown_;
  bool nfc_;
  std::optional<SentencePieceRules> sentencepiece_;
  std::vector<Regex> splits_;
  // The special tokens by their bytes, and their distinct lengths, longest first: a match at a
  // position is one lookup per length (Llama 3 has 256 specials, all starting with '<').
  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> specials_;
  std::vector<size_t> special_lengths_;
  std::array<bool, 256> special_first_{};  // bytes a special token starts with
  std::vector<bool> is_special_;
  bool ignore_merges_;
  int32_t end_of_text_;
  size_t max_token_bytes_ = 1;
};

// Encodes with one thread's state: the patterns' match data and a cache of pieces already
// merged (text repeats its words, so most pieces are found there). Not shared between threads;
// the Tokenizer it reads is.
class TokenEncoder {
 public:
  explicit TokenEncoder(const Tokenizer& tok);
  // Appends text's tokens to out.
  void encode(std::string_view text, std::vector<int32_t>& out);
  // Bytes seen so far that had no token (dropped, or the unknown token).
  int64_t unknown_bytes() const { return unknown_bytes_; }

 private:
  // `first`: the stretch starts the text (SentencePiece's prefix space may depend on it).
  void encode_ordinary(std::string_view text, bool first, std::vector<int32_t>& out);
  std::string_view nfc(std::string_view text);
  void encode_piece(std::string_view piece, std::vector<int32_t>& out);
  void merge(std::string_view piece);
  // The piece's first symbols into work_: its bytes, or with a SentencePiece-style vocabulary its
  // characters (or their byte tokens); unknown ones counted.
  void start_symbols(std::string_view piece);
  void unknown_symbol(size_t bytes);

  const Tokenizer& tok_;
  std::vector<Regex::Matcher> matchers_;
  std::vector<std::string_view> pieces_, next_;
  std::string normalized_;  // the NFC form of the text being split, which the pieces point into
  std::string spaced_;      // the SentencePiece form of it ([Note: SentencePiece-style BPE])
  // Cached pieces: the piece's bytes -> its ids at [offset, offset + count) of cached_ids_.
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Tokenizer::Hash, std::equal_to<>> cache_;
  std::vector<int32_t> cached_ids_;
  // The piece's symbols while merging ([Note: merging in n log n] in tokenizer.cpp): work_[i] the
  // symbol at position i (-1 once merged into its left neighbour), linked by next_pos_ and
  // prev_pos_, and the heap of candidate pairs, (rank << 32 | position of the left symbol).
  std::vector<int32_t> work_, next_pos_, prev_pos_;
  std::vector<uint64_t> heap_;
  int64_t unknown_bytes_ = 0;
};

}  // namespace zt
