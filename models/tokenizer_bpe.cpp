#include "models/tokenizer_bpe.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "models/byte_unicode.h"
#include "models/pretokenizer.h"
#include "models/utf8.h"

namespace brigade {
namespace {

using json = nlohmann::json;

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
};

struct MergeResult {
  int32_t rank = 0;
  int32_t id = 0;  // the merged token
};

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

class BpeTokenizer final : public Tokenizer {
 public:
  Status parse(const json& j, const json& config, const std::string& origin);

  Expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const override;
  Expected<std::vector<int32_t>> encode_pair(std::string_view a, std::string_view b) const override;
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
  Status parse_post_processor(const json& post, const std::string& origin);
  void encode_segment(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  std::vector<int32_t> bpe(std::string_view word) const;

  std::unordered_map<std::string, int32_t> vocab_;  // byte-mapped token string -> id
  std::vector<std::string> pieces_;                 // id -> bytes
  std::vector<std::string> strings_;                // id -> the vocabulary's string (or added content)
  std::vector<uint8_t> special_;                    // id -> is a special added token
  std::array<int32_t, 256> byte_ids_{};             // byte -> id of its single-byte token, -1 if none
  std::unordered_map<uint64_t, MergeResult> merges_;
  std::vector<AddedToken> added_;                   // longest content first
  std::vector<std::unique_ptr<PreTokenizer>> pre_;  // applied in order; empty: one word
  bool add_prefix_space_ = false;
  bool ignore_merges_ = false;
  int32_t bos_ = -1;
  std::vector<int32_t> eos_;
  // What encode(add_bos) puts around the text: the post-processor's special tokens when it has a
  // template (prefix_/suffix_ set, templated_), else bos_ first.
  bool templated_ = false;
  std::vector<int32_t> prefix_, suffix_;
  // The pair template (encode_pair): special token ids, with kPairA / kPairB where the texts go;
  // empty when the post-processor has none.
  static constexpr int32_t kPairA = -1, kPairB = -2;
  std::vector<int32_t> pair_;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // word bytes -> ids
};

Status BpeTokenizer::parse_model(const json& m, const std::string& origin) {
  if (!m.is_object() || m.value("type", "") != "BPE")
    return unsupported(origin + ": model.type must be \"BPE\" (other tokenizer models are not supported yet)");
  if (!m.contains("vocab") || !m["vocab"].is_object() || !m.contains("merges") || !m["merges"].is_array())
    return corrupt(origin + ": model needs a \"vocab\" object and a \"merges\" array");
  ignore_merges_ = m.value("ignore_merges", false);
  int32_t max_id = -1;
  for (const auto& [tok, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24))
      return corrupt(origin + ": vocab entry '" + tok + "' has an invalid id");
    vocab_[tok] = id.get<int32_t>();
    max_id = std::max(max_id, id.get<int32_t>());
  }
  pieces_.assign(static_cast<size_t>(max_id + 1), std::string());
  strings_.assign(pieces_.size(), std::string());
  for (const auto& [tok, id] : vocab_) {
    strings_[static_cast<size_t>(id)] = tok;
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
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return Status::ok();
  if (!j["added_tokens"].is_array()) return corrupt(origin + ": added_tokens must be an array");
  for (const auto& t : j["added_tokens"]) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string() || t["content"].get<std::string>().empty() || t["id"].get<int64_t>() < 0 ||
        t["id"].get<int64_t>() > (1 << 24))
      return corrupt(origin + ": each added token needs an id and a non-empty content");
    AddedToken a{t["content"].get<std::string>(), t["id"].get<int32_t>(), t.value("special", false)};
    if (a.id >= static_cast<int32_t>(pieces_.size())) pieces_.resize(static_cast<size_t>(a.id) + 1);
    pieces_[static_cast<size_t>(a.id)] = a.content;
    if (strings_.size() < pieces_.size()) strings_.resize(pieces_.size());
    strings_[static_cast<size_t>(a.id)] = a.content;
    added_.push_back(std::move(a));
  }
  special_.assign(pieces_.size(), 0);
  for (const auto& a : added_) special_[static_cast<size_t>(a.id)] = a.special ? 1 : 0;
  std::stable_sort(added_.begin(), added_.end(),
                   [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
  return Status::ok();
}

// bos/eos from tokenizer_config.json ("bos_token": "<s>" or {"content": "<s>"}); without it,
// the usual names.
void BpeTokenizer::resolve_bos_eos(const json& config) {
  auto id_of = [&](const std::string& s) -> int32_t {
    for (const auto& a : added_)
      if (a.content == s) return a.id;
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

// tokenizer.json's post_processor, what Hugging Face adds with add_special_tokens: a
// TemplateProcessing's `single` (special tokens around $A: Llama 3's "<|begin_of_text|> $A",
// Qwen3-Embedding's "$A <|endoftext|>"), BertProcessing/RobertaProcessing's cls $A sep, each
// alone or in a Sequence (Llama 3 puts a ByteLevel before its template). ByteLevel alone (offsets
// only) or none leaves bos_ to encode.
Status BpeTokenizer::parse_post_processor(const json& post, const std::string& origin) {
  if (post.is_null()) return Status::ok();
  const std::string type = post.is_object() ? post.value("type", "") : "";
  auto bad = [&](const std::string& why) { return corrupt(origin + ": post_processor " + why + ": " + post.dump().substr(0, 200)); };
  if (type == "Sequence") {
    if (!post.contains("processors") || !post["processors"].is_array()) return bad("Sequence has no processors");
    for (const auto& p : post["processors"]) BRIGADE_RETURN_IF_ERROR(parse_post_processor(p, origin));
    return Status::ok();
  }
  if (type == "ByteLevel") return Status::ok();
  if (templated_) return bad("has two templates");
  auto id_of = [&](const json& v) -> Expected<int32_t> {  // ["[CLS]", 101]
    if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer()) return bad("names a token as [text, id]");
    const int64_t id = v[1].get<int64_t>();
    if (id < 0 || id >= vocab_size()) return bad("token id " + std::to_string(id) + " is outside the vocabulary");
    return static_cast<int32_t>(id);
  };
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    BRIGADE_ASSIGN_OR_RETURN(int32_t cls, id_of(post.value("cls", json())));
    BRIGADE_ASSIGN_OR_RETURN(int32_t sep, id_of(post.value("sep", json())));
    prefix_ = {cls};
    suffix_ = {sep};
    pair_ = type == "BertProcessing" ? std::vector<int32_t>{cls, kPairA, sep, kPairB, sep}
                                     : std::vector<int32_t>{cls, kPairA, sep, sep, kPairB, sep};
    templated_ = true;
    return Status::ok();
  }
  if (type != "TemplateProcessing")
    return unsupported(origin + ": post_processor type '" + type +
                       "' is not supported (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence)");
  const json& single = post.value("single", json());
  const json& specials = post.value("special_tokens", json::object());
  if (!single.is_array() || !specials.is_object()) return bad("TemplateProcessing has no single template");
  // A template item that is not a Sequence: its special token's ids, appended to `out`.
  auto append_special = [&](const json& item, const std::string& which, std::vector<int32_t>& out) -> Status {
    if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object())
      return bad(which + " template item is neither a Sequence nor a SpecialToken");
    const std::string name = item["SpecialToken"].value("id", "");
    if (!specials.contains(name) || !specials[name].is_object() || !specials[name].contains("ids") ||
        !specials[name]["ids"].is_array())
      return bad("special token '" + name + "' has no ids");
    for (const auto& id : specials[name]["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size())
        return bad("special token '" + name + "' has an id outside the vocabulary");
      out.push_back(id.get<int32_t>());
    }
    return Status::ok();
  };
  bool seen_a = false;
  for (const auto& item : single) {
    if (item.is_object() && item.contains("Sequence")) {
      if (seen_a || item["Sequence"].value("id", "") != "A") return bad("single template holds one sequence, $A");
      seen_a = true;
      continue;
    }
    BRIGADE_RETURN_IF_ERROR(append_special(item, "single", seen_a ? suffix_ : prefix_));
  }
  if (!seen_a) return bad("single template has no $A");
  templated_ = true;
  const json& pair = post.value("pair", json());
  if (pair.is_null()) return Status::ok();
  if (!pair.is_array()) return bad("pair template is not a list");
  int n_a = 0, n_b = 0;
  for (const auto& item : pair) {
    if (item.is_object() && item.contains("Sequence")) {
      const std::string which = item["Sequence"].value("id", "");
      if (which != "A" && which != "B") return bad("pair template names a sequence other than $A and $B");
      (which == "A" ? n_a : n_b) += 1;
      pair_.push_back(which == "A" ? kPairA : kPairB);
      continue;
    }
    BRIGADE_RETURN_IF_ERROR(append_special(item, "pair", pair_));
  }
  if (n_a != 1 || n_b != 1) return bad("pair template must hold $A and $B once each");
  return Status::ok();
}

// ByteLevel alone (GPT-2), or a Sequence of Split{Regex, Isolated} steps ending in ByteLevel
// with use_regex false (Llama 3, Qwen2/3, DeepSeek). Each step splits every piece further.
Status BpeTokenizer::parse_pre_tokenizer(const json& pre, const std::string& origin) {
  const std::string kSupported = "; supported: ByteLevel, or Sequence of Split (Regex, Isolated) and ByteLevel";
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
    } else {
      return unsupported(origin + ": pre-tokenizer step " + s.dump().substr(0, 200) + " is not supported" + kSupported);
    }
  }
  if (!byte_level) return unsupported(origin + ": pre_tokenizer has no ByteLevel step" + kSupported);
  return Status::ok();
}

