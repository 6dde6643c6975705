// Chat templates by name, as the models' own templates render a conversation: `chatml`
// (SmolLM2, Qwen2: <|im_start|>role\n...<|im_end|>\n), `llama3` (<|begin_of_text|>, then
// <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>, contents trimmed) and `gemma`
// (<bos>, then <start_of_turn>role\n...<end_of_turn>\n, the assistant's role "model", a system
// message folded into the first turn as "system\n\n" before its content, contents trimmed, as
// Gemma 3's template does). A rendering is a list of segments, each marked as trained or not: an
// assistant turn's content and its end-of-turn token are what supervised fine-tuning learns (the
// model must learn to stop), the rest is context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/text/tokenizer.hpp"

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
  // Throws std::invalid_argument for a name other than "chatml", "llama3" and "gemma".
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
        end_of_turn_(p.end_of_turn), after_turn_(p.after_turn), assistant_role_(p.assistant_role), trim_(p.trim),
        system_in_first_turn_(p.system_in_first_turn) {}

  std::string name_, begin_, header_open_, header_close_, end_of_turn_, after_turn_, assistant_role_;
  bool trim_, system_in_first_turn_;
};

// A rendered conversation's tokens, and for each whether it is trained (as a target).
struct ChatTokens {
  std::vector<int32_t> ids;
  std::vector<uint8_t> trained;
};

// Appends the segments' tokens to out. [Note: chat tokens] The rendering is encoded whole, as the
// models' own tools encode a rendered template, since a token may run across two segments (a
// SentencePiece vocabulary merges a header's "\n" with the answer's first letters); a token is
// trained when any of its bytes is a trained segment's, found by laying the tokens' bytes along
// the text, as TRL's assistant masks take any token holding an assistant character. Where the
// tokens do not spell the text back (a normalizer rewrote it, an unknown byte, a prefix space),
// the segments are encoded one at a time instead.
void encode_chat(const std::vector<ChatSegment>& segments, const Tokenizer& tok, TokenEncoder& enc, ChatTokens& out);

}  // namespace zt
