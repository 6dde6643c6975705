// Chat templates and the chat loader's rows: what the model reads is the rendered conversation,
// and the targets it is trained on are exactly the answers and their end-of-turn tokens. Uses
// SmolLM2's tokenizer from its GGUF file (scripts/install-deps.sh).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "runtime/data/data.hpp"
#include "runtime/text/chat_template.hpp"
#include "runtime/text/tokenizer.hpp"
#include "runtime/text/tokenizer_files.hpp"
#include "tests/test_util.hpp"

using zt::ChatTemplate;

namespace {

const char* kSmolLM2 = "/usr/local/share/ztrain/SmolLM2-135M-Instruct.Q4_1.gguf";

std::string joined(const std::vector<zt::ChatSegment>& segs, int trained = -1) {
  std::string s;
  for (const auto& g : segs)
    if (trained < 0 || g.trained == (trained == 1)) s += g.text;
  return s;
}

zt::DataConfig chat_config(const std::string& train, bool packing) {
  zt::DataConfig c;
  c.format = "chat";
  c.train = train;
  c.tokenizer = kSmolLM2;
  c.packing = packing;
  c.shuffle = false;
  c.val_fraction = 0.1;
  return c;
}

}  // namespace

TEST_CASE("chat templates render as the models' own templates do") {
  const std::vector<zt::ChatMessage> conv = {{"system", "Be brief."}, {"user", "Hi?"}, {"assistant", "Hello."}};
  const ChatTemplate chatml("chatml");
  CHECK(joined(chatml.render(conv)) ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi?<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n");
  CHECK(joined(chatml.render(conv), 1) == "Hello.<|im_end|>");
  CHECK(joined(chatml.render({{"user", "Hi?"}}, true)) == "<|im_start|>user\nHi?<|im_end|>\n<|im_start|>assistant\n");
  const ChatTemplate llama3("llama3");
  CHECK(joined(llama3.render(conv)) ==
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>");
  CHECK(llama3.end_of_turn() == "<|eot_id|>");
  // Gemma 3's: the system message opens the first user turn, the assistant is "model", contents trimmed.
  const ChatTemplate gemma("gemma");
  CHECK(joined(gemma.render({{"system", "Be brief."}, {"user", " Hi? "}, {"assistant", "Hello.\n"}}, false)) ==
        "<bos><start_of_turn>user\nBe brief.\n\nHi?<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n");
  CHECK(joined(gemma.render({{"user", "Hi?"}}, true)) == "<bos><start_of_turn>user\nHi?<end_of_turn>\n<start_of_turn>model\n");
  CHECK_THROWS_WITH_AS(ChatTemplate("vicuna"), "unknown chat template 'vicuna' (known: chatml, llama3, gemma)", std::invalid_argument);
}

TEST_CASE("chat rows: the model reads the conversation and is trained on the answers only") {
  REQUIRE_MESSAGE(std::filesystem::exists(kSmolLM2), kSmolLM2 << " is missing: run scripts/install-deps.sh");
  zt::test::TempDir dir;
  const std::string path = dir.write("c.jsonl",
      R"({"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4."}, {"role": "user", "content": "And 3+3?"}, {"role": "assistant", "content": "6."}]})" "\n"
      R"({"query": "Capital of France?", "response": "Paris.", "system": "Answer in one word."})" "\n"
      R"({"instruction": "Add.", "input": "1+1", "output": "2"})" "\n");
  const zt::Tokenizer tok = zt::load_tokenizer(kSmolLM2);
  const int T = 64;
  for (bool packing : {false, true}) {
    CAPTURE(packing);
    auto loader = zt::make_loader(chat_config(path, packing), zt::Split::train, 1, T, 0, 1, 1);
    CHECK(loader->masks_targets());
    std::vector<int32_t> in(T), tg(T);
    loader->next(in.data(), tg.data());
    std::string read, trained;
    for (int t = 0; t < T; ++t) {
      read += tok.token(in[size_t(t)]);
      if (tg[size_t(t)] >= 0) trained += tok.token(tg[size_t(t)]);
      if (t + 1 < T && tg[size_t(t)] >= 0) CHECK(tg[size_t(t)] == in[size_t(t) + 1]);  // targets are the next inputs
    }
    const std::string first = "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4.<|im_end|>\n"
                              "<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n6.<|im_end|>\n";
    CHECK(read.starts_with(first));
    if (!packing) {
      CHECK(trained == "4.<|im_end|>6.<|im_end|>");
      CHECK(read.substr(first.size()).find_first_not_of("<|endoftext|>") == std::string::npos);  // padding
    } else {  // the second conversation follows in the same row, its system message first
      CHECK(read.substr(first.size()).starts_with("<|im_start|>system\nAnswer in one word.<|im_end|>\n"));
      CHECK(trained.starts_with("4.<|im_end|>6.<|im_end|>Paris.<|im_end|>"));
    }
  }
}
