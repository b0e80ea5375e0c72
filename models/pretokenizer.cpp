#include "models/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace brigade {
namespace {

class RegexPreTokenizer final : public PreTokenizer {
 public:
  explicit RegexPreTokenizer(pcre2_code* code) : code_(code) {}
  ~RegexPreTokenizer() override { pcre2_code_free(code_); }
  RegexPreTokenizer(const RegexPreTokenizer&) = delete;
  RegexPreTokenizer& operator=(const RegexPreTokenizer&) = delete;

  std::vector<std::string_view> split(std::string_view text) const override {
    std::vector<std::string_view> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    BRIGADE_CHECK(md != nullptr, "pcre2 match data allocation");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0, emitted = 0;
    while (pos < text.size()) {
      // The caller validated UTF-8, so PCRE2's own check is skipped.
      const int rc = pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t begin = ov[0], end = ov[1];
      if (begin > emitted) out.push_back(text.substr(emitted, begin - emitted));
      if (end == begin) {  // empty match: step one code point so the loop advances
        pos = end + 1;
        while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
        continue;
      }
      out.push_back(text.substr(begin, end - begin));
      emitted = pos = end;
    }
    if (emitted < text.size()) out.push_back(text.substr(emitted));
    pcre2_match_data_free(md);
    return out;
  }

 private:
  pcre2_code* code_;
};

}  // namespace

Expected<std::unique_ptr<PreTokenizer>> make_regex_pretokenizer(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return invalid_argument("pre-tokenizer pattern does not compile at offset " + std::to_string(err_offset) +
                            ": " + reinterpret_cast<const char*>(msg));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // best effort: falls back to the interpreter
  return std::unique_ptr<PreTokenizer>(new RegexPreTokenizer(code));
}

}  // namespace brigade
