#include "runtime/text/tokenizer.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <functional>
#include <new>

namespace zt {

namespace {

// Pieces longer than this are merged but not cached: a long run (a page of whitespace, a line of
// CJK letters, which \p{L}+ keeps whole) seldom comes back, and would crowd out the words.
constexpr size_t kCachedPieceBytes = 64;
// The cache is emptied when it holds this many pieces, so memory stays bounded on any corpus.
constexpr size_t kCachedPieces = 1 << 16;

}  // namespace

Tokenizer::Tokenizer(TokenizerSpec spec)
    : source_(std::move(spec.source)), tokens_(std::move(spec.tokens)), unknown_(spec.unknown),
      fuse_unknown_(spec.fuse_unknown), nfc_(spec.nfc), sentencepiece_(std::move(spec.sentencepiece)), ignore_merges_(spec.ignore_merges), end_of_text_(spec.end_of_text) {
  auto fail = [&](const std::string& what) { throw TokenizerError("tokenizer: " + source_ + ": " + what); };
  const auto n = static_cast<int32_t>(tokens_.size());
  if (n == 0) fail("the vocabulary is empty");
  auto check_id = [&](int32_t id, const char* what) {
    if (id < 0 || id >= n)
      fail(std::string(what) + " " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(n) + ")");
  };
  is_special_.assign(size_t(n), false);
  for (int32_t id : spec.specials) {
    check_id(id, "special token");
    const std::string& t = tokens_[size_t(id)];
    if (t.empty()) fail("special token " + std::to_string(id) + " is empty");
    is_special_[size_t(id)] = true;
    specials_.try_emplace(t, id);  // the same text twice: the first id is matched
    special_first_[static_cast<unsigned char>(t[0])] = true;
    if (std::find(special_lengths_.begin(), special_lengths_.end(), t.size()) == special_lengths_.end())
      special_lengths_.push_back(t.size());
  }
  std::sort(special_lengths_.rbegin(), special_lengths_.rend());
  // Byte-fallback tokens decode to a byte but are never the text's own: kept out of the lookup.
  std::vector<bool> byte_token(size_t(n), false);
  if (sentencepiece_)
    for (int32_t id : sentencepiece_->byte_tokens) {
      check_id(id, "byte token");
      byte_token[size_t(id)] = true;
    }
  ids_.reserve(size_t(n));
  for (int32_t id = 0; id < n; ++id) {
    const std::string& t = tokens_[size_t(id)];
    if (t.empty()) continue;
    max_token_bytes_ = std::max(max_token_bytes_, t.size());
    if (byte_token[size_t(id)]) continue;
    // Two ids with the same bytes: the ordinary one wins over a special one, and the lower id
    // over a higher, so a lookup by bytes is deterministic.
    auto [it, fresh] = ids_.try_emplace(t, id);
    if (!fresh && is_special_[size_t(it->second)] && !is_special_[size_t(id)]) it->second = id;
  }
  int covered = 0;
  for (int b = 0; b < 256; ++b) {
    const auto it = ids_.find(std::string(1, static_cast<char>(b)));
    byte_ids_[size_t(b)] = it == ids_.end() ? -1 : it->second;
    covered += it != ids_.end();
  }
  // Every ASCII letter and digit has a token in any byte-level vocabulary; a vocabulary without
  // them is a SentencePiece one read as if it were byte-level.
  if (!sentencepiece_ && covered < 128) fail("only " + std::to_string(covered) + " of the 256 bytes have a token: not a byte-level vocabulary");
  if (unknown_ >= 0) check_id(unknown_, "unknown token");
  merges_.reserve(spec.merges.size());
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    const auto [a, b, rank] = spec.merges[r];
    check_id(a, "merge's first token");
    check_id(b, "merge's second token");
    const auto it = ids_.find(tokens_[size_t(a)] + tokens_[size_t(b)]);
    if (it == ids_.end()) fail("merge " + std::to_string(r) + " makes a token the vocabulary does not hold");
    merges_.insert_or_assign(pair_key(a, b), Merge{rank, it->second});  // repeated: the last counts, as in HF
  }
  for (size_t i = 0; i < spec.split_patterns.size(); ++i)
    splits_.emplace_back(spec.split_patterns[i], "tokenizer: " + source_ + ": pre-tokenizer step " + std::to_string(i));
  if (end_of_text_ >= 0) check_id(end_of_text_, "end-of-text token");
}

bool Tokenizer::covers_all_bytes() const {
  return !sentencepiece_ && std::none_of(byte_ids_.begin(), byte_ids_.end(), [](int32_t id) { return id < 0; });
}

int32_t Tokenizer::end_of_text() const {
  if (end_of_text_ < 0)
    throw TokenizerError("tokenizer: " + source_ + ": names no end-of-text token to separate documents");
  return end_of_text_;
}

