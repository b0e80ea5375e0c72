// A tokenizer.json's post_processor: the special tokens Hugging Face adds with
// add_special_tokens, around one text (Llama 3's "<|begin_of_text|> $A", Qwen3-Embedding's
// "$A <|endoftext|>", BERT's "[CLS] $A [SEP]") and around a pair of texts (BERT's
// "[CLS] $A [SEP] $B:1 [SEP]:1"), with the token type ids the pair form gives each token.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace brigade {

class PostProcessor {
 public:
  // Parses `post` (null: none): a TemplateProcessing, a BertProcessing or RobertaProcessing
  // (cls $A sep), each alone or in a Sequence (Llama 3 puts a ByteLevel, which only moves offsets,
  // before its template). Special token ids must lie in [0, n_vocab). corrupt, naming `origin` and
  // the reason, for a malformed one; unsupported, listing the supported types, for another type.
  static Expected<PostProcessor> parse(const nlohmann::json& post, int n_vocab, const std::string& origin);

  // Whether it adds special tokens to one text; when false, a tokenizer adds its BOS (if any).
  bool templated() const { return templated_; }
  // `ids` with the single form's special tokens around them.
  std::vector<int32_t> single(std::span<const int32_t> ids) const;
  // The pair form around `a` and `b` (each encoded without special tokens), and in `type_ids`
  // (when not null) one token type id per output id: the template's ($B:1 [SEP]:1),
  // BertProcessing's 0 for [CLS] A [SEP] and 1 for B [SEP], RobertaProcessing's 0 throughout.
  // Without a post-processor (templated() false): a then b, types 0 then 1, as Hugging Face joins
  // them. unsupported when the post-processor has a single form only.
  Expected<std::vector<int32_t>> pair(std::span<const int32_t> a, std::span<const int32_t> b,
                                      std::vector<int32_t>* type_ids) const;

 private:
  // One template item: special token ids, or a sequence (kSequenceA / kSequenceB).
  struct Item {
    int32_t id;
    int32_t type_id;
  };
  static constexpr int32_t kSequenceA = -1, kSequenceB = -2;

  Status add(const nlohmann::json& post, int n_vocab, const std::string& origin);
  Status add_template(const nlohmann::json& post, int n_vocab, const std::string& origin);

  bool templated_ = false;
  std::vector<int32_t> prefix_, suffix_;  // the single form's special tokens before and after $A
  std::vector<Item> pair_;                // the pair form; empty when there is none
};

}  // namespace brigade
