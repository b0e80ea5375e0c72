#include "models/tokenizer_unigram.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "models/tokenizer_json_model.h"
#include "models/tokenizer_metaspace.h"
#include "models/tokenizer_normalizer.h"
#include "models/utf8.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr double kUnkPenalty = 10.0;  // an unknown character scores min_score - kUnkPenalty

class UnigramTokenizer final : public JsonModelTokenizer {
 public:
  Status parse(const json& j, const std::string& origin);

  std::string token_to_piece(int32_t id) const override;
  Expected<std::string> decode(std::span<const int32_t> ids, bool skip_special) const override;

 private:
  Status parse_model(const json& m, const std::string& origin);
  std::string normalize(std::string_view text) const override { return normalizer_.normalize(text); }
  Status encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const override;
  Status encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // The pieces of the best segmentation of `word`, consecutive unknown characters joined.
  Expected<std::vector<std::string_view>> segment(std::string_view word) const;

  std::vector<double> scores_;                      // id -> log probability
  std::unordered_map<std::string, int32_t> ids_;    // piece -> id (the last of duplicates, as HF)
  size_t max_piece_bytes_ = 0;
  double unk_score_ = 0;
  int32_t unk_ = -1;                                // -1: none (unknown characters are an error)
  bool byte_fallback_ = false;
  TextNormalizer normalizer_;
  MetaspacePreTokenizer pre_;
  PieceDecoder decoder_;
};

Status UnigramTokenizer::parse_model(const json& m, const std::string& origin) {
  if (!m.contains("vocab") || !m["vocab"].is_array() || m["vocab"].empty())
    return corrupt(origin + ": model (Unigram) needs a non-empty \"vocab\" list of [piece, score]");
  const json& vocab = m["vocab"];
  double min_score = std::numeric_limits<double>::infinity();
  for (size_t id = 0; id < vocab.size(); ++id) {
    const json& e = vocab[id];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
      return corrupt(origin + ": model.vocab entry " + std::to_string(id) + " is not [string, number]: " + e.dump().substr(0, 80));
    strings_.push_back(e[0].get<std::string>());
    scores_.push_back(e[1].get<double>());
    ids_[strings_.back()] = static_cast<int32_t>(id);
    max_piece_bytes_ = std::max(max_piece_bytes_, strings_.back().size());
    min_score = std::min(min_score, scores_.back());
  }
  unk_score_ = min_score - kUnkPenalty;
  const json unk = m.value("unk_id", json());
  if (!unk.is_null()) {
    if (!unk.is_number_integer() || unk.get<int64_t>() < 0 || unk.get<int64_t>() >= static_cast<int64_t>(vocab.size()))
      return corrupt(origin + ": model.unk_id " + unk.dump() + " is outside the vocab of " + std::to_string(vocab.size()) + " pieces");
    unk_ = unk.get<int32_t>();
  }
  const json byte_fallback = m.value("byte_fallback", json(false));
  if (!byte_fallback.is_boolean()) return corrupt(origin + ": model.byte_fallback must be a boolean");
  byte_fallback_ = byte_fallback.get<bool>();
  return Status::ok();
}

Status UnigramTokenizer::parse(const json& j, const std::string& origin) {
  BRIGADE_RETURN_IF_ERROR(parse_model(j["model"], origin));
  BRIGADE_ASSIGN_OR_RETURN(normalizer_, TextNormalizer::parse(j.value("normalizer", json()), origin));
  BRIGADE_ASSIGN_OR_RETURN(pre_, MetaspacePreTokenizer::parse(j.value("pre_tokenizer", json()), origin));
  BRIGADE_ASSIGN_OR_RETURN(decoder_, PieceDecoder::parse(j.value("decoder", json()), origin));
  return parse_added_tokens_and_post(j, origin);  // added tokens are matched in the text, never scored
}

