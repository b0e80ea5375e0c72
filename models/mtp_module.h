// Internal to models/: the parts of a multi-token-prediction (MTP) module that the MLA family's
// (models/deepseek.cpp: DeepSeek-V2 / V3, GLM-4.7-Flash, DeepSeek-V3.2, GLM-5) and GLM-4.5's
// (models/llama.cpp) share, as SGLang's DeepseekModelNextN and Glm4MoeModelNextN run them:
// x = eh_proj([enorm(embed(token)); hnorm(prev)]), then the architecture's own decoder layer,
// then shared_head.norm before the model's lm_head (Model::forward_mtp). The module lives under
// model.layers.{num_hidden_layers}.; the checkpoint's embed_tokens / shared_head.head copies,
// where stored, are not loaded: the model's own embedding and head are used, as vLLM's MTP
// proposer shares them. MiMo-V2-Flash's (model.mtp.layers.*) and LongCat-Flash's (model.mtp.*)
// layouts are not these and are refused.
#pragma once

#include <functional>

#include "core/backend.h"
#include "models/model.h"
#include "models/model_config.h"
#include "models/weight_loader.h"

namespace brigade {

struct MtpEnds {
  OwnedTensor enorm, hnorm;  // [hidden] f32
  OwnedTensor eh_embed;      // [hidden, hidden]: eh_proj's columns over the normed embedding
  OwnedTensor eh_hidden;     // [hidden, hidden]: its columns over the normed previous hidden state
  OwnedTensor head_norm;     // shared_head.norm [hidden] f32

  // The module's prefix: "model.layers.{c.n_layers}.".
  static std::string prefix(const ModelConfig& c);
  // Checks the module can be loaded (config.json declares one, the checkpoint has its eh_proj,
  // one rank) and reads enorm, hnorm, eh_proj and shared_head.norm. `tp_size` is the
  // tensor-parallel group's size (1 without one).
  Status load(WeightLoader& w, const ModelConfig& c, int tp_size);
  // The module's input over the step's rows: residual + delta = eh_proj([enorm(embed(tokens));
  // hnorm(prev)]) (the two column blocks' products, left apart for the decoder layer's first
  // add_rms_norm to join); `normed` is scratch.
  void input(Backend& b, const ModelConfig& c, const Tensor& embed, const Tensor& tokens, const Tensor& prev,
             const Tensor& residual, const Tensor& normed, const Tensor& delta) const;
};

// What the module adds to the model's parameter count and weight bytes (the target's step cost
// leaves it out).
struct MtpSize {
  int64_t params = 0;
  int64_t bytes = 0;
};

// Loads the whole module: `ends` (MtpEnds::load), then the architecture's decoder layer at index
// c.n_layers through `load_layer`; returns what it added to w's counts.
Expected<MtpSize> load_mtp_module(WeightLoader& w, const ModelConfig& c, int tp_size, MtpEnds& ends,
                                  const std::function<Status(int)>& load_layer);

// forward_mtp's check of batch.prev_hidden: [n_tokens, hidden] in the activation dtype.
Status check_prev_hidden(const StepBatch& batch, int64_t hidden, DType activation);

}  // namespace brigade
