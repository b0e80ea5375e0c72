#include "models/tokenizer_json_model.h"

#include "models/utf8.h"

namespace brigade {

using json = nlohmann::json;

Status JsonModelTokenizer::parse_added_tokens_and_post(const json& j, const std::string& origin) {
  BRIGADE_ASSIGN_OR_RETURN(std::vector<AddedToken> added, parse_added_tokens(j, origin));
  for (const auto& a : added)
    if (a.id >= vocab_size()) strings_.resize(static_cast<size_t>(a.id) + 1);
  special_.assign(strings_.size(), 0);
  for (const auto& a : added) {
    strings_[static_cast<size_t>(a.id)] = a.content;
    special_[static_cast<size_t>(a.id)] = a.special ? 1 : 0;
  }
  std::vector<AddedToken> normalized = take_normalized(added, [&](const std::string& content) { return normalize(content); });
  for (const AddedToken& a : normalized) strings_[static_cast<size_t>(a.id)] = a.content;
  added_ = AddedTokens(std::move(added));
  normalized_added_ = AddedTokens(std::move(normalized));
  BRIGADE_ASSIGN_OR_RETURN(post_, PostProcessor::parse(j.value("post_processor", json()), vocab_size(), origin));
  return Status::ok();
}

Expected<std::vector<int32_t>> JsonModelTokenizer::encode(std::string_view text, bool add_bos) const {
  const size_t bad = utf8_first_invalid(text);
  if (bad != text.size())
    return invalid_argument("text is not valid UTF-8 (first bad byte at offset " + std::to_string(bad) + ")");
  std::vector<int32_t> out;
  for (const TextPiece& piece : added_.split(text)) {
    if (piece.id >= 0) {
      out.push_back(piece.id);
      continue;
    }
    const bool at_start = piece.text.data() == text.data();
    const std::string normalized = normalize(piece.text);
    if (normalized_added_.tokens().empty()) {
      BRIGADE_RETURN_IF_ERROR(encode_text(normalized, at_start, out));
      continue;
    }
    for (const TextPiece& p : normalized_added_.split(normalized)) {
      if (p.id >= 0) out.push_back(p.id);
      else BRIGADE_RETURN_IF_ERROR(encode_text(p.text, at_start && p.text.data() == normalized.data(), out));
    }
  }
  return add_bos ? post_.single(out) : out;
}

Expected<std::vector<int32_t>> JsonModelTokenizer::encode_pair(std::string_view a, std::string_view b,
                                                               std::vector<int32_t>* type_ids) const {
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> first, encode(a, false));
  BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> second, encode(b, false));
  return post_.pair(first, second, type_ids);
}

Status JsonModelTokenizer::check_ids(std::span<const int32_t> ids) const {
  for (int32_t id : ids)
    if (id < 0 || id >= vocab_size())
      return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(vocab_size()) + ")");
  return Status::ok();
}

}  // namespace brigade