Status BpeTokenizer::parse(const json& j, const json& config, const std::string& origin) {
  if (!j.is_object() || !j.contains("model")) return corrupt(origin + ": not a tokenizer.json (no \"model\")");
  if (j.contains("normalizer") && !j["normalizer"].is_null())
    return unsupported(origin + ": normalizers are not supported yet (normalizer must be null)");
  BRIGADE_RETURN_IF_ERROR(parse_pre_tokenizer(j.value("pre_tokenizer", json()), origin));
  const json dec = j.value("decoder", json());
  if (!dec.is_null() && (!dec.is_object() || dec.value("type", "") != "ByteLevel"))
    return unsupported(origin + ": decoder must be ByteLevel (got " + dec.dump() + ")");
  BRIGADE_RETURN_IF_ERROR(parse_model(j["model"], origin));
  special_.assign(pieces_.size(), 0);
  BRIGADE_RETURN_IF_ERROR(parse_added(j, origin));
  resolve_bos_eos(config);
  return parse_post_processor(j.value("post_processor", json()), origin);
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

Expected<std::vector<int32_t>> BpeTokenizer::encode(std::string_view text, bool add_bos) const {
  const size_t bad = utf8_first_invalid(text);
  if (bad != text.size())
    return invalid_argument("text is not valid UTF-8 (first bad byte at offset " + std::to_string(bad) + ")");
  std::vector<int32_t> out;
  if (add_bos && templated_) out = prefix_;
  else if (add_bos && bos_ >= 0) out.push_back(bos_);
  // The text between added tokens, each byte of which (and the space add_prefix_space puts
  // before it) must have a token.
  auto segment_of = [&](std::string_view seg) -> Status {
    auto missing = [](uint8_t b) {
      return invalid_argument("the text holds byte " + std::to_string(b) + ", which this vocabulary has no token for");
    };
    if (add_prefix_space_ && !seg.empty() && seg.front() != ' ' && byte_ids_[' '] < 0) return missing(' ');
    for (char ch : seg)
      if (byte_ids_[static_cast<uint8_t>(ch)] < 0) return missing(static_cast<uint8_t>(ch));
    encode_segment(seg, out);
    return Status::ok();
  };
  size_t segment = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (const auto& a : added_)
      if (text.compare(i, a.content.size(), a.content) == 0) { hit = &a; break; }
    if (!hit) { ++i; continue; }
    BRIGADE_RETURN_IF_ERROR(segment_of(text.substr(segment, i - segment)));
    out.push_back(hit->id);
    i += hit->content.size();
    segment = i;
  }
  BRIGADE_RETURN_IF_ERROR(segment_of(text.substr(segment)));
  if (add_bos && templated_) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

Expected<std::vector<int32_t>> BpeTokenizer::encode_pair(std::string_view a, std::string_view b) const {
  if (!templated_) return Tokenizer::encode_pair(a, b);
  if (pair_.empty())
    return unsupported("this tokenizer's post-processor has no pair template: it cannot encode a pair of texts");
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> first, encode(a, false));
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> second, encode(b, false));
  std::vector<int32_t> out;
  for (int32_t id : pair_) {
    if (id == kPairA) out.insert(out.end(), first.begin(), first.end());
    else if (id == kPairB) out.insert(out.end(), second.begin(), second.end());
    else out.push_back(id);
  }
  return out;
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_bpe_tokenizer(const std::string& tokenizer_json,
                                                        const std::string& config_json,
                                                        const std::string& origin) {
  json j = json::parse(tokenizer_json, nullptr, false);
  if (j.is_discarded()) return corrupt(origin + ": not valid JSON");
  json config;
  if (!config_json.empty()) {
    config = json::parse(config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) return corrupt(origin + ": tokenizer_config.json is not a JSON object");
  }
  auto tok = std::make_unique<BpeTokenizer>();
  BRIGADE_RETURN_IF_ERROR(tok->parse(j, config, origin));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace brigade
