#include "models/tokenizer_bpe.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "models/byte_unicode.h"
#include "models/pretokenizer.h"
#include "models/tokenizer_json_vocab.h"
#include "models/tokenizer_normalizer.h"
#include "models/tokenizer_post_processor.h"
#include "models/utf8.h"

namespace brigade {
namespace {

using json = nlohmann::json;

struct MergeResult {
  int32_t rank = 0;
  int32_t id = 0;  // the merged token
};

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

class BpeTokenizer final : public Tokenizer {
 public:
  Status parse(const json& j, const json& config, const std::string& origin);

  Expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const override;
  Expected<std::vector<int32_t>> encode_pair(std::string_view a, std::string_view b,
                                             std::vector<int32_t>* type_ids = nullptr) const override;
  std::string token_to_piece(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? pieces_[static_cast<size_t>(id)] : std::string();
  }
  std::string token_string(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < strings_.size() ? strings_[static_cast<size_t>(id)] : std::string();
  }
  bool is_special(int32_t id) const override { return id >= 0 && id < vocab_size() && special_[static_cast<size_t>(id)]; }
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int32_t bos_id() const override { return bos_; }
  const std::vector<int32_t>& eos_ids() const override { return eos_; }

 private:
  Status parse_model(const json& model, const std::string& origin);
  Status parse_added(const json& j, const std::string& origin);
  void resolve_bos_eos(const json& config);
  Status parse_pre_tokenizer(const json& pre, const std::string& origin);
  // Appends the ids of normalized text between added tokens; invalid_argument when it holds a byte
  // the vocabulary has no token for.
  Status encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void encode_segment(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  std::vector<int32_t> bpe(std::string_view word) const;

  std::unordered_map<std::string, int32_t> vocab_;  // byte-mapped token string -> id
  std::vector<std::string> pieces_;                 // id -> bytes
  std::vector<std::string> strings_;                // id -> the vocabulary's string (or added content)
  std::vector<uint8_t> special_;                    // id -> is a special added token
  std::array<int32_t, 256> byte_ids_{};             // byte -> id of its single-byte token, -1 if none
  std::unordered_map<uint64_t, MergeResult> merges_;
  // Added tokens with normalized false, matched in the raw text; those with normalized true, by
  // their normalized content in the normalized text between the first (Hugging Face's
  // AddedVocabulary::extract_and_normalize). Each longest content first.
  AddedTokens added_;
  AddedTokens normalized_added_;
  TextNormalizer normalizer_;                       // none: the text as it is
  std::vector<std::unique_ptr<PreTokenizer>> pre_;  // applied in order; empty: one word
  bool add_prefix_space_ = false;
  bool ignore_merges_ = false;
  int32_t bos_ = -1;
  std::vector<int32_t> eos_;
  // What encode(add_bos) puts around the text: the post-processor's special tokens when it has a
  // template, else bos_ first.
  PostProcessor post_;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // word bytes -> ids
};

Status BpeTokenizer::parse_model(const json& m, const std::string& origin) {
  if (!m.is_object() || m.value("type", "") != "BPE")
    return unsupported(origin + ": model.type must be \"BPE\" (other tokenizer models are not supported yet)");
  if (!m.contains("vocab") || !m["vocab"].is_object() || !m.contains("merges") || !m["merges"].is_array())
    return corrupt(origin + ": model needs a \"vocab\" object and a \"merges\" array");
  ignore_merges_ = m.value("ignore_merges", false);
  BRIGADE_ASSIGN_OR_RETURN(ModelVocab vocab, parse_model_vocab(m["vocab"], origin));
  vocab_ = std::move(vocab.ids);
  strings_ = std::move(vocab.strings);
  pieces_.assign(strings_.size(), std::string());
  for (const auto& [tok, id] : vocab_) {
    auto bytes = unicode_string_to_bytes(tok);
    pieces_[static_cast<size_t>(id)] = bytes ? *bytes : tok;  // as HF's ByteLevel decoder does
  }
  // A vocabulary may lack some bytes (a toy or trimmed one; llama.cpp loads such a vocabulary too):
  // text holding one is refused by encode, naming it.
  for (int b = 0; b < 256; ++b) {
    auto it = vocab_.find(byte_to_unicode(static_cast<uint8_t>(b)));
    byte_ids_[static_cast<size_t>(b)] = it == vocab_.end() ? -1 : it->second;
  }
  int32_t rank = 0;
  for (const auto& e : m["merges"]) {
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return corrupt(origin + ": merge '" + s + "' must be two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return corrupt(origin + ": merge #" + std::to_string(rank) + " is neither \"a b\" nor [a, b]");
    }
    auto ia = vocab_.find(a), ib = vocab_.find(b), ir = vocab_.find(a + b);
    if (ia == vocab_.end() || ib == vocab_.end() || ir == vocab_.end())
      return corrupt(origin + ": merge '" + a + " " + b + "' refers to a token missing from the vocab");
    merges_.emplace(pair_key(ia->second, ib->second), MergeResult{rank, ir->second});
    ++rank;
  }
  return Status::ok();
}

Status BpeTokenizer::parse_added(const json& j, const std::string& origin) {
  BRIGADE_ASSIGN_OR_RETURN(std::vector<AddedToken> added, parse_added_tokens(j, origin));
  for (const auto& a : added) {
    if (a.id >= static_cast<int32_t>(pieces_.size())) pieces_.resize(static_cast<size_t>(a.id) + 1);
    pieces_[static_cast<size_t>(a.id)] = a.content;
    if (strings_.size() < pieces_.size()) strings_.resize(pieces_.size());
    strings_[static_cast<size_t>(a.id)] = a.content;
  }
  special_.assign(pieces_.size(), 0);
  for (const auto& a : added) special_[static_cast<size_t>(a.id)] = a.special ? 1 : 0;
  // Tokens with normalized true move to normalized_added_, matched by their normalized content,
  // which is also their string and their text (as Hugging Face's id_to_token gives it).
  std::vector<AddedToken> normalized_added =
      take_normalized(added, [&](const std::string& content) { return normalizer_.normalize(content); });
  for (const AddedToken& a : normalized_added) pieces_[static_cast<size_t>(a.id)] = strings_[static_cast<size_t>(a.id)] = a.content;
  added_ = AddedTokens(std::move(added));
  normalized_added_ = AddedTokens(std::move(normalized_added));
  return Status::ok();
}

// bos/eos from tokenizer_config.json ("bos_token": "<s>" or {"content": "<s>"}); without it,
// the usual names.
void BpeTokenizer::resolve_bos_eos(const json& config) {
  auto id_of = [&](const std::string& s) -> int32_t {
    for (const auto* list : {&added_, &normalized_added_})
      for (const auto& a : list->tokens())
        if (strings_[static_cast<size_t>(a.id)] == s) return a.id;
    auto it = vocab_.find(s);
    return it == vocab_.end() ? -1 : it->second;
  };
  auto name = [&](const char* key) -> std::string {
    if (!config.is_object() || !config.contains(key)) return {};
    const json& v = config[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return {};
  };
  std::string bos = name("bos_token"), eos = name("eos_token");
  if (config.is_null()) {
    for (const char* n : {"<s>", "<|begin_of_text|>"}) if (bos.empty() && id_of(n) >= 0) bos = n;
    for (const char* n : {"</s>", "<|end_of_text|>", "<|endoftext|>"}) if (eos.empty() && id_of(n) >= 0) eos = n;
  }
  bos_ = bos.empty() ? -1 : id_of(bos);
  if (!eos.empty() && id_of(eos) >= 0) eos_ = {id_of(eos)};
}

// ByteLevel alone (GPT-2), or a Sequence of Split{Regex, Isolated} and Digits steps ending in
// ByteLevel (Llama 3, Qwen2/3 and DeepSeek: Splits then ByteLevel with use_regex false; Cohere:
// Digits then ByteLevel with use_regex true). Each step splits every piece further.
Status BpeTokenizer::parse_pre_tokenizer(const json& pre, const std::string& origin) {
  const std::string kSupported = "; supported: ByteLevel, or Sequence of Split (Regex, Isolated), Digits and ByteLevel";
  std::vector<json> steps;
  if (pre.is_object() && pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") &&
      pre["pretokenizers"].is_array()) {
    for (const auto& s : pre["pretokenizers"]) steps.push_back(s);
  } else {
    steps.push_back(pre);
  }
  bool byte_level = false;
  for (const auto& s : steps) {
    const std::string type = s.is_object() ? s.value("type", "") : "";
    if (type == "ByteLevel") {
      byte_level = true;
      add_prefix_space_ = s.value("add_prefix_space", false);
      if (s.value("use_regex", true)) {
        BRIGADE_ASSIGN_OR_RETURN(auto r, make_regex_pretokenizer(kGpt2Pattern));
        pre_.push_back(std::move(r));
      }
    } else if (type == "Split" && s.contains("pattern") && s["pattern"].is_object() &&
               s["pattern"].contains("Regex") && s["pattern"]["Regex"].is_string() &&
               s.value("behavior", "") == "Isolated" && !s.value("invert", false)) {
      auto r = make_regex_pretokenizer(s["pattern"]["Regex"].get<std::string>());
      if (!r) return Status(r.status().code(), origin + ": " + r.status().message());
      pre_.push_back(std::move(*r));
    } else if (type == "Digits") {
      const json individual = s.value("individual_digits", json(false));
      if (!individual.is_boolean()) return corrupt(origin + ": pre-tokenizer Digits' individual_digits must be a boolean");
      pre_.push_back(make_digits_pretokenizer(individual.get<bool>()));
    } else {
      return unsupported(origin + ": pre-tokenizer step " + s.dump().substr(0, 200) + " is not supported" + kSupported);
    }
  }
  if (!byte_level) return unsupported(origin + ": pre_tokenizer has no ByteLevel step" + kSupported);
  return Status::ok();
}

Status BpeTokenizer::parse(const json& j, const json& config, const std::string& origin) {
  if (!j.is_object() || !j.contains("model")) return corrupt(origin + ": not a tokenizer.json (no \"model\")");
  BRIGADE_ASSIGN_OR_RETURN(normalizer_, TextNormalizer::parse(j.value("normalizer", json()), origin));
  BRIGADE_RETURN_IF_ERROR(parse_pre_tokenizer(j.value("pre_tokenizer", json()), origin));
  const json dec = j.value("decoder", json());
  if (!dec.is_null() && (!dec.is_object() || dec.value("type", "") != "ByteLevel"))
    return unsupported(origin + ": decoder must be ByteLevel (got " + dec.dump() + ")");
  BRIGADE_RETURN_IF_ERROR(parse_model(j["model"], origin));
  special_.assign(pieces_.size(), 0);
  BRIGADE_RETURN_IF_ERROR(parse_added(j, origin));
  resolve_bos_eos(config);
  BRIGADE_ASSIGN_OR_RETURN(post_, PostProcessor::parse(j.value("post_processor", json()), vocab_size(), origin));
  return Status::ok();
}

std::vector<int32_t> BpeTokenizer::bpe(std::string_view word) const {
  struct Sym { int32_t id; int prev, next; };
  struct Cand {
    int32_t rank; int pos; int32_t left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const int n = static_cast<int>(word.size());
  std::vector<Sym> syms(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    syms[static_cast<size_t>(i)] = {byte_ids_[static_cast<uint8_t>(word[static_cast<size_t>(i)])], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
  auto offer = [&](int pos) {
    if (pos < 0) return;
    const int next = syms[static_cast<size_t>(pos)].next;
    if (next < 0) return;
    auto it = merges_.find(pair_key(syms[static_cast<size_t>(pos)].id, syms[static_cast<size_t>(next)].id));
    if (it != merges_.end())
      queue.push({it->second.rank, pos, syms[static_cast<size_t>(pos)].id, syms[static_cast<size_t>(next)].id});
  };
  for (int i = 0; i < n; ++i) offer(i);
  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    Sym& s = syms[static_cast<size_t>(c.pos)];
    // Stale when either side was merged away since the candidate was queued.
    if (s.id != c.left || s.next < 0 || syms[static_cast<size_t>(s.next)].id != c.right) continue;
    Sym& right = syms[static_cast<size_t>(s.next)];
    s.id = merges_.at(pair_key(c.left, c.right)).id;
    s.next = right.next;
    if (right.next >= 0) syms[static_cast<size_t>(right.next)].prev = c.pos;
    right.id = -1;  // dead: no candidate matches it again
    offer(s.prev);
    offer(c.pos);
  }
  std::vector<int32_t> out;
  for (int i = 0; i >= 0 && n > 0; i = syms[static_cast<size_t>(i)].next) out.push_back(syms[static_cast<size_t>(i)].id);
  return out;
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const std::string key(word);
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  if (ignore_merges_) {
    if (auto it = vocab_.find(bytes_to_unicode_string(word)); it != vocab_.end()) ids = {it->second};
  }
  if (ids.empty()) ids = bpe(word);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= 100000) cache_.clear();  // bounded: a long-running server sees unbounded text
  cache_.emplace(key, std::move(ids));
}

void BpeTokenizer::encode_segment(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string prefixed;
  if (add_prefix_space_ && text.front() != ' ') {
    prefixed = " " + std::string(text);
    text = prefixed;
  }
  std::vector<std::string_view> pieces{text};
  for (const auto& step : pre_) {
    std::vector<std::string_view> next;
    for (std::string_view p : pieces)
      for (std::string_view q : step->split(p)) next.push_back(q);
    pieces = std::move(next);
  }
  for (std::string_view piece : pieces) encode_word(piece, out);
}

Status BpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return Status::ok();  // a normalizer may leave nothing of a piece
  // Each byte of the text (and the space add_prefix_space puts before it) must have a token.
  auto missing = [](uint8_t b) {
    return invalid_argument("the text holds byte " + std::to_string(b) + ", which this vocabulary has no token for");
  };
  if (add_prefix_space_ && text.front() != ' ' && byte_ids_[' '] < 0) return missing(' ');
  for (char ch : text)
    if (byte_ids_[static_cast<uint8_t>(ch)] < 0) return missing(static_cast<uint8_t>(ch));
  encode_segment(text, out);
  return Status::ok();
}

Expected<std::vector<int32_t>> BpeTokenizer::encode(std::string_view text, bool add_bos) const {
  const size_t bad = utf8_first_invalid(text);
  if (bad != text.size())
    return invalid_argument("text is not valid UTF-8 (first bad byte at offset " + std::to_string(bad) + ")");
  std::vector<int32_t> out;
  if (add_bos && !post_.templated() && bos_ >= 0) out.push_back(bos_);
  for (const TextPiece& piece : added_.split(text)) {
    if (piece.id >= 0) {
      out.push_back(piece.id);
      continue;
    }
    if (normalizer_.empty() && normalized_added_.tokens().empty()) {  // the usual tokenizer.json: no copy, no second split
      BRIGADE_RETURN_IF_ERROR(encode_text(piece.text, out));
      continue;
    }
    const std::string normalized = normalizer_.normalize(piece.text);
    for (const TextPiece& p : normalized_added_.split(normalized)) {
      if (p.id >= 0) out.push_back(p.id);
      else BRIGADE_RETURN_IF_ERROR(encode_text(p.text, out));
    }
  }
  if (add_bos && post_.templated()) return post_.single(out);
  return out;
}

Expected<std::vector<int32_t>> BpeTokenizer::encode_pair(std::string_view a, std::string_view b,
                                                         std::vector<int32_t>* type_ids) const {
  if (!post_.templated()) return Tokenizer::encode_pair(a, b, type_ids);
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> first, encode(a, false));
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> second, encode(b, false));
  return post_.pair(first, second, type_ids);
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_bpe_tokenizer(const json& tokenizer_json, const json& config,
                                                        const std::string& origin) {
  auto tok = std::make_unique<BpeTokenizer>();
  BRIGADE_RETURN_IF_ERROR(tok->parse(tokenizer_json, config, origin));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace brigade
