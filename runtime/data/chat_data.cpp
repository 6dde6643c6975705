#include "runtime/data/chat_data.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "files/json_text.hpp"
#include "runtime/data/data.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/tokenizer.hpp"
#include "runtime/text/tokenizer_files.hpp"

namespace zt {

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& msg) { throw DataError("data: " + msg); }

// A conversation from one line, or the reason the line is bad.
struct Parsed {
  std::vector<ChatMessage> messages;
  std::string bad;
};

Parsed parse_line(std::string_view line, const std::string& system) {
  Parsed p;
  JsonParsed<json> parsed = parse_json(line);  // [Note: JSON from files] in files/json_text.hpp
  if (!parsed.ok()) return {{}, parsed.error.starts_with("arrays or objects nest") ? parsed.error : "not JSON"};
  const json& j = parsed.value;
  if (!j.is_object()) return {{}, "not a JSON object"};
  auto text = [&](const json& o, const char* key) -> const std::string* {
    const auto it = o.find(key);
    return it != o.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
  };
  std::vector<ChatMessage>& m = p.messages;
  if (const auto it = j.find("messages"); it != j.end()) {
    if (!it->is_array()) return {{}, "\"messages\" is not an array"};
    for (size_t i = 0; i < it->size(); ++i) {
      const json& msg = (*it)[i];
      const std::string *role = msg.is_object() ? text(msg, "role") : nullptr, *content = msg.is_object() ? text(msg, "content") : nullptr;
      if (!role || !content) return {{}, "message " + std::to_string(i) + " has no string role and content"};
      m.push_back({*role, *content});
    }
  } else if (text(j, "query") && text(j, "response")) {  // ms-swift
    if (const auto h = j.find("history"); h != j.end()) {
      if (!h->is_array()) return {{}, "\"history\" is not an array of [query, response] pairs"};
      for (const json& turn : *h) {
        if (!turn.is_array() || turn.size() != 2 || !turn[0].is_string() || !turn[1].is_string())
          return {{}, "\"history\" is not an array of [query, response] pairs"};
        m.push_back({"user", turn[0]});
        m.push_back({"assistant", turn[1]});
      }
    }
    m.push_back({"user", *text(j, "query")});
    m.push_back({"assistant", *text(j, "response")});
  } else if (text(j, "instruction") && text(j, "output")) {  // alpaca
    std::string user = *text(j, "instruction");
    if (const std::string* in = text(j, "input"); in && !in->empty()) user += "\n\n" + *in;
    m.push_back({"user", user});
    m.push_back({"assistant", *text(j, "output")});
  } else {
    return {{}, "no conversation (\"messages\", \"query\"/\"response\" or \"instruction\"/\"output\")"};
  }
  if (const std::string* s = text(j, "system"); s && (m.empty() || m.front().role != "system"))
    m.insert(m.begin(), {"system", *s});
  else if (!system.empty() && (m.empty() || m.front().role != "system"))
    m.insert(m.begin(), {"system", system});
  bool assistant = false;
  for (const ChatMessage& msg : m) {
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant")
      return {{}, "unknown role '" + msg.role + "'"};
    if (msg.role == "assistant" && msg.content.empty()) return {{}, "empty assistant turn"};
    assistant |= msg.role == "assistant";
  }
  if (!assistant) return {{}, "no assistant turn"};
  return p;
}

using Tokens = ChatTokens;

// The conversations of a list of files, and what was wrong with the rest.
struct Corpus {
  std::vector<Tokens> conversations;
  int64_t lines = 0;
  std::map<std::string, int64_t> bad;  // reason -> lines
  std::vector<std::string> examples;   // the first bad lines, "file:line: reason"
  void count_bad(const std::string& where, const std::string& reason) {
    ++bad[reason];
    if (examples.size() < 5) examples.push_back(where + ": " + reason);
  }
};

