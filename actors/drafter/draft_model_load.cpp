#include "actors/drafter/draft_model_load.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "models/model.h"
#include "models/tokenizer.h"

namespace brigade {

namespace {

// The token pieces of a checkpoint's tokenizer (a directory's tokenizer files or a GGUF's
// vocabulary); nullopt when it has none (a llama2.c .bin, a synthetic model).
Expected<std::optional<std::vector<std::string>>> pieces_of(const std::string& path) {
  const bool gguf = std::filesystem::path(path).extension() == ".gguf";
  if (!std::filesystem::is_directory(path) && !gguf) return std::optional<std::vector<std::string>>();
  auto tok = Tokenizer::load(path);
  if (!tok) {
    if (tok.status().code() == StatusCode::not_found) return std::optional<std::vector<std::string>>();
    return tok.status();
  }
  return std::optional<std::vector<std::string>>(token_pieces(**tok));
}

// The draft must speak the target's token ids: the same vocabulary size, and where both name
// their tokens, the same bytes for each id.
Status check_same_vocabulary(const DraftModelSpec& spec, int draft_vocab) {
  const std::string what = "the draft model '" + spec.path + "'";
  if (draft_vocab != spec.target_vocab_size)
    return invalid_argument(what + " has a vocabulary of " + std::to_string(draft_vocab) + " tokens and the target " +
                            std::to_string(spec.target_vocab_size) +
                            "; a draft model must share the target's tokenizer and vocabulary");
  BRIGADE_ASSIGN_OR_RETURN(auto draft, pieces_of(spec.path));
  BRIGADE_ASSIGN_OR_RETURN(auto target, pieces_of(spec.target_path));
  if (!draft || !target) {
    if (draft.has_value() != target.has_value())
      spdlog::warn("engine: {} or the target has no tokenizer: only the vocabulary sizes were compared", what);
    return Status::ok();
  }
  if (draft->size() != target->size())
    return invalid_argument(what + ": its tokenizer has " + std::to_string(draft->size()) + " tokens and the target's " +
                            std::to_string(target->size()) + "; a draft model must share the target's tokenizer");
  for (size_t id = 0; id < draft->size(); ++id) {
    if ((*draft)[id] != (*target)[id])
      return invalid_argument(what + ": token " + std::to_string(id) + " is '" + (*draft)[id] + "', the target's is '" +
                              (*target)[id] + "'; a draft model must share the target's tokenizer");
  }
  return Status::ok();
}

}  // namespace

Expected<std::unique_ptr<DraftModelDrafter>> load_draft_model(const DraftModelSpec& spec,
                                                              std::unique_ptr<Backend> backend) {
  LoadOptions lo;
  lo.max_batch_tokens = spec.max_step_tokens;
  lo.progress = false;
  auto model = Model::load(spec.path, *backend, lo);
  if (!model) return Status(model.status().code(), "the draft model '" + spec.path + "': " + model.status().message());
  const ModelConfig& mc = (*model)->config();
  BRIGADE_RETURN_IF_ERROR(check_same_vocabulary(spec, mc.vocab_size));
  DraftModelOptions o;
  o.page_size = spec.page_size;
  o.n_pages = (spec.kv_tokens + spec.page_size - 1) / spec.page_size;
  o.max_step_tokens = spec.max_step_tokens;
  o.kv_dtype = mc.dtype;
  spdlog::info("engine: draft model '{}': {} ({} params, {} MiB) on {}, KV {} pages x {} tokens", spec.path, mc.arch,
               (*model)->n_params(), (*model)->weight_bytes() >> 20, backend->name(), o.n_pages, o.page_size);
  return DraftModelDrafter::create(std::move(backend), std::move(*model), o);
}

}  // namespace brigade
