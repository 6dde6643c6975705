#include "runtime/text/chat_template.hpp"

#include <stdexcept>

namespace zt {

const std::vector<std::string>& ChatTemplate::names() {
  static const std::vector<std::string> n = {"chatml", "llama3", "gemma"};
  return n;
}

namespace {

struct Parts {
  const char *begin, *header_open, *header_close, *end_of_turn, *after_turn, *assistant_role;
  bool trim;                  // the content's surrounding whitespace dropped (Jinja's `| trim`)
  bool system_in_first_turn;  // a first system message opens the next turn instead of its own
};

Parts parts_of(const std::string& name) {
  if (name == "chatml") return {"", "<|im_start|>", "\n", "<|im_end|>", "\n", "assistant", false, false};
  if (name == "llama3")
    return {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", "", "assistant", true, false};
  if (name == "gemma") return {"<bos>", "<start_of_turn>", "\n", "<end_of_turn>", "\n", "model", true, true};
  throw std::invalid_argument("unknown chat template '" + name + "' (known: chatml, llama3, gemma)");
}

// Python's str.strip() over ASCII whitespace, as Jinja's trim filter.
std::string trimmed(const std::string& s) {
  constexpr const char* kSpace = " \t\n\r\v\f";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& name) : ChatTemplate(name, parts_of(name)) {}

std::vector<ChatSegment> ChatTemplate::render(const std::vector<ChatMessage>& messages, bool generation_prompt) const {
  std::vector<ChatSegment> out;
  if (!begin_.empty()) out.push_back({begin_, false});
  // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false positive) on a + b + c here.
  auto header = [&](const std::string& role) {
    std::string h = header_open_;
    h.append(role).append(header_close_);
    return h;
  };
  std::string prefix;  // the system message folded into the first turn
  const bool fold = system_in_first_turn_ && !messages.empty() && messages[0].role == "system";
  if (fold) prefix = messages[0].content + "\n\n";
  for (size_t i = fold ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    out.push_back({header(m.role == "assistant" ? assistant_role_ : m.role) + prefix, false});
    prefix.clear();
    std::string turn = trim_ ? trimmed(m.content) : m.content;
    turn.append(end_of_turn_);
    out.push_back({std::move(turn), m.role == "assistant"});
    if (!after_turn_.empty()) out.push_back({after_turn_, false});
  }
  if (generation_prompt) out.push_back({header(assistant_role_), false});
  return out;
}

void encode_chat(const std::vector<ChatSegment>& segments, const Tokenizer& tok, TokenEncoder& enc, ChatTokens& out) {
  const size_t start = out.ids.size();
  std::string text;
  for (const ChatSegment& s : segments) text += s.text;
  enc.encode(text, out.ids);
  // Lay the tokens along the text: token k holds bytes [at, at + its size) of it.
  std::vector<size_t> ends;  // where each segment ends in the text
  for (const ChatSegment& s : segments) ends.push_back((ends.empty() ? 0 : ends.back()) + s.text.size());
  out.trained.resize(start);
  size_t at = 0, seg = 0;
  bool spelled = true;
  for (size_t k = start; k < out.ids.size() && spelled; ++k) {
    const std::string& t = tok.token(out.ids[k]);
    spelled = text.compare(at, t.size(), t) == 0;
    const size_t end = at + t.size();
    while (seg < ends.size() && ends[seg] <= at) ++seg;  // the segment byte `at` is in
    bool trained = false;
    for (size_t s = seg; s < ends.size() && (s == seg || ends[s - 1] < end); ++s) trained |= segments[s].trained;
    out.trained.push_back(trained);
    at = end;
  }
  if (spelled && at == text.size()) return;
  out.ids.resize(start);
  out.trained.resize(start);
  for (const ChatSegment& s : segments) {
    enc.encode(s.text, out.ids);
    out.trained.resize(out.ids.size(), s.trained ? 1 : 0);
  }
}

}  // namespace zt
