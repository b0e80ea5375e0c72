#include "models/tokenizer_bert_text.h"

#include "models/tokenizer_unicode.h"

namespace brigade {

using json = nlohmann::json;

Expected<std::optional<BertNormalizerOptions>> parse_bert_normalizer(const json& n, const std::string& origin) {
  if (n.is_null()) return std::optional<BertNormalizerOptions>();
  const std::string type = n.is_object() ? n.value("type", "") : "";
  if (type != "BertNormalizer")
    return unsupported(origin + ": normalizer type '" + type +
                       "' is not supported by the WordPiece tokenizer (BertNormalizer, or null)");
  auto flag = [&](const char* key, bool fallback) -> Expected<bool> {
    if (!n.contains(key) || n[key].is_null()) return fallback;
    if (!n[key].is_boolean()) return corrupt(origin + ": normalizer." + key + " must be true, false or null");
    return n[key].get<bool>();
  };
  BertNormalizerOptions o;
  BRIGADE_ASSIGN_OR_RETURN(o.clean_text, flag("clean_text", true));
  BRIGADE_ASSIGN_OR_RETURN(o.handle_chinese_chars, flag("handle_chinese_chars", true));
  BRIGADE_ASSIGN_OR_RETURN(o.lowercase, flag("lowercase", true));
  BRIGADE_ASSIGN_OR_RETURN(o.strip_accents, flag("strip_accents", o.lowercase));
  return std::optional<BertNormalizerOptions>(o);
}

std::u32string bert_normalize(std::u32string_view text, const BertNormalizerOptions& o) {
  std::u32string cleaned;
  cleaned.reserve(text.size());
  for (char32_t cp : text) {
    if (o.clean_text && is_bert_control(cp)) continue;  // not \t \n \r: those are whitespace
    if (o.clean_text && is_bert_whitespace(cp)) cp = U' ';
    const bool pad = o.handle_chinese_chars && is_bert_chinese_char(cp);
    if (pad) cleaned += U' ';
    cleaned += cp;
    if (pad) cleaned += U' ';
  }
  if (o.strip_accents) {
    std::u32string decomposed;
    append_nfd(decomposed, cleaned);
    cleaned.clear();
    for (char32_t cp : decomposed)
      if (!is_nonspacing_mark(cp)) cleaned += cp;
  }
  if (!o.lowercase) return cleaned;
  std::u32string lower;
  lower.reserve(cleaned.size());
  for (char32_t cp : cleaned) append_lowercase(lower, cp);
  return lower;
}

Expected<BertPreTokenizerOptions> parse_bert_pre_tokenizer(const json& pre, const std::string& origin) {
  BertPreTokenizerOptions o;
  if (pre.is_null()) return o;
  std::vector<json> steps;
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array()) {
    steps.assign(pre["pretokenizers"].begin(), pre["pretokenizers"].end());
  } else {
    steps.push_back(pre);
  }
  // Each step only splits, so a Sequence of them splits where any of them would.
  for (const json& s : steps) {
    const std::string type = s.is_object() ? s.value("type", "") : "";
    if (type == "BertPreTokenizer") {
      o.split_whitespace = o.isolate_punctuation = true;
    } else if (type == "WhitespaceSplit") {
      o.split_whitespace = true;
    } else if (type == "Punctuation" && s.value("behavior", "Isolated") == "Isolated") {
      o.isolate_punctuation = true;
    } else {
      return unsupported(origin + ": pre_tokenizer type '" + type + "' (" + s.dump().substr(0, 120) +
                         ") is not supported by the WordPiece tokenizer (BertPreTokenizer, WhitespaceSplit, "
                         "Punctuation with behavior Isolated, a Sequence of these, or null)");
    }
  }
  return o;
}

std::vector<std::u32string_view> bert_pre_tokenize(std::u32string_view text, const BertPreTokenizerOptions& o) {
  std::vector<std::u32string_view> words;
  size_t begin = 0;
  auto end_word = [&](size_t end) {
    if (end > begin) words.push_back(text.substr(begin, end - begin));
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (o.split_whitespace && is_bert_whitespace(text[i])) {
      end_word(i);
      begin = i + 1;
    } else if (o.isolate_punctuation && is_bert_punctuation(text[i])) {
      end_word(i);
      words.push_back(text.substr(i, 1));
      begin = i + 1;
    }
  }
  end_word(text.size());
  return words;
}

}  // namespace brigade
