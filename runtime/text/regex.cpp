#include "runtime/text/regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>
#include <utility>

namespace zt {

Regex::Regex(const std::string& pattern, const std::string& what) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE at = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
  if (code_ == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw std::runtime_error(what + ": the split pattern '" + pattern + "' does not compile at offset " +
                             std::to_string(at) + ": " + reinterpret_cast<const char*>(msg));
  }
  // JIT makes splitting several times faster; where it is unavailable (no JIT support on this
  // CPU, or a locked-down allocator) the interpreter gives the same matches.
  (void)pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() { pcre2_code_free(code_); }
Regex::Regex(Regex&& o) noexcept : pattern_(std::move(o.pattern_)), code_(std::exchange(o.code_, nullptr)) {}
Regex& Regex::operator=(Regex&& o) noexcept {
  std::swap(pattern_, o.pattern_);
  std::swap(code_, o.code_);
  return *this;
}

Regex::Matcher::Matcher(const Regex& re) : re_(&re), md_(pcre2_match_data_create_from_pattern(re.code_, nullptr)) {
  if (md_ == nullptr) throw std::bad_alloc();
}
Regex::Matcher::~Matcher() { pcre2_match_data_free(md_); }
Regex::Matcher::Matcher(Matcher&& o) noexcept : re_(o.re_), md_(std::exchange(o.md_, nullptr)) {}

void Regex::Matcher::split(std::string_view text, std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap = 0, pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(re_->code_, subject, text.size(), pos, 0, md_, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw std::runtime_error("tokenizer: the split pattern '" + re_->pattern_ + "' failed at byte " +
                               std::to_string(pos) + ": " + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
    size_t begin = ov[0], end = ov[1];
    if (end == begin) {  // an empty match splits nothing: step over one character and go on
      pos = begin + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (begin > gap) out.push_back(text.substr(gap, begin - gap));
    out.push_back(text.substr(begin, end - begin));
    gap = pos = end;
  }
  if (gap < text.size()) out.push_back(text.substr(gap));
}

}  // namespace zt
