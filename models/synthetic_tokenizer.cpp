#include "models/synthetic_tokenizer.h"

#include <map>
#include <string_view>
#include <nlohmann/json.hpp>
#include <unordered_set>
#include <vector>

#include "models/byte_unicode.h"

namespace brigade {
namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kLetters = "etaoinshrdlcumwfgypbvkjxqz";

const std::vector<std::string>& common_words() {
  static const std::vector<std::string> words = {
      "the", "and", "of", "to", "in", "is", "that", "it", "for", "was", "on", "with", "he", "as", "you",
      "at", "be", "this", "have", "from", "or", "by", "one", "had", "not", "but", "what", "all", "were",
      "when", "we", "there", "can", "an", "your", "which", "their", "said", "if", "do", "will", "each",
      "about", "how", "up", "out", "them", "then", "she", "many", "some", "so", "these", "would", "other",
      "into", "has", "more", "her", "two", "like", "him", "see", "time", "could", "no", "make", "than",
      "first", "been", "its", "who", "now", "people", "my", "made", "over", "did", "down", "only", "way",
      "find", "use", "may", "water", "long", "little", "very", "after", "words", "called", "just", "where",
      "most", "know", "get", "through", "back", "much", "go", "good", "new", "write", "our", "me", "man",
      "too", "any", "day", "same", "right", "look", "think", "also", "around", "another", "came", "come",
      "work", "three", "word", "must", "because", "does", "part", "even", "place", "well", "such", "here",
      "take", "why", "help", "put", "different", "away", "again", "off", "went", "old", "number", "great",
      "tell", "men", "say", "small", "every", "found", "still", "between", "name", "should", "home", "big",
      "give", "air", "line", "set", "own", "under", "read", "last", "never", "us", "left", "end", "along",
      "while", "might", "next", "sound", "below", "saw", "something", "thought", "both", "few", "those",
      "always", "show", "large", "often", "together", "asked", "house", "world", "going", "want", "school",
      "important", "until", "form", "food", "keep", "children", "feet", "land", "side", "without", "boy",
      "once", "animal", "life", "enough", "took", "sometimes", "four", "head", "above", "kind", "began",
      "almost", "live", "page", "got", "earth", "need", "far", "hand", "high", "year", "mother", "light",
      "country", "father", "let", "night", "picture", "being", "study", "second", "soon", "story", "since",
      "white", "ever", "paper", "hard", "near", "sentence", "better", "best", "across", "during", "today",
      "however", "sure", "knew", "try", "told", "young", "sun", "thing", "whole", "hear", "example", "heard",
      "several", "change", "answer", "room", "sea", "against", "top", "turned", "learn", "point", "city",
      "play", "toward", "five", "himself", "usually", "money", "seen", "didn", "car", "morning", "happy",
      "cat", "dog", "tree", "friend", "girl", "ball", "park", "sky", "bird", "fish", "once", "upon"};
  return words;
}

// Builds the token list (byte-mapped strings, index = id) and the merges, in rank order.
struct VocabBuilder {
  int target = 0;
  std::vector<std::string> tokens;
  std::unordered_set<std::string> seen;
  std::vector<std::pair<std::string, std::string>> merges;
  std::map<std::pair<std::string, std::string>, int> ranks;

  bool full() const { return static_cast<int>(tokens.size()) >= target; }
  void add_token(const std::string& t) {
    tokens.push_back(t);
    seen.insert(t);
  }
  // Adds merge (a, b) when a+b is new and both parts are tokens; returns whether it did.
  bool merge(const std::string& a, const std::string& b) {
    if (full() || seen.count(a + b) || !seen.count(a) || !seen.count(b)) return false;
    ranks[{a, b}] = static_cast<int>(merges.size());
    merges.emplace_back(a, b);
    add_token(a + b);
    return true;
  }
  // What BPE makes of `text` (raw bytes) with the merges so far: lowest rank first, leftmost.
  std::vector<std::string> encode(const std::string& text) const {
    std::vector<std::string> parts;
    for (char c : text) parts.push_back(byte_to_unicode(static_cast<uint8_t>(c)));
    while (parts.size() > 1) {
      size_t best = parts.size();
      int best_rank = 0;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = ranks.find({parts[i], parts[i + 1]});
        if (it != ranks.end() && (best == parts.size() || it->second < best_rank)) {
          best = i;
          best_rank = it->second;
        }
      }
      if (best == parts.size()) break;
      parts[best] += parts[best + 1];
      parts.erase(parts.begin() + static_cast<long>(best) + 1);
    }
    return parts;
  }
  // Adds merges until `text` encodes to one token. Each new merge ranks last, so it applies
  // after all earlier ones: joining two adjacent parts of the current encoding always shrinks it.
  // Gives up when every adjacent join already exists as a token (made by another path).
  void word(const std::string& text) {
    for (auto parts = encode(text); parts.size() > 1 && !full(); parts = encode(text)) {
      bool added = false;
      for (size_t i = 0; i + 1 < parts.size() && !added; ++i) added = merge(parts[i], parts[i + 1]);
      if (!added) return;
    }
  }
};

