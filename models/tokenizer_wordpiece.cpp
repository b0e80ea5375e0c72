#include "models/tokenizer_wordpiece.h"

#include <optional>
#include <unordered_map>

#include "models/tokenizer_bert_text.h"
#include "models/tokenizer_json_model.h"
#include "models/utf8.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// Hugging Face's decoders::wordpiece::cleanup, applied to each token as it is decoded.
std::string cleanup(std::string s) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},   {" !", "!"},          {" ,", ","},     {" ' ", "'"},    {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  }
  return s;
}

class WordPieceTokenizer final : public JsonModelTokenizer {
 public:
  Status parse(const json& j, const std::string& origin);

  std::string token_to_piece(int32_t id) const override;
  Expected<std::string> decode(std::span<const int32_t> ids, bool skip_special) const override;

 private:
  Status parse_model(const json& m, const std::string& origin);
  Status parse_decoder(const json& d, const std::string& origin);
  std::string normalize(std::string_view text) const override {
    return normalizer_ ? u32_to_utf8(bert_normalize(utf8_to_u32(text), *normalizer_)) : std::string(text);
  }
  Status encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const override;
  void encode_word(std::u32string_view word, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;  // model.vocab: token string -> id
  std::optional<BertNormalizerOptions> normalizer_;
  BertPreTokenizerOptions pre_;
  int32_t unk_ = -1;
  std::string continuing_prefix_ = "##";
  size_t max_word_chars_ = 100;
  // The decoder: WordPiece (a token starting with decoder_prefix_ is glued to the previous one,
  // cleanup_ applies cleanup()), or none (join_only_: tokens joined by spaces).
  bool join_only_ = false;
  std::string decoder_prefix_ = "##";
  bool cleanup_ = true;
};

Status WordPieceTokenizer::parse_model(const json& m, const std::string& origin) {
  if (!m.contains("vocab") || !m["vocab"].is_object() || m["vocab"].empty())
    return corrupt(origin + ": model (WordPiece) needs a non-empty \"vocab\" object");
  BRIGADE_ASSIGN_OR_RETURN(ModelVocab vocab, parse_model_vocab(m["vocab"], origin));
  vocab_ = std::move(vocab.ids);
  strings_ = std::move(vocab.strings);
  const json unk = m.value("unk_token", json("[UNK]"));
  if (!unk.is_string() || !vocab_.contains(unk.get<std::string>()))
    return corrupt(origin + ": model.unk_token " + unk.dump() + " is not in the vocab; WordPiece needs it for words it cannot split");
  unk_ = vocab_.at(unk.get<std::string>());
  const json prefix = m.value("continuing_subword_prefix", json("##"));
  const json max_chars = m.value("max_input_chars_per_word", json(100));
  if (!prefix.is_string()) return corrupt(origin + ": model.continuing_subword_prefix must be a string");
  if (!max_chars.is_number_integer() || max_chars.get<int64_t>() < 1)
    return corrupt(origin + ": model.max_input_chars_per_word must be a positive integer");
  continuing_prefix_ = prefix.get<std::string>();
  max_word_chars_ = max_chars.get<size_t>();
  return Status::ok();
}

Status WordPieceTokenizer::parse_decoder(const json& d, const std::string& origin) {
  if (d.is_null()) {
    join_only_ = true;
    return Status::ok();
  }
  const std::string type = d.is_object() ? d.value("type", "") : "";
  if (type != "WordPiece")
    return unsupported(origin + ": decoder type '" + type + "' is not supported by the WordPiece tokenizer (WordPiece, or null)");
  const json prefix = d.value("prefix", json("##"));
  const json clean = d.value("cleanup", json(true));
  if (!prefix.is_string() || !clean.is_boolean())
    return corrupt(origin + ": the WordPiece decoder needs a string prefix and a boolean cleanup");
  decoder_prefix_ = prefix.get<std::string>();
  cleanup_ = clean.get<bool>();
  return Status::ok();
}

Status WordPieceTokenizer::parse(const json& j, const std::string& origin) {
  BRIGADE_ASSIGN_OR_RETURN(normalizer_, parse_bert_normalizer(j.value("normalizer", json()), origin));
  BRIGADE_ASSIGN_OR_RETURN(pre_, parse_bert_pre_tokenizer(j.value("pre_tokenizer", json()), origin));
  BRIGADE_RETURN_IF_ERROR(parse_model(j["model"], origin));
  BRIGADE_RETURN_IF_ERROR(parse_decoder(j.value("decoder", json()), origin));
  return parse_added_tokens_and_post(j, origin);
}

// Greedy longest match first: the longest vocabulary entry that starts the word, then the longest
// continuing_prefix_ + rest-prefix, until the word is used up; unk_ alone when some rest has none.
void WordPieceTokenizer::encode_word(std::u32string_view word, std::vector<int32_t>& out) const {
  if (word.size() > max_word_chars_) {
    out.push_back(unk_);
    return;
  }
  const std::string bytes = u32_to_utf8(word);
  std::vector<size_t> offset(word.size() + 1, 0);  // byte offset of each character, then the end
  for (size_t i = 0; i < word.size(); ++i)
    offset[i + 1] = offset[i] + (word[i] < 0x80 ? 1 : word[i] < 0x800 ? 2 : word[i] < 0x10000 ? 3 : 4);
  const size_t n_out = out.size();
  std::string key;
  for (size_t start = 0; start < word.size();) {
    size_t end = word.size();
    for (; end > start; --end) {
      key = start > 0 ? continuing_prefix_ : std::string();
      key.append(bytes, offset[start], offset[end] - offset[start]);
      if (auto it = vocab_.find(key); it != vocab_.end()) {
        out.push_back(it->second);
        break;
      }
    }
    if (end == start) {  // no piece starts here
      out.resize(n_out);
      out.push_back(unk_);
      return;
    }
    start = end;
  }
}

Status WordPieceTokenizer::encode_text(std::string_view text, bool /*at_start*/, std::vector<int32_t>& out) const {
  const std::u32string chars = utf8_to_u32(text);
  for (std::u32string_view word : bert_pre_tokenize(chars, pre_)) encode_word(word, out);
  return Status::ok();
}

std::string WordPieceTokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const std::string& token = strings_[static_cast<size_t>(id)];
  if (join_only_) return " " + token;
  std::string piece = token.starts_with(decoder_prefix_) ? token.substr(decoder_prefix_.size()) : " " + token;
  return cleanup_ ? cleanup(std::move(piece)) : piece;
}

// The decoder leaves the first token as it is (but for cleanup): no space before it, and a
// leading "##" kept.
Expected<std::string> WordPieceTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  BRIGADE_RETURN_IF_ERROR(check_ids(ids));
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (skip_special && is_special(id)) continue;
    if (!first) out += token_to_piece(id);
    else out += join_only_ || !cleanup_ ? strings_[static_cast<size_t>(id)] : cleanup(strings_[static_cast<size_t>(id)]);
    first = false;
  }
  return out;
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_wordpiece_tokenizer(const json& tokenizer_json, const std::string& origin) {
  return load_json_model<WordPieceTokenizer>(tokenizer_json, "WordPiece", origin);
}

}  // namespace brigade
