// Loading the draft model of `scheduler.speculative: {method: draft_model, model: PATH}` and
// checking that it can draft for the target: any checkpoint Model::load reads (HF directory,
// GGUF, llama2.c .bin), whole on one backend (the draft is never sharded), with the target's
// vocabulary.
#pragma once

#include <memory>
#include <string>

#include "actors/drafter/draft_model_drafter.h"
#include "core/backend.h"
#include "core/status.h"

namespace brigade {

struct DraftModelSpec {
  std::string path;          // the draft checkpoint
  std::string target_path;   // the target checkpoint, for its tokenizer when it has one
  int target_vocab_size = 0;
  int kv_tokens = 0;         // the draft's KV pool holds this many tokens over all sequences
  int page_size = 16;
  int max_step_tokens = 2048;
};

// Errors name the draft checkpoint: it does not load (Model::load's reason), its vocabulary size
// differs from the target's, or both have tokenizers and a token id has other bytes in each.
Expected<std::unique_ptr<DraftModelDrafter>> load_draft_model(const DraftModelSpec& spec,
                                                              std::unique_ptr<Backend> backend);

}  // namespace brigade