Corpus read_corpus(const std::string& list, const Tokenizer& tok, const ChatTemplate& tmpl, const std::string& system,
                   int T, bool packing) {
  Corpus c;
  TokenEncoder enc(tok);
  for (const std::string& path : list_files(list)) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path + ": cannot open");
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      ++c.lines;
      const std::string where = path + ":" + std::to_string(n);
      const Parsed p = parse_line(line, system);
      if (!p.bad.empty()) {
        c.count_bad(where, p.bad);
        continue;
      }
      // Without packing, a conversation whose bytes alone need more tokens than a row holds is not
      // tokenized at all (a token holds at most max_token_bytes() bytes); one longer than a row
      // keeps only what a row can use.
      Tokens t;
      const auto W = size_t(T) + 1;
      const std::vector<ChatSegment> segments = tmpl.render(p.messages);
      size_t bytes = 0;
      for (const ChatSegment& s : segments) bytes += s.text.size();
      if (!packing && bytes / tok.max_token_bytes() > W) {
        c.count_bad(where, "longer than a row without data.packing");
        continue;
      }
      encode_chat(segments, tok, enc, t);  // [Note: chat tokens] in runtime/text/chat_template.hpp
      if (t.ids.size() > W + 1) t.ids.resize(W + 1), t.trained.resize(W + 1);
      if (!packing && t.ids.size() > W) {
        c.count_bad(where, "longer than a row without data.packing");
        continue;
      }
      c.conversations.push_back(std::move(t));
    }
    if (in.bad()) fail(path + ": read failed");
  }
  return c;
}

// Rows of T+1 tokens with the trained flags of their targets.
struct Rows {
  std::vector<int32_t> tokens;   // rows x (T+1)
  std::vector<uint8_t> trained;  // rows x (T+1): whether predicting token k of the row is trained
  int64_t count = 0, truncated = 0, trained_targets = 0;
};

Rows make_rows(const std::vector<Tokens>& convs, size_t first, size_t last, int T, bool packing, int32_t pad) {
  Rows r;
  const auto W = size_t(T) + 1;
  size_t used = W;  // of the current row; W: none open
  auto open_row = [&] {
    r.tokens.resize(r.tokens.size() + W, pad);
    r.trained.resize(r.trained.size() + W, 0);
    ++r.count;
    used = 0;
  };
  for (size_t i = first; i < last; ++i) {
    const Tokens& t = convs[i];
    size_t n = t.ids.size();
    if (n > W) n = W, ++r.truncated;
    if (!packing || used + n > W) open_row();
    const size_t at = (size_t(r.count) - 1) * W + used;
    std::copy_n(t.ids.begin(), n, r.tokens.begin() + std::ptrdiff_t(at));
    std::copy_n(t.trained.begin(), n, r.trained.begin() + std::ptrdiff_t(at));
    used += n;
    if (!packing) used = W;
  }
  // The first token of a row is never a target.
  for (int64_t k = 0; k < r.count; ++k) r.trained[size_t(k) * W] = 0;
  r.trained_targets = std::accumulate(r.trained.begin(), r.trained.end(), int64_t{0});
  return r;
}

class ChatLoader final : public DataLoader {
 public:
  ChatLoader(Rows rows, std::string summary, std::string tokenizer, int B, int T, int rank, int N, bool shuffle,
             uint64_t seed, int vocab)
      : rows_(std::move(rows)), summary_(std::move(summary)), tokenizer_(std::move(tokenizer)), B_(B), T_(T),
        rank_(rank), N_(N), shuffle_(shuffle), seed_(seed), vocab_(vocab) {
    start_epoch(0);
  }
  void next(int32_t* inputs, int32_t* targets) override {
    const auto W = size_t(T_) + 1;
    for (int b = 0; b < B_; ++b) {
      const size_t row = order_[size_t((slice_ * N_ + rank_) * B_ + b)];
      const int32_t* x = &rows_.tokens[row * W];
      const uint8_t* m = &rows_.trained[row * W];
      for (int t = 0; t < T_; ++t) {
        inputs[size_t(b) * size_t(T_) + size_t(t)] = x[t];
        targets[size_t(b) * size_t(T_) + size_t(t)] = m[t + 1] ? x[t + 1] : -1;
      }
    }
    if (++slice_ == batches_per_epoch()) start_epoch(epoch_ + 1);
  }
  void reset() override { start_epoch(0); }
  void skip(int64_t batches) override {
    for (int64_t i = 0; i < batches; ++i)
      if (++slice_ == batches_per_epoch()) start_epoch(epoch_ + 1);
  }
  int vocab_limit() const override { return vocab_; }
  void limit_tokens(int vocab_size) override {
    if (vocab_size < vocab_)
      fail("the tokenizer " + tokenizer_ + " has " + std::to_string(vocab_) +
           " tokens, more than the model's vocabulary (model.vocab_size " + std::to_string(vocab_size) + ")");
  }
  int64_t num_tokens() const override { return rows_.count * T_; }
  int64_t batches_per_epoch() const override { return rows_.count / (int64_t(N_) * B_); }
  std::string summary() const override { return summary_; }
  bool masks_targets() const override { return true; }

