// The chat templates against transformers' apply_chat_template with the models' own Jinja
// templates (Gemma 3's, Llama 3's), through tokenizers trained at test time by
// tests/ref/tokenizer_ref.py (`spm`, `chat`): the same ids, and the trained tokens spell the
// assistant's answers and their end-of-turn tokens.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/text/chat_template.hpp"
#include "runtime/text/tokenizer_files.hpp"
#include "tests/test_util.hpp"

namespace zt {

TEST_CASE("gemma and llama3 render and tokenize as transformers' apply_chat_template") {
  const char* py = std::getenv("ZT_PYTHON");
  const char* ref = std::getenv("ZT_TOKENIZER_REF");
  REQUIRE_MESSAGE((py && ref), "ZT_PYTHON and ZT_TOKENIZER_REF must be set (meson test sets them)");
  test::TempDir dir;
  for (const char* step : {"spm", "chat"}) {
    const test::Run r = test::run(std::string(py) + " " + ref + " " + step + " " + dir.path.string());
    REQUIRE_MESSAGE(r.status == 0, "the tokenizers/transformers reference failed:\n" << r.output);
  }
  const auto cases = nlohmann::json::parse(std::ifstream(dir.path / "chat.json"));
  REQUIRE(cases.size() == 6);
  for (const auto& c : cases) {
    const ChatTemplate tmpl(c.at("template").get<std::string>());
    const Tokenizer tok = load_tokenizer(c.at("tokenizer"));
    std::vector<ChatMessage> messages;
    for (const auto& m : c.at("messages")) messages.push_back({m.at("role"), m.at("content")});
    TokenEncoder enc(tok);
    ChatTokens got;
    encode_chat(tmpl.render(messages, c.at("generation_prompt")), tok, enc, got);
    INFO(tmpl.name() << ": " << c.at("messages").dump());
    CHECK(got.ids == c.at("ids").get<std::vector<int32_t>>());
    // The trained tokens: each answer and its end of turn, nothing else (a token running into
    // an answer from its header counts as the answer's).
    std::string trained;
    for (size_t k = 0; k < got.ids.size(); ++k)
      if (got.trained[k]) trained += tok.token(got.ids[k]);
    size_t at = 0, answer_bytes = 0;
    for (const auto& a : c.at("answers")) {
      const std::string turn = a.get<std::string>() + tmpl.end_of_turn();
      at = trained.find(turn, at);
      CHECK_MESSAGE(at != std::string::npos, "not trained: " << turn);
      answer_bytes += turn.size();
    }
    CHECK(trained.size() <= answer_bytes + 8 * c.at("answers").size());
  }
}

}  // namespace zt