std::vector<std::pair<std::string, std::string>> build_vocab(int vocab_size, std::vector<std::string>& tokens) {
  VocabBuilder v;
  v.target = vocab_size;
  for (const char* s : {"<unk>", "<s>", "</s>"}) v.add_token(s);
  for (int b = 0; b < 256; ++b) v.add_token(byte_to_unicode(static_cast<uint8_t>(b)));
  for (const auto& w : common_words()) {
    v.word(" " + w);
    v.word(w);
  }
  for (char a = '0'; a <= '9'; ++a)
    for (char b = '0'; b <= '9'; ++b) v.word(std::string{a, b});
  for (const char* ws : {"  ", "   ", "    ", "\n\n", "        "}) v.word(ws);
  // Extension: every merged token (in creation order), then each letter, grows by one letter.
  const std::string space = byte_to_unicode(' ');
  std::vector<std::string> bases;
  for (const char* l = kLetters; *l; ++l) bases.push_back(space + *l);
  size_t next_base = 0, first_merged = 259;
  while (!v.full()) {
    if (next_base == bases.size()) {  // refresh with everything created so far
      for (size_t i = first_merged; i < v.tokens.size(); ++i) bases.push_back(v.tokens[i]);
      first_merged = v.tokens.size();
    }
    BRIGADE_CHECK(next_base < bases.size(), "the extension always has a token to grow");
    const std::string base = bases[next_base++];
    for (const char* l = kLetters; *l && !v.full(); ++l) v.merge(base, std::string(1, *l));
  }
  tokens = std::move(v.tokens);
  return std::move(v.merges);
}

ojson added_token(int id, const std::string& content) {
  return ojson{{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
               {"rstrip", false}, {"normalized", false}, {"special", true}};
}

ojson byte_level(bool add_prefix_space) {
  return ojson{{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true},
               {"use_regex", true}};
}

ojson bos_template() {
  auto special = [](int type_id) { return ojson{{"SpecialToken", {{"id", "<s>"}, {"type_id", type_id}}}}; };
  auto seq = [](const char* id, int type_id) { return ojson{{"Sequence", {{"id", id}, {"type_id", type_id}}}}; };
  return ojson{{"type", "TemplateProcessing"},
               {"single", ojson::array({special(0), seq("A", 0)})},
               {"pair", ojson::array({special(0), seq("A", 0), special(1), seq("B", 1)})},
               {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {kSyntheticBosId}}, {"tokens", {"<s>"}}}}}}};
}

}  // namespace

Expected<std::string> synthetic_tokenizer_json(int vocab_size) {
  if (vocab_size < kSyntheticMinVocab)
    return invalid_argument("a synthetic byte-level tokenizer needs vocab_size >= 259 (got " +
                            std::to_string(vocab_size) + ")");
  std::vector<std::string> tokens;
  const auto merges = build_vocab(vocab_size, tokens);
  BRIGADE_CHECK(static_cast<int>(tokens.size()) == vocab_size, "vocabulary filled exactly");
  ojson vocab = ojson::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<int>(i);
  ojson merge_list = ojson::array();
  for (const auto& [a, b] : merges) merge_list.push_back(a + " " + b);
  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = ojson::array({added_token(kSyntheticUnkId, "<unk>"), added_token(kSyntheticBosId, "<s>"),
                                    added_token(kSyntheticEosId, "</s>")});
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = byte_level(false);
  j["post_processor"] = bos_template();
  j["decoder"] = byte_level(true);
  j["model"] = ojson{{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                     {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                     {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merge_list}};
  return j.dump(2);
}

SyntheticChatTemplate synthetic_chat_template(const std::string& arch) {
  static constexpr SyntheticChatTemplate kShipped[] = {
#include "shipped_chat_templates.inc"
  };
  const char* name = "llama-2";
  if (arch == "qwen2" || arch == "qwen2_moe") name = "qwen2.5";
  if (arch == "glm4_moe") name = "glm-4.6";
  if (arch == "qwen3" || arch == "qwen3_moe" || arch == "qwen3_5") name = "qwen3";
  if (arch.starts_with("deepseek")) name = "deepseek-v3.1";
  for (const auto& t : kShipped)
    if (std::string_view(t.name) == name) return t;
  BRIGADE_CHECK(false, "every template make-model names is in models/chat_templates/");
  return {};
}

std::string synthetic_tokenizer_config_json(int max_position, const std::string& arch) {
  ojson decoder = ojson::object();
  for (auto [id, s] : {std::pair<int, const char*>{kSyntheticUnkId, "<unk>"}, {kSyntheticBosId, "<s>"},
                       {kSyntheticEosId, "</s>"}}) {
    ojson t = added_token(id, s);
    t.erase("id");
    decoder[std::to_string(id)] = t;
  }
  ojson j{{"add_bos_token", true}, {"add_eos_token", false}, {"added_tokens_decoder", decoder},
          {"bos_token", "<s>"}, {"clean_up_tokenization_spaces", false}, {"eos_token", "</s>"},
          {"model_max_length", max_position}, {"tokenizer_class", "PreTrainedTokenizerFast"},
          {"unk_token", "<unk>"}};
  j["chat_template"] = synthetic_chat_template(arch).text;
  return j.dump(2);
}

}  // namespace brigade