 private:
  void start_epoch(int64_t epoch) {
    epoch_ = epoch;
    slice_ = 0;
    order_.resize(size_t(rows_.count));
    std::iota(order_.begin(), order_.end(), size_t{0});
    if (!shuffle_) return;
    // Own Fisher-Yates, as the other loaders: every rank draws the same permutation.
    std::mt19937_64 rng(seed_ + uint64_t(epoch));
    for (size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[size_t(rng() % (i + 1))]);
  }

  Rows rows_;
  std::string summary_, tokenizer_;
  int B_, T_, rank_, N_;
  bool shuffle_;
  uint64_t seed_;
  int vocab_;
  int64_t epoch_ = 0, slice_ = 0;
  std::vector<size_t> order_;
};

std::string describe(const std::string& what, const Corpus& c, size_t first, size_t last, const Rows& r, int T, bool packing) {
  std::ostringstream s;
  s << what << ": " << c.lines << " lines, " << (last - first) << " conversations";
  int64_t bad = 0;
  for (const auto& [reason, n] : c.bad) bad += n;
  if (bad > 0) {
    s << ", " << bad << " bad lines skipped (";
    bool first_reason = true;
    for (const auto& [reason, n] : c.bad) s << (first_reason ? "" : ", ") << n << " " << reason, first_reason = false;
    s << "; first " << (c.examples.size() == 1 ? "one" : "ones") << ":";
    for (size_t i = 0; i < c.examples.size(); ++i) s << (i ? "; " : " ") << c.examples[i];
    s << ")";
  }
  s << "; " << r.count << " rows of " << T << " tokens" << (packing ? " (packed)" : " (one conversation each, padded)");
  if (r.truncated > 0) s << ", " << r.truncated << " conversations cut to a row";
  char share[32];
  std::snprintf(share, sizeof share, "%.1f%%", r.count ? 100.0 * double(r.trained_targets) / double(r.count * T) : 0.0);
  s << "; " << r.trained_targets << " of " << r.count * T << " targets trained (" << share << ")";
  return s.str();
}

}  // namespace

std::unique_ptr<DataLoader> make_chat_loader(const DataConfig& cfg, Split split, int B, int T, int rank, int world_size,
                                             uint64_t seed, bool shuffle) {
  const bool val = split == Split::val;
  std::unique_ptr<ChatTemplate> tmpl;
  try {
    tmpl = std::make_unique<ChatTemplate>(cfg.chat_template);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("config: data.chat_template: ") + e.what());
  }
  const Tokenizer tok = load_tokenizer(cfg.tokenizer);
  // Padding is never trained; the end-of-text token (else token 0) only fills the inputs.
  int32_t pad = 0;
  try {
    pad = tok.end_of_text();
  } catch (const TokenizerError&) {
  }
  const std::string& eot = tmpl->end_of_turn();
  if (!tok.find(eot) || !tok.is_special(*tok.find(eot)))
    fail("the chat template '" + cfg.chat_template + "' ends turns with " + eot + ", which the tokenizer " +
         cfg.tokenizer + " has no special token for (another family's template?)");
  const bool held_out = cfg.val.empty() && split != Split::all;
  const std::string& list = val && !held_out ? cfg.val : cfg.train;
  const Corpus c = read_corpus(list, tok, *tmpl, cfg.system, T, cfg.packing);
  size_t first = 0, last = c.conversations.size();
  if (held_out) {  // the last val_fraction of the conversations are validation's
    const auto n_val = static_cast<size_t>(double(last) * cfg.val_fraction);
    if (val) first = last - n_val;
    else last -= n_val;
  }
  const std::string what = std::string(val ? "val" : "train") + " chat data '" + list + "'";
  if (first >= last) fail(what + " holds no usable conversation" + (c.examples.empty() ? "" : " (" + c.examples.front() + ")"));
  Rows rows = make_rows(c.conversations, first, last, T, cfg.packing, pad);
  const std::string summary = describe(what, c, first, last, rows, T, cfg.packing);
  // Nothing to learn from, and no mean to report: every answer lies past its row's end.
  if (rows.trained_targets == 0)
    fail(what + ": no target is trained in any row: every assistant answer falls past data.seq_len " + std::to_string(T) +
         " tokens (prompts or system messages longer than a row?) (" + summary + ")");
  if (rows.count < int64_t(world_size) * B)
    fail(what + ": " + std::to_string(rows.count) + " rows, too few for one global batch of " + std::to_string(world_size) +
         " ranks x " + std::to_string(B) + " rows (" + summary + ")");
  return std::make_unique<ChatLoader>(std::move(rows), summary, cfg.tokenizer, B, T, rank, world_size, shuffle, seed,
                                      tok.vocab_size());
}

}  // namespace zt
