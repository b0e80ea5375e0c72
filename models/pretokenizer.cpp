#include "models/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "models/tokenizer_unicode.h"
#include "models/utf8.h"

namespace brigade {
namespace {

// Unicode White_Space: what \s matches in Oniguruma, the regex engine of Hugging Face tokenizers
// (the reference for every tokenizer.json pattern), and in llama.cpp's pre-tokenizers. PCRE2's
// \s under UCP also matches U+180E MONGOLIAN VOWEL SEPARATOR (White_Space before Unicode 6.3; a
// format character since), so "a\u180e\u180eb" would split differently. Only that code point
// differs (every code point checked against both engines).
constexpr std::string_view kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// `pattern` with \s spelled out as kWhiteSpace, inside character classes and out, and \S outside
// them as its complement. (\S inside a class keeps PCRE2's meaning; no known pattern has one.)
std::string with_unicode_white_space(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (next == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    out += c;
    if (c == '[' && !in_class) {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (c == ']' && in_class) {
      in_class = false;
    }
  }
  return out;
}

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

class DigitsPreTokenizer final : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}

  std::vector<std::string_view> split(std::string_view text) const override {
    std::vector<std::string_view> out;
    size_t begin = 0;  // of the piece being built
    bool numeric_run = false;
    for (size_t i = 0; i < text.size();) {
      const size_t n = std::max<size_t>(1, utf8_sequence_length(text, i));
      const bool numeric = is_numeric(decode_utf8(text, i, n));
      // A piece ends before a change of kind, and between two digits when each is its own.
      if (i > begin && (numeric != numeric_run || (numeric && individual_))) {
        out.push_back(text.substr(begin, i - begin));
        begin = i;
      }
      numeric_run = numeric;
      i += n;
    }
    if (begin < text.size()) out.push_back(text.substr(begin));
    return out;
  }

 private:
  bool individual_;
};

// Compiles `pattern` (UTF + Unicode properties); invalid_argument with PCRE2's message otherwise.
Expected<pcre2_code*> compile(const std::string& pattern) {
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
  return code;
}

}  // namespace

Expected<std::unique_ptr<PreTokenizer>> make_regex_pretokenizer(const std::string& pattern) {
  // The pattern as written first, so that an error's offset points into it.
  BRIGADE_ASSIGN_OR_RETURN(pcre2_code* as_written, compile(pattern));
  pcre2_code_free(as_written);
  BRIGADE_ASSIGN_OR_RETURN(pcre2_code* code, compile(with_unicode_white_space(pattern)));
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // best effort: falls back to the interpreter
  return std::unique_ptr<PreTokenizer>(new RegexPreTokenizer(code));
}

std::unique_ptr<PreTokenizer> make_digits_pretokenizer(bool individual_digits) {
  return std::make_unique<DigitsPreTokenizer>(individual_digits);
}

}  // namespace brigade
