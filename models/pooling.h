// Pooling: how a prompt's final-norm hidden states become one embedding (vLLM's pooling runner,
// sentence-transformers' Pooling + Normalize modules), and where a model says which it wants.
//
//   last: the hidden state of the last prompt token (Qwen3-Embedding, e5-mistral; vLLM's default
//         for decoder models);
//   mean: the mean over every prompt token (gte/e5-style models; sentence-transformers'
//         pooling_mode_mean_tokens);
//   cls:  the first token's (pooling_mode_cls_token; BERT-style models).
// Then, unless the model or request says not to, the embedding is L2-normalized.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace brigade {

enum class Pooling { none, last, mean, cls };  // none: not a pooling request

const char* pooling_name(Pooling p);
// "last" | "mean" | "cls" (also sentence-transformers' "lasttoken", "mean_tokens", "cls_token");
// invalid_argument listing the valid names otherwise.
Expected<Pooling> parse_pooling(std::string_view name);

struct PoolingConfig {
  Pooling mode = Pooling::last;
  bool normalize = true;
  std::string source = "default";  // where it came from: "default", or the file that said so
};

// The model's pooling from its sentence-transformers files, when `model_path` is a directory with
// modules.json: the Pooling module's config.json (pooling_mode_lasttoken / _mean_tokens /
// _cls_token; exactly one true) and whether a Normalize module follows. Without modules.json (or
// for a single-file checkpoint): last and normalized, as vLLM for decoder models. Errors
// (corrupt / unsupported, naming the file): unreadable JSON, a pooling mode brigade does not run
// (max, mean_sqrt_len, weightedmean, or several at once: pass --pooling to override).
Expected<PoolingConfig> read_pooling_config(const std::string& model_path);

// What the engine returns: `pooled` cut to its first `dimensions` values (Matryoshka; 0 = all),
// then divided by its L2 norm when `normalize` (a zero vector stays zero).
std::vector<float> finish_embedding(std::span<const float> pooled, int dimensions, bool normalize);

}  // namespace brigade
