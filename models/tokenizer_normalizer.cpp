#include "models/tokenizer_normalizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "models/tokenizer_precompiled.h"
#include "models/tokenizer_unicode.h"
#include "models/utf8.h"

namespace brigade {

using json = nlohmann::json;

struct TextNormalizer::Step {
  virtual ~Step() = default;
  virtual std::string apply(std::string_view text) const = 0;
};

namespace {

struct PrecompiledStep final : TextNormalizer::Step {
  explicit PrecompiledStep(PrecompiledCharsmap m) : charsmap(std::move(m)) {}
  std::string apply(std::string_view text) const override { return charsmap.normalize(text); }
  PrecompiledCharsmap charsmap;
};

// Every non-overlapping occurrence of a literal, left to right.
struct ReplaceStringStep final : TextNormalizer::Step {
  std::string pattern, content;
  std::string apply(std::string_view text) const override {
    std::string out;
    size_t from = 0;
    for (size_t at = text.find(pattern); at != std::string_view::npos; at = text.find(pattern, from)) {
      out.append(text, from, at - from);
      out += content;
      from = at + pattern.size();
    }
    out.append(text, from);
    return out;
  }
};

// Every non-overlapping match of a regex, left to right; an empty match inserts `content` and
// moves one character on.
struct ReplaceRegexStep final : TextNormalizer::Step {
  pcre2_code* code = nullptr;
  std::string content;
  ~ReplaceRegexStep() override { pcre2_code_free(code); }
  std::string apply(std::string_view text) const override {
    std::string out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
    BRIGADE_CHECK(md != nullptr, "pcre2 match data allocation");
    size_t from = 0, pos = 0;
    while (pos <= text.size()) {
      const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      out.append(text, from, ov[0] - from);
      out += content;
      from = pos = ov[1];
      if (ov[1] == ov[0]) {  // empty match: keep the next character and go past it
        if (pos == text.size()) break;
        const size_t n = std::max<size_t>(1, utf8_sequence_length(text, pos));
        out.append(text, pos, n);
        from = pos += n;
      }
    }
    out.append(text, std::min(from, text.size()));
    pcre2_match_data_free(md);
    return out;
  }
};

// Unicode White_Space (Rust's char::is_whitespace) off either end.
struct StripStep final : TextNormalizer::Step {
  bool left = false, right = false;
  std::string apply(std::string_view text) const override {
    std::u32string chars = utf8_to_u32(text);
    size_t begin = 0, end = chars.size();
    while (left && begin < end && is_bert_whitespace(chars[begin])) ++begin;
    while (right && end > begin && is_bert_whitespace(chars[end - 1])) --end;
    return u32_to_utf8(std::u32string_view(chars).substr(begin, end - begin));
  }
};

// Prepended to text that is not empty.
struct PrependStep final : TextNormalizer::Step {
  std::string prefix;
  std::string apply(std::string_view text) const override { return text.empty() ? std::string() : prefix + std::string(text); }
};

struct LowercaseStep final : TextNormalizer::Step {
  std::string apply(std::string_view text) const override {
    std::u32string out;
    for (char32_t c : utf8_to_u32(text)) append_lowercase(out, c);
    return u32_to_utf8(out);
  }
};

// NFD, NFKD, NFC or NFKC (tokenizer_unicode.h's append_nfd, ...).
struct UnicodeFormStep final : TextNormalizer::Step {
  using Append = void (*)(std::u32string&, std::u32string_view);
  explicit UnicodeFormStep(Append a) : append(a) {}
  std::string apply(std::string_view text) const override {
    std::u32string out;
    append(out, utf8_to_u32(text));
    return u32_to_utf8(out);
  }
  Append append;
};

// The Unicode normalization forms by tokenizer.json type name.
UnicodeFormStep::Append unicode_form(const std::string& type) {
  if (type == "NFD") return append_nfd;
  if (type == "NFKD") return append_nfkd;
  if (type == "NFC") return append_nfc;
  if (type == "NFKC") return append_nfkc;
  return nullptr;
}

Expected<std::shared_ptr<const TextNormalizer::Step>> parse_replace(const json& n, const std::string& origin) {
  const json& pattern = n.value("pattern", json());
  const json& content = n.value("content", json());
  if (!content.is_string() || !pattern.is_object() || pattern.size() != 1 ||
      !(pattern.contains("String") || pattern.contains("Regex")) || !pattern.begin()->is_string())
    return corrupt(origin + ": normalizer Replace needs a pattern {\"String\": ...} or {\"Regex\": ...} and a string content");
  const std::string text = pattern.begin()->get<std::string>();
  if (text.empty()) return corrupt(origin + ": normalizer Replace has an empty pattern");
  if (pattern.contains("String")) {
    auto step = std::make_shared<ReplaceStringStep>();
    step->pattern = text;
    step->content = content.get<std::string>();
    return std::shared_ptr<const TextNormalizer::Step>(std::move(step));
  }
  auto step = std::make_shared<ReplaceRegexStep>();
  int err = 0;
  PCRE2_SIZE at = 0;
  step->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr);
  if (!step->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(err, message, sizeof(message));
    return corrupt(origin + ": normalizer Replace's Regex " + json(text).dump() + " does not compile at offset " +
                   std::to_string(at) + ": " + reinterpret_cast<const char*>(message));
  }
  step->content = content.get<std::string>();
  return std::shared_ptr<const TextNormalizer::Step>(std::move(step));
}

}  // namespace