// Hugging Face's encode_optimized: best[e] is the best path over word[0, e) and the piece that
// ends it. Positions go left to right and pieces from each by increasing length; a candidate
// replaces the best only when strictly better, so ties keep the first found.
Expected<std::vector<std::string_view>> UnigramTokenizer::segment(std::string_view word) const {
  struct Best {
    double score = 0;
    size_t start = 0;
    int32_t id = -1;  // -1: not reached yet
  };
  std::vector<Best> best(word.size() + 1);
  for (size_t start = 0; start < word.size();) {
    const size_t n_char = std::max<size_t>(1, utf8_sequence_length(word, start));
    const double base = best[start].score;
    bool has_single = false;
    auto offer = [&](size_t end, int32_t id, double score) {
      Best& b = best[end];
      if (b.id < 0 || base + score > b.score) b = {base + score, start, id};
    };
    const size_t limit = std::min(word.size() - start, max_piece_bytes_);
    for (size_t len = n_char; len <= limit; len += std::max<size_t>(1, utf8_sequence_length(word, start + len))) {
      const auto it = ids_.find(std::string(word.substr(start, len)));
      if (it != ids_.end()) {
        offer(start + len, it->second, scores_[static_cast<size_t>(it->second)]);
        has_single |= len == n_char;
      }
      if (start + len == word.size()) break;
    }
    if (!has_single) {
      if (unk_ < 0)
        return invalid_argument("the tokenizer has no unk_id and no piece for the character at byte " + std::to_string(start) +
                                " of " + json(std::string(word)).dump());
      offer(start + n_char, unk_, unk_score_);
    }
    start += n_char;
  }
  std::vector<std::string_view> pieces;
  bool in_unk = false;  // the last piece pushed (leftwards) is unknown characters
  for (size_t end = word.size(); end > 0;) {
    const Best& b = best[end];
    const std::string_view piece = word.substr(b.start, end - b.start);
    if (b.id == unk_ && in_unk) pieces.back() = word.substr(b.start, pieces.back().size() + piece.size());
    else pieces.push_back(piece);
    in_unk = b.id == unk_;
    end = b.start;
  }
  std::reverse(pieces.begin(), pieces.end());
  return pieces;
}

// Each piece's id by its string, as Hugging Face looks them up; a string the vocab lacks (unknown
// characters) is its <0xXX> bytes with byte_fallback when all exist, else unk.
Status UnigramTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  BRIGADE_ASSIGN_OR_RETURN(std::vector<std::string_view> pieces, segment(word));
  for (std::string_view piece : pieces) {
    if (const auto it = ids_.find(std::string(piece)); it != ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    const size_t n_out = out.size();
    bool all_bytes = byte_fallback_;
    for (size_t i = 0; all_bytes && i < piece.size(); ++i) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const auto b = static_cast<uint8_t>(piece[i]);
      const auto it = ids_.find(std::string{'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'});
      if (it == ids_.end()) all_bytes = false;
      else out.push_back(it->second);
    }
    if (!all_bytes) {
      out.resize(n_out);
      out.push_back(unk_);
    }
  }
  return Status::ok();
}

Status UnigramTokenizer::encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  std::vector<std::string> words;
  pre_.split(text, at_start, words);
  for (const std::string& word : words) BRIGADE_RETURN_IF_ERROR(encode_word(word, out));
  return Status::ok();
}

std::string UnigramTokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const std::string& token = strings_[static_cast<size_t>(id)];
  return is_special(id) ? token : decoder_.piece(token);
}

Expected<std::string> UnigramTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  BRIGADE_RETURN_IF_ERROR(check_ids(ids));
  std::vector<std::string> tokens;
  for (int32_t id : ids)
    if (!(skip_special && is_special(id))) tokens.push_back(strings_[static_cast<size_t>(id)]);
  return decoder_.decode(std::move(tokens));
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> load_unigram_tokenizer(const json& tokenizer_json, const std::string& origin) {
  return load_json_model<UnigramTokenizer>(tokenizer_json, "Unigram", origin);
}

}  // namespace brigade
