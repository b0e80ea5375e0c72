#include "models/tokenizer_json_vocab.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "models/tokenizer_unicode.h"
#include "models/utf8.h"

namespace brigade {

using json = nlohmann::json;

namespace {

// Rust regex's Unicode \w, which tokenizers' single_word tests beside a match (its STARTS_WITH_WORD
// "^\w" and ENDS_WITH_WORD "\w$"): Alphabetic, M*, Nd, Pc and Join_Control. PCRE2's own \w
// differs (all of N*, no Join_Control), so the class is spelled out.
bool is_word_char(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  static pcre2_code* const word = [] {
    const std::string pattern = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";
    int err = 0;
    PCRE2_SIZE at = 0;
    return pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_ANCHORED, &err, &at,
                         nullptr);
  }();
  BRIGADE_CHECK(word != nullptr, "the \\w class compiles with the PCRE2 brigade links");
  std::string utf8;
  append_utf8(utf8, cp);
  pcre2_match_data* m = pcre2_match_data_create_from_pattern(word, nullptr);
  const int rc = pcre2_match(word, reinterpret_cast<PCRE2_SPTR>(utf8.data()), utf8.size(), 0, 0, m, nullptr);
  pcre2_match_data_free(m);
  return rc > 0;
}

// Whether the character ending at `at` (the one starting at `at`) is a word character; false at
// the text's start (end).
bool word_before(std::string_view text, size_t at) {
  if (at == 0) return false;
  size_t prev = at - 1;
  while (prev > 0 && (static_cast<uint8_t>(text[prev]) & 0xC0) == 0x80) --prev;
  const size_t n = utf8_sequence_length(text, prev);
  return n == at - prev && is_word_char(decode_utf8(text, prev, n));
}
bool word_after(std::string_view text, size_t at) {
  const size_t n = at < text.size() ? utf8_sequence_length(text, at) : 0;
  return n > 0 && is_word_char(decode_utf8(text, at, n));
}

}  // namespace

Expected<ModelVocab> parse_model_vocab(const nlohmann::json& vocab, const std::string& origin) {
  ModelVocab v;
  int32_t max_id = -1;
  for (const auto& [tok, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24))
      return corrupt(origin + ": vocab entry '" + tok + "' has an invalid id");
    v.ids[tok] = id.get<int32_t>();
    max_id = std::max(max_id, id.get<int32_t>());
  }
  v.strings.assign(static_cast<size_t>(max_id + 1), std::string());
  for (const auto& [tok, id] : v.ids) v.strings[static_cast<size_t>(id)] = tok;
  return v;
}

Expected<std::vector<AddedToken>> parse_added_tokens(const nlohmann::json& j, const std::string& origin) {
  std::vector<AddedToken> added;
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return added;
  if (!j["added_tokens"].is_array()) return corrupt(origin + ": added_tokens must be an array");
  for (const auto& t : j["added_tokens"]) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string() || t["content"].get<std::string>().empty() || t["id"].get<int64_t>() < 0 ||
        t["id"].get<int64_t>() > (1 << 24))
      return corrupt(origin + ": each added token needs an id and a non-empty content");
    for (const char* flag : {"special", "lstrip", "rstrip", "normalized", "single_word"})
      if (!t.value(flag, json(false)).is_boolean())
        return corrupt(origin + ": added token " + t["content"].dump() + " has a " + flag + " that is not a boolean");
    added.push_back({t["content"].get<std::string>(), t["id"].get<int32_t>(), t.value("special", false), t.value("lstrip", false),
                     t.value("rstrip", false), t.value("normalized", false),
                     t.value("single_word", false)});
  }
  std::stable_sort(added.begin(), added.end(),
                   [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
  return added;
}

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::vector<std::string_view> contents;
  contents.reserve(tokens_.size());
  for (const AddedToken& a : tokens_) contents.emplace_back(a.content);
  matcher_ = AddedTokenMatcher(contents);
}

std::vector<TextPiece> AddedTokens::split(std::string_view text) const {
  std::vector<TextPiece> out;
  size_t segment = 0, i = 0;
  while (i < text.size()) {
    const AddedTokenMatcher::Match m = matcher_.find(text, i);
    if (m.index < 0) break;
    const AddedToken* hit = &tokens_[static_cast<size_t>(m.index)];
    size_t begin = m.begin, end = m.begin + m.length;
    if (hit->single_word && (word_before(text, begin) || word_after(text, end))) {
      i = end;  // inside a word: not a match, and (as Aho-Corasick's iteration) the search goes on after it
      continue;
    }
    while (hit->lstrip && begin > segment) {  // the whitespace character before begin, if any
      size_t prev = begin - 1;
      while (prev > segment && (static_cast<uint8_t>(text[prev]) & 0xC0) == 0x80) --prev;
      const size_t n = utf8_sequence_length(text, prev);
      if (n != begin - prev || !is_bert_whitespace(decode_utf8(text, prev, n))) break;
      begin = prev;
    }
    for (size_t n; hit->rstrip && end < text.size() && (n = utf8_sequence_length(text, end)) > 0 &&
                   is_bert_whitespace(decode_utf8(text, end, n));)
      end += n;
    if (begin > segment) out.push_back({text.substr(segment, begin - segment)});
    out.push_back({text.substr(begin, end - begin), hit->id});
    i = segment = end;
  }
  if (segment < text.size()) out.push_back({text.substr(segment)});
  return out;
}

}  // namespace brigade