Expected<TextNormalizer> TextNormalizer::parse(const json& normalizer, const std::string& origin) {
  TextNormalizer t;
  BRIGADE_RETURN_IF_ERROR(t.add(normalizer, origin));
  return t;
}

Status TextNormalizer::add(const json& n, const std::string& origin) {
  if (n.is_null()) return Status::ok();
  const std::string type = n.is_object() ? n.value("type", "") : "";
  if (type == "Sequence") {
    if (!n.contains("normalizers") || !n["normalizers"].is_array())
      return corrupt(origin + ": normalizer Sequence needs a \"normalizers\" list");
    for (const json& each : n["normalizers"]) BRIGADE_RETURN_IF_ERROR(add(each, origin));
  } else if (type == "Precompiled") {
    if (!n.contains("precompiled_charsmap") || !n["precompiled_charsmap"].is_string())
      return corrupt(origin + ": normalizer Precompiled needs a base64 string precompiled_charsmap");
    BRIGADE_ASSIGN_OR_RETURN(PrecompiledCharsmap m, PrecompiledCharsmap::parse(n["precompiled_charsmap"].get<std::string>(), origin));
    steps_.push_back(std::make_shared<PrecompiledStep>(std::move(m)));
  } else if (type == "Replace") {
    BRIGADE_ASSIGN_OR_RETURN(auto step, parse_replace(n, origin));
    steps_.push_back(std::move(step));
  } else if (type == "Strip") {
    const json left = n.value("strip_left", json(false)), right = n.value("strip_right", json(false));
    if (!left.is_boolean() || !right.is_boolean()) return corrupt(origin + ": normalizer Strip needs boolean strip_left and strip_right");
    auto step = std::make_shared<StripStep>();
    step->left = left.get<bool>();
    step->right = right.get<bool>();
    steps_.push_back(std::move(step));
  } else if (type == "Prepend") {
    if (!n.contains("prepend") || !n["prepend"].is_string()) return corrupt(origin + ": normalizer Prepend needs a string prepend");
    auto step = std::make_shared<PrependStep>();
    step->prefix = n["prepend"].get<std::string>();
    steps_.push_back(std::move(step));
  } else if (type == "Lowercase") {
    steps_.push_back(std::make_shared<LowercaseStep>());
  } else if (const UnicodeFormStep::Append form = unicode_form(type)) {
    steps_.push_back(std::make_shared<UnicodeFormStep>(form));
  } else {
    return unsupported(origin + ": normalizer type '" + type +
                       "' is not supported (Precompiled, Replace, Strip, Prepend, Lowercase, NFD, NFKD, NFC, NFKC, "
                       "Sequence)");
  }
  return Status::ok();
}

std::string TextNormalizer::normalize(std::string_view text) const {
  std::string out(text);
  for (const auto& step : steps_) out = step->apply(out);
  return out;
}

}  // namespace brigade
