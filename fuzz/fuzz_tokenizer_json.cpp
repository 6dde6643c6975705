// A Hugging Face tokenizer.json: read by the tokenizer's reader (a TokenizerError, or PCRE2's
// message for a bad pattern, for bad input); one that loads encodes its own text, and where every
// byte has a token, decodes it back to the same bytes.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_input.hpp"
#include "runtime/text/tokenizer.hpp"
#include "runtime/text/tokenizer_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zt::fuzz::write_input("tokenizer.json", data, size);
  try {
    const zt::Tokenizer tok = zt::load_tokenizer(path);
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::vector<int32_t> ids = tok.encode(text);
    if (tok.covers_all_bytes() && tok.decode(ids) != text) abort();
  } catch (const zt::TokenizerError&) {
  } catch (const std::runtime_error& e) {  // a split pattern PCRE2 refuses names itself
    if (std::string(e.what()).find("split pattern") == std::string::npos) throw;
  }
  return 0;
}