std::optional<int32_t> Tokenizer::find(std::string_view bytes) const {
  const auto it = ids_.find(bytes);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_special(int32_t id) const { return id >= 0 && id < vocab_size() && is_special_[size_t(id)]; }

const std::string& Tokenizer::token(int32_t id) const {
  if (id < 0 || id >= vocab_size() || tokens_[size_t(id)].empty())
    throw TokenizerError("tokenizer: " + source_ + ": token id " + std::to_string(id) + " is not in the vocabulary of " +
                         std::to_string(vocab_size()));
  return tokens_[size_t(id)];
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  TokenEncoder(*this).encode(text, out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token(id);
  // The space the prefix put in front ([Note: SentencePiece-style BPE] in sentencepiece.hpp).
  if (sentencepiece_ && sentencepiece_->prefix != SentencePieceRules::Prefix::none && !out.empty() && out[0] == ' ')
    out.erase(0, 1);
  return out;
}

TokenEncoder::TokenEncoder(const Tokenizer& tok) : tok_(tok) {
  for (const Regex& re : tok.splits_) matchers_.emplace_back(re);
}

// Special tokens first: at each position the longest special token that starts there, scanning
// left to right (Hugging Face's leftmost-longest match); the text between them is ordinary.
void TokenEncoder::encode(std::string_view text, std::vector<int32_t>& out) {
  auto special_at = [&](size_t i) -> int32_t {
    if (!tok_.special_first_[static_cast<unsigned char>(text[i])]) return -1;
    for (size_t len : tok_.special_lengths_) {
      if (len > text.size() - i) continue;
      if (const auto it = tok_.specials_.find(text.substr(i, len)); it != tok_.specials_.end()) return it->second;
    }
    return -1;
  };
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const int32_t id = special_at(i);
    if (id < 0) {
      ++i;
      continue;
    }
    encode_ordinary(text.substr(start, i - start), start == 0, out);
    out.push_back(id);
    start = i += tok_.tokens_[size_t(id)].size();
  }
  encode_ordinary(text.substr(start), start == 0, out);
}

// The NFC form of each stretch of valid UTF-8 into normalized_; bytes that are not UTF-8 stay as
// they are between them (composition never crosses them).
std::string_view TokenEncoder::nfc(std::string_view text) {
  normalized_.clear();
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  const auto n = static_cast<utf8proc_ssize_t>(text.size());
  auto compose = [&](utf8proc_ssize_t begin, utf8proc_ssize_t end) {
    if (begin == end) return;
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t len =
        utf8proc_map(p + begin, end - begin, &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (len < 0) {
      std::free(out);
      throw std::bad_alloc();  // the stretch is valid UTF-8: only memory can fail
    }
    normalized_.append(reinterpret_cast<const char*>(out), size_t(len));
    std::free(out);
  };
  utf8proc_ssize_t run = 0, i = 0;
  while (i < n) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t len = utf8proc_iterate(p + i, n - i, &cp);
    if (len > 0) {
      i += len;
      continue;
    }
    compose(run, i);
    normalized_.push_back(text[size_t(i)]);
    run = ++i;
  }
  compose(run, n);
  return normalized_;
}

void TokenEncoder::encode_ordinary(std::string_view text, bool first, std::vector<int32_t>& out) {
  if (text.empty()) return;
  if (tok_.nfc_) text = nfc(text);
  pieces_.assign(1, text);
  if (tok_.sentencepiece_) {
    text = sentencepiece_text(text, *tok_.sentencepiece_, first, spaced_);
    pieces_.assign(1, text);
    if (tok_.sentencepiece_->split) {  // a piece starts at each space (Metaspace's split)
      pieces_.clear();
      for (size_t at = 0; at < text.size();) {
        const size_t next = text.find(' ', at + 1);
        pieces_.push_back(text.substr(at, next - at));
        at = std::min(next, text.size());
      }
    }
  }
  for (Regex::Matcher& m : matchers_) {
    next_.clear();
    for (std::string_view p : pieces_) m.split(p, next_);
    pieces_.swap(next_);
  }
  for (std::string_view p : pieces_) encode_piece(p, out);
}

void TokenEncoder::encode_piece(std::string_view piece, std::vector<int32_t>& out) {
  if (piece.size() == 1 && tok_.byte_ids_[static_cast<unsigned char>(piece[0])] >= 0) {
    out.push_back(tok_.byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (tok_.ignore_merges_)
    if (auto id = tok_.find(piece); id && !tok_.is_special(*id)) {
      out.push_back(*id);
      return;
    }
  const bool cacheable = piece.size() <= kCachedPieceBytes;
  if (cacheable) {
    if (const auto it = cache_.find(piece); it != cache_.end()) {
      const auto [offset, count] = it->second;
      out.insert(out.end(), cached_ids_.begin() + offset, cached_ids_.begin() + offset + count);
      return;
    }
  }
  const int64_t unknown_before = unknown_bytes_;
  merge(piece);
  out.insert(out.end(), work_.begin(), work_.end());
  if (!cacheable || unknown_bytes_ != unknown_before) return;  // a hit would not count its unknown bytes
  if (cache_.size() >= kCachedPieces) {
    cache_.clear();
    cached_ids_.clear();
  }
  cache_.emplace(std::string(piece), std::pair{uint32_t(cached_ids_.size()), uint32_t(work_.size())});
  cached_ids_.insert(cached_ids_.end(), work_.begin(), work_.end());
}

// BPE over the piece's bytes into work_: merge the adjacent pair of lowest rank (the leftmost of
// equal ranks) until no pair has a merge. [Note: merging in n log n] A byte without a token is
// the unknown token, which merges with nothing, or is left out, its neighbours then meeting as
// Hugging Face's BPE has them meet.
//
// [Note: merging in n log n] The symbols form a linked list over the piece's positions and the
// candidate pairs a min-heap of (rank, position of the left symbol), as Hugging Face tokenizers'
// and llama.cpp's BPE keep them: a merge joins two list nodes and pushes the two pairs it makes,
// so a piece of n bytes takes O(n log n), where finding the lowest pair by a scan took O(n^2) (a
// 400 KB line of base64 took 52 s). Positions only grow left to right, so the smallest position
// among equal ranks is the leftmost pair, as before. A heap entry is stale once either symbol
// changed; it is then found so by the pair's rank now, which is checked at the pop (a symbol
// only ever grows into a longer token, so an equal rank means the same merge is still due).
void TokenEncoder::unknown_symbol(size_t bytes) {
  unknown_bytes_ += int64_t(bytes);
  if (tok_.unknown_ < 0) return;
  if (!(tok_.fuse_unknown_ && !work_.empty() && work_.back() == tok_.unknown_)) work_.push_back(tok_.unknown_);
}

void TokenEncoder::start_symbols(std::string_view piece) {
  work_.clear();
  if (!tok_.sentencepiece_) {
    for (char c : piece) {
      const int32_t id = tok_.byte_ids_[static_cast<unsigned char>(c)];
      if (id >= 0) work_.push_back(id);
      else unknown_symbol(1);
    }
    return;
  }
  const std::vector<int32_t>& byte_tokens = tok_.sentencepiece_->byte_tokens;
  for (size_t i = 0; i < piece.size();) {
    const std::string_view c = piece.substr(i, utf8_char_bytes(piece.substr(i)));
    i += c.size();
    if (const auto id = tok_.find(c); id && !tok_.is_special(*id)) work_.push_back(*id);
    else if (!byte_tokens.empty())
      for (char b : c) work_.push_back(byte_tokens[static_cast<unsigned char>(b)]);
    else unknown_symbol(c.size());
  }
}

void TokenEncoder::merge(std::string_view piece) {
  start_symbols(piece);
  if (work_.size() < 2) return;
  const auto n = static_cast<int32_t>(work_.size());
  next_pos_.resize(size_t(n));
  prev_pos_.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) next_pos_[size_t(i)] = i + 1, prev_pos_[size_t(i)] = i - 1;  // n: the end, -1: none
  auto rank_of = [&](int32_t i, int32_t j) -> int32_t {
    const auto it = tok_.merges_.find(Tokenizer::pair_key(work_[size_t(i)], work_[size_t(j)]));
    return it == tok_.merges_.end() ? INT32_MAX : it->second.rank;
  };
  // Min-heap on (rank, position): std::greater over the packed pair orders by rank, then position.
  auto key = [](int32_t rank, int32_t pos) { return uint64_t(uint32_t(rank)) << 32 | uint32_t(pos); };
  heap_.clear();
  for (int32_t i = 0; i + 1 < n; ++i)
    if (const int32_t r = rank_of(i, i + 1); r != INT32_MAX) heap_.push_back(key(r, i));
  std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    const uint64_t top = heap_.back();
    heap_.pop_back();
    const auto rank = int32_t(top >> 32), i = int32_t(uint32_t(top));
    const int32_t j = next_pos_[size_t(i)];
    if (work_[size_t(i)] < 0 || j >= n || rank_of(i, j) != rank) continue;  // stale
    work_[size_t(i)] = tok_.merges_.at(Tokenizer::pair_key(work_[size_t(i)], work_[size_t(j)])).id;
    work_[size_t(j)] = -1;  // gone
    const int32_t k = next_pos_[size_t(j)];
    next_pos_[size_t(i)] = k;
    if (k < n) prev_pos_[size_t(k)] = i;
    if (const int32_t h = prev_pos_[size_t(i)]; h >= 0)
      if (const int32_t r = rank_of(h, i); r != INT32_MAX) {
        heap_.push_back(key(r, h));
        std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
      }
    if (k < n)
      if (const int32_t r = rank_of(i, k); r != INT32_MAX) {
        heap_.push_back(key(r, i));
        std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
      }
  }
  work_.erase(std::remove(work_.begin(), work_.end(), -1), work_.end());
}

}  // namespace zt
