// Internal to models/: the tokens that end generation in a GGUF file's vocabulary, decided as
// llama.cpp decides them (llama_vocab's special_eog_ids, src/llama-vocab.cpp), so a GGUF model
// stops where llama.cpp's server stops it:
//   - the tokens the file names eos, eot and eom (tokenizer.ggml.{eos,eot,eom}_token_id), and
//     fill-in-the-middle pad, repo and file-separator (fim_pad/fim_rep/fim_sep_token_id); for eot,
//     eom and the three FIM ones, when the file names none, a token of a known text (Llama 3's
//     <|eot_id|>, ChatML's <|im_end|>, Qwen's <|fim_pad|>, <|repo_name|>, <|file_sep|>, ...);
//   - every token whose text llama.cpp lists as an end of generation (<|im_end|>, <|eot_id|>,
//     <|endoftext|>, <end_of_turn>, </s>, <|eom_id|>, <|end|>, harmony's <|return|> and
//     <|call|>, DeepSeek's <｜end▁of▁sentence｜>, ...);
//   - less <|end|> where the vocabulary also ends at <|return|> and <|call|> (o200k_harmony:
//     <|end|> closes the analysis message before the final one) or at <|calls|> and <|flush|>
//     (solar-open), and less </s> where <|tool_response> or <|plamo:eos|> marks it an ordinary
//     token (Gemma 4, PLaMo).
// Where several tokens have one category's texts, llama.cpp takes the first its hash map yields;
// brigade the lowest id (the lists hold one spelling per family, so real vocabularies have one).
// A gpt2 vocabulary without an eos key has none here (llama.cpp would take id 11).
#pragma once

#include <vector>

#include "core/status.h"
#include "models/gguf.h"

namespace brigade {

// The ids above, the file's eos first, then its eot and eom, then the others ascending; empty
// without a vocabulary. corrupt naming the key for an id outside the vocabulary.
Expected<std::vector<int>> gguf_end_of_generation_ids(const GgufFile& g);

}  // namespace brigade
