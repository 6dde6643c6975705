#include "runtime/text/chat_template.hpp"

#include <stdexcept>

namespace zt {

const std::vector<std::string>& ChatTemplate::names() {
  static const std::vector<std::string> n = {"chatml", "llama3"};
  return n;
}

namespace {

struct Parts {
  const char *begin, *header_open, *header_close, *end_of_turn, *after_turn;
};

Parts parts_of(const std::string& name) {
  if (name == "chatml") return {"", "<|im_start|>", "\n", "<|im_end|>", "\n"};
  if (name == "llama3") return {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>", ""};
  throw std::invalid_argument("unknown chat template '" + name + "' (known: chatml, llama3)");
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
  for (const ChatMessage& m : messages) {
    out.push_back({header(m.role), false});
    std::string turn = m.content;
    turn.append(end_of_turn_);
    out.push_back({std::move(turn), m.role == "assistant"});
    if (!after_turn_.empty()) out.push_back({after_turn_, false});
  }
  if (generation_prompt) out.push_back({header("assistant"), false});
  return out;
}

}  // namespace zt
