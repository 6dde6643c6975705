// Chat templates by name, as the models' own templates render a conversation: `chatml`
// (SmolLM2, Qwen2: <|im_start|>role\n...<|im_end|>\n) and `llama3` (<|begin_of_text|>, then
// <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>). A rendering is a list of segments,
// each marked as trained or not: an assistant turn's content and its end-of-turn token are what
// supervised fine-tuning learns (the model must learn to stop), the rest is context.
#pragma once

#include <string>
#include <vector>

namespace zt {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatSegment {
  std::string text;
  bool trained;
};

class ChatTemplate {
 public:
  // Throws std::invalid_argument for a name other than "chatml" and "llama3".
  explicit ChatTemplate(const std::string& name);
  static const std::vector<std::string>& names();

  const std::string& name() const { return name_; }
  // The whole conversation; with `generation_prompt`, the header of an assistant turn follows, for
  // the model to continue (sampling).
  std::vector<ChatSegment> render(const std::vector<ChatMessage>& messages, bool generation_prompt = false) const;
  // The token text that ends a turn (<|im_end|>, <|eot_id|>): where a chat sample stops.
  const std::string& end_of_turn() const { return end_of_turn_; }

 private:
  template <class Parts>
  ChatTemplate(const std::string& name, const Parts& p)
      : name_(name), begin_(p.begin), header_open_(p.header_open), header_close_(p.header_close),
        end_of_turn_(p.end_of_turn), after_turn_(p.after_turn) {}

  std::string name_, begin_, header_open_, header_close_, end_of_turn_, after_turn_;
};

}  // namespace zt
