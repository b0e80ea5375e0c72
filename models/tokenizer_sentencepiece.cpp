#include "models/tokenizer_sentencepiece.h"

#include <sentencepiece_processor.h>

#include <algorithm>

#include "models/added_token_matcher.h"
#include "models/utf8.h"

namespace brigade {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  Status init(const std::string& path);

  Expected<std::vector<int32_t>> encode(std::string_view text, bool add_bos) const override;
  std::string token_to_piece(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? text_[static_cast<size_t>(id)] : std::string();
  }
  std::string token_string(int32_t id) const override { return id >= 0 && id < vocab_size() ? sp_.IdToPiece(id) : std::string(); }
  Expected<std::string> decode(std::span<const int32_t> ids, bool skip_special) const override {
    for (int32_t id : ids)
      if (id < 0 || id >= vocab_size())
        return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
    std::vector<int> keep;
    for (int32_t id : ids)
      if (!(skip_special && is_special(id))) keep.push_back(id);
    std::string out;
    const auto st = sp_.Decode(keep, &out);
    if (!st.ok()) return invalid_argument("sentencepiece decode failed: " + st.ToString());
    return out;
  }
  bool is_special(int32_t id) const override { return id >= 0 && id < vocab_size() && sp_.IsControl(id); }
  int vocab_size() const override { return sp_.GetPieceSize(); }
  int32_t bos_id() const override { return sp_.bos_id(); }
  const std::vector<int32_t>& eos_ids() const override { return eos_; }

 private:
  void encode_raw(std::string_view text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    std::vector<int> ids;
    sp_.Encode(std::string(text), &ids).IgnoreError();  // valid UTF-8 is checked before
    out.insert(out.end(), ids.begin(), ids.end());
  }
  sentencepiece::SentencePieceProcessor sp_;
  std::vector<std::string> text_;  // id -> bytes ("▁" -> ' ', byte pieces -> the byte)
  std::vector<int32_t> specials_;  // control pieces matched in text
  AddedTokenMatcher special_matcher_;  // over their text_, index = position in specials_
  std::vector<int32_t> eos_;
};

Status SentencePieceTokenizer::init(const std::string& path) {
  const auto st = sp_.Load(path);
  if (!st.ok()) return corrupt(path + ": not a SentencePiece model (" + st.ToString() + ")");
  const int n = sp_.GetPieceSize();
  text_.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const std::string p = sp_.IdToPiece(i);
    if (sp_.IsByte(i) && p.size() == 6) {
      text_[static_cast<size_t>(i)] = std::string(1, static_cast<char>(std::stoi(p.substr(3, 2), nullptr, 16)));
      continue;
    }
    if (sp_.IsControl(i) && !p.empty() && p[0] == '<') specials_.push_back(i);
    std::string t;
    for (size_t k = 0; k < p.size(); ++k) {
      if (p.compare(k, 3, "\xE2\x96\x81") == 0) { t += ' '; k += 2; } else { t += p[k]; }
    }
    text_[static_cast<size_t>(i)] = std::move(t);
  }
  std::vector<std::string_view> special_texts;
  for (int32_t id : specials_) special_texts.emplace_back(text_[static_cast<size_t>(id)]);
  special_matcher_ = AddedTokenMatcher(special_texts);  // the longest match; a repeated text: its first id
  if (sp_.eos_id() >= 0) eos_ = {sp_.eos_id()};
  return Status::ok();
}

Expected<std::vector<int32_t>> SentencePieceTokenizer::encode(std::string_view text, bool add_bos) const {
  const size_t bad = utf8_first_invalid(text);
  if (bad != text.size())
    return invalid_argument("text is not valid UTF-8 (first bad byte at offset " + std::to_string(bad) + ")");
  std::vector<int32_t> out;
  if (add_bos && bos_id() >= 0) out.push_back(bos_id());
  size_t segment = 0;
  for (AddedTokenMatcher::Match m; (m = special_matcher_.find(text, segment)).index >= 0;) {
    encode_raw(text.substr(segment, m.begin - segment), out);
    out.push_back(specials_[static_cast<size_t>(m.index)]);
    segment = m.begin + m.length;
  }
  encode_raw(text.substr(segment), out);
  return out;
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_sentencepiece_tokenizer(const std::string& path) {
  auto tok = std::make_unique<SentencePieceTokenizer>();
  BRIGADE_RETURN_IF_ERROR(tok->init(path));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace brigade
