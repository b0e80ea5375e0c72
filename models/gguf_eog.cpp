#include "models/gguf_eog.h"

#include <algorithm>
#include <set>
#include <string>

namespace brigade {
namespace {

// llama.cpp's texts for each special token it detects when the file names none.
const std::vector<std::string> kEotTexts = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
                                            "<end_of_utterance>"};
const std::vector<std::string> kEomTexts = {"<|eom_id|>"};
const std::vector<std::string> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
const std::vector<std::string> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
const std::vector<std::string> kFimSepTexts = {"<|file_sep|>"};
// The texts that end generation wherever they are in a vocabulary.
const std::vector<std::string> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["};

bool listed(const std::vector<std::string>& texts, const std::string& t) {
  return std::find(texts.begin(), texts.end(), t) != texts.end();
}

}  // namespace

Expected<std::vector<int>> gguf_end_of_generation_ids(const GgufFile& g) {
  // A vocabulary that is not an array of strings is the tokenizer's to refuse (tokenizer_gguf.h);
  // here it is none, and the keys' ids are taken as they are.
  const GgufValue* tokens_value = g.find("tokenizer.ggml.tokens");
  const bool vocabulary = tokens_value && tokens_value->type == GgufType::array &&
                          tokens_value->elem_type == GgufType::string && !tokens_value->strs.empty();
  static const std::vector<std::string> kNone;
  const std::vector<std::string>& tokens = vocabulary ? tokens_value->strs : kNone;
  const int64_t n = static_cast<int64_t>(tokens.size());
  // The id a key names (-1 when absent), or else the lowest id of one of `texts`.
  auto special = [&](const std::string& key, const std::vector<std::string>& texts) -> Expected<int64_t> {
    BRIGADE_ASSIGN_OR_RETURN(int64_t id, g.get_int_or("tokenizer.ggml." + key, -1));
    if (id >= n && vocabulary) return corrupt(g.path() + ": tokenizer.ggml." + key + " is outside the vocabulary");
    if (id >= 0 || texts.empty()) return id;
    for (int64_t i = 0; i < n; ++i)
      if (listed(texts, tokens[static_cast<size_t>(i)])) return i;
    return int64_t{-1};
  };
  BRIGADE_ASSIGN_OR_RETURN(int64_t eos, special("eos_token_id", {}));
  BRIGADE_ASSIGN_OR_RETURN(int64_t eot, special("eot_token_id", kEotTexts));
  BRIGADE_ASSIGN_OR_RETURN(int64_t eom, special("eom_token_id", kEomTexts));
  BRIGADE_ASSIGN_OR_RETURN(int64_t pad, special("fim_pad_token_id", kFimPadTexts));
  BRIGADE_ASSIGN_OR_RETURN(int64_t rep, special("fim_rep_token_id", kFimRepTexts));
  BRIGADE_ASSIGN_OR_RETURN(int64_t sep, special("fim_sep_token_id", kFimSepTexts));
  std::set<int64_t> eog;
  for (int64_t id : {eos, eot, eom, pad, rep, sep})
    if (id >= 0) eog.insert(id);
  for (int64_t i = 0; i < n; ++i)
    if (listed(kEogTexts, tokens[static_cast<size_t>(i)])) eog.insert(i);
  // The exceptions, among the ends found.
  auto has = [&](const char* text) {
    return std::any_of(eog.begin(), eog.end(), [&](int64_t id) { return id < n && tokens[static_cast<size_t>(id)] == text; });
  };
  auto erase = [&](const char* text) {
    std::erase_if(eog, [&](int64_t id) { return id < n && tokens[static_cast<size_t>(id)] == text; });
  };
  const bool call = has("<|call|>") || has("<|calls|>");
  if (call && (has("<|return|>") || has("<|flush|>"))) erase("<|end|>");
  if (has("<|tool_response>") || has("<|plamo:eos|>")) erase("</s>");
  std::vector<int> out;
  for (int64_t id : {eos, eot, eom})
    if (eog.erase(id) > 0) out.push_back(static_cast<int>(id));
  for (int64_t id : eog) out.push_back(static_cast<int>(id));
  return out;
}

}  // namespace brigade
