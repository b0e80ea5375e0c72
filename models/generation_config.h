// generation_config.json: what a Hugging Face model directory says about generating, as vLLM
// takes it.
//
//   - Its sampling settings become the server's request defaults (vLLM's --generation-config auto,
//     get_diff_sampling_param): temperature, top_p, top_k, min_p, repetition_penalty, and
//     max_new_tokens as a cap on max_tokens; a request's own value wins, field by field. Every
//     value present is taken (transformers 5's GenerationConfig has no defaults of its own to drop:
//     to_diff_dict keeps a temperature of 1.0 or a top_k of 50 as written).
//   - Its eos_token_id (one id or a list) joins config.json's as ids that end a generation (vLLM's
//     SamplingParams.update_from_generation_config): Qwen2.5-Instruct's [151645, 151643], Llama 3's
//     [128001, 128008, 128009]. Checkpoint::open adds them to ModelConfig::eos_ids.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace brigade {

struct GenerationDefaults {
  std::optional<float> temperature;         // >= 0
  std::optional<float> top_p;               // (0, 1]
  std::optional<int> top_k;                 // >= 1, or 0 / -1: off
  std::optional<float> min_p;               // [0, 1)
  std::optional<float> repetition_penalty;  // > 0
  std::optional<int> max_tokens;            // max_new_tokens, >= 1: caps every request's max_tokens

  bool empty() const { return !temperature && !top_p && !top_k && !min_p && !repetition_penalty && !max_tokens; }
  // "temperature=0.7 top_p=0.8 top_k=20 repetition_penalty=1.05" (the fields set), for the log.
  std::string describe() const;
};

// The sampling settings of a generation_config.json object; `where` names it in errors. Keys are
// Hugging Face's (max_new_tokens for max_tokens); null values are absent; other keys are ignored.
// invalid_argument for a value of the wrong type or out of range.
Expected<GenerationDefaults> parse_generation_defaults(const nlohmann::json& j, const std::string& where);

// `dir`/generation_config.json's sampling settings; empty when the file is absent. corrupt when it is
// not a JSON object.
Expected<GenerationDefaults> read_generation_defaults(const std::string& dir);

// vLLM's --generation-config: "auto" (the model directory's generation_config.json), "vllm" (none:
// brigade's own defaults), or a directory holding a generation_config.json; then
// --override-generation-config's JSON object (e.g. {"temperature": 0.5}) on top, key by key.
// `model` may be a GGUF or llama2.c file (no generation_config.json: empty under "auto").
Expected<GenerationDefaults> resolve_generation_defaults(const std::string& model, const std::string& mode,
                                                         const std::string& override_json);

// `dir`/generation_config.json's eos_token_id, each id not already in `eos` appended to it (in its
// order); nothing when the file or the key is absent. corrupt naming the file otherwise.
Status add_generation_eos(const std::string& dir, std::vector<int>& eos);

}  // namespace brigade
