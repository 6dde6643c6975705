// A compiled PCRE2 pattern (UTF-8, Unicode properties, JIT) that splits text the way a
// Hugging Face `Split` pre-tokenizer with behavior "Isolated" does: every match is a piece, and so
// is every run of text between matches. The tokenizers' split patterns (GPT-2's, Llama 3's, ...)
// use Unicode classes (\p{L}, \p{N}) and look-ahead, which PCRE2 does as Oniguruma (the Rust
// tokenizers' engine) does; hand-written tables would drift with every Unicode release.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;

namespace zt {

class Regex {
 public:
  // Throws std::runtime_error naming `what` (the file and field the pattern came from), the
  // pattern and PCRE2's message with the offset of the error.
  Regex(const std::string& pattern, const std::string& what);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  const std::string& pattern() const { return pattern_; }

  // Per-thread match state: a Regex is shared by the threads that encode, its match data not.
  class Matcher {
   public:
    explicit Matcher(const Regex& re);
    ~Matcher();
    Matcher(Matcher&&) noexcept;
    // Appends text's pieces to out, in order; they cover text exactly. Bytes that are not valid
    // UTF-8 match nothing (PCRE2_MATCH_INVALID_UTF), so they end up in the pieces between matches
    // and still reach the byte-level BPE.
    void split(std::string_view text, std::vector<std::string_view>& out);

   private:
    const Regex* re_;
    pcre2_real_match_data_8* md_;
  };

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
};

}  // namespace zt
