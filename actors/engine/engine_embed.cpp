#include "actors/engine/engine_embed.h"
#include "actors/engine/wait_for_answer.h"

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "models/bert.h"
#include "models/mapped_file.h"
#include "models/model_config.h"

namespace brigade {

Status validate_embed(const EmbedOptions& r, const ModelSummary& m) {
  if (r.task == PoolingTask::embed && m.pooling == Pooling::none)
    return unsupported("this model serves no embeddings: " + m.pooling_error + " (serve it with --pooling last|mean|cls)");
  if (r.task != PoolingTask::embed) {
    const char* what = r.task == PoolingTask::classify ? "classification" : "cross-encoder scores";
    if (!m.classifier)
      return unsupported(std::string("this model has no classifier, so it serves no ") + what +
                         " (a *ForSequenceClassification checkpoint has one; a causal LM gets one from "
                         "--hf-overrides classifier_from_token)");
    if (r.task == PoolingTask::score && m.classifier->num_labels != 1)
      return invalid_argument("cross-encoder scores need a classifier of one label; this one has " +
                              std::to_string(m.classifier->num_labels) + " (use /classify)");
    if (r.dimensions != 0) return invalid_argument(std::string("dimensions applies to embeddings, not to ") + what);
  }
  if (r.prompt_ids.empty() && r.prompt.empty()) return invalid_argument("the input is empty: give text or token ids");
  if (r.prompt_ids.empty() && !m.has_tokenizer)
    return invalid_argument("this model has no tokenizer: send the input as token ids");
  for (int32_t t : r.prompt_ids) {
    if (t < 0 || t >= m.vocab_size)
      return invalid_argument("input token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                              std::to_string(m.vocab_size) + ")");
  }
  if (!r.token_type_ids.empty()) {
    if (r.token_type_ids.size() != r.prompt_ids.size())
      return invalid_argument("token_type_ids must give one type per input token id (" +
                              std::to_string(r.prompt_ids.size()) + " ids, " + std::to_string(r.token_type_ids.size()) +
                              " types)");
    const int types = std::max(1, m.token_types);
    for (int32_t t : r.token_type_ids)
      if (t < 0 || t >= types)
        return invalid_argument("token type " + std::to_string(t) + " is outside [0, " + std::to_string(types) +
                                ") (the model's token types)");
  }
  if (r.truncate_prompt_tokens < 0)
    return invalid_argument("truncate_prompt_tokens must be >= 1, or 0 for none (got " +
                            std::to_string(r.truncate_prompt_tokens) + ")");
  if (r.dimensions < 0 || (m.hidden_size > 0 && r.dimensions > m.hidden_size))
    return invalid_argument("dimensions must be in [1, " + std::to_string(m.hidden_size) +
                            "] (the model's embedding size; got " + std::to_string(r.dimensions) + ")");
  return Status::ok();
}

GenerateOptions embed_as_generate(const EmbedOptions& r) {
  GenerateOptions g;
  g.prompt = r.prompt;
  g.prompt_ids = r.prompt_ids;
  for (size_t i = 0; i < r.token_type_ids.size() && i < g.prompt_ids.size(); ++i)
    g.prompt_ids[i] = with_token_type(g.prompt_ids[i], r.token_type_ids[i]);
  g.add_bos = r.add_bos;
  g.max_tokens = 0;
  g.truncate_prompt_tokens = r.truncate_prompt_tokens;
  g.sampling.temperature = 0.0f;
  g.sampling.seed = 0;  // nothing is sampled: no seed needs drawing
  g.priority = r.priority;
  g.labels = r.labels;
  return g;
}

EventCallback embed_events(const EmbedOptions& r, const ModelSummary& m, EmbedCallback on_done) {
  const int dimensions = r.dimensions;
  const bool normalize = r.normalize.value_or(m.normalize_embeddings);
  // classify / score: the classifier over the last token's hidden state.
  std::shared_ptr<const ClassifierHead> head = r.task == PoolingTask::embed ? nullptr : m.classifier;
  const PoolingTask task = r.task;
  const bool use_activation = r.use_activation;
  return [dimensions, normalize, head, task, use_activation, on_done = std::move(on_done)](const Event& ev) {
    if (ev.finish == FinishReason::none) return;
    if (ev.finish == FinishReason::abort) return on_done(Status(StatusCode::cancelled, "the request was cancelled"));
    if (ev.finish == FinishReason::error || ev.embedding.empty()) {
      const StatusCode code = ev.error_code == StatusCode::ok ? StatusCode::internal : ev.error_code;
      return on_done(Status(code, ev.error.empty() ? "the request ended without an embedding" : ev.error));
    }
    if (head) {
      if (static_cast<int>(ev.embedding.size()) != head->hidden)
        return on_done(internal_error("the model pooled " + std::to_string(ev.embedding.size()) +
                                      " values; the classifier takes " + std::to_string(head->hidden)));
      return on_done(Embedding{head->outputs(ev.embedding, task, use_activation), ev.prompt_tokens});
    }
    if (dimensions > static_cast<int>(ev.embedding.size()))
      return on_done(invalid_argument("dimensions must be at most the model's embedding size " +
                                      std::to_string(ev.embedding.size()) + " (got " + std::to_string(dimensions) + ")"));
    on_done(Embedding{finish_embedding(ev.embedding, dimensions, normalize), ev.prompt_tokens});
  };
}

void resolve_pooling(const EngineOptions& options, const std::string& model_path, ModelSummary& m) {
  auto from_model = read_pooling_config(model_path);
  if (options.pooling) {
    m.pooling = *options.pooling;
    m.normalize_embeddings = options.normalize_embeddings.value_or(from_model ? from_model->normalize : true);
  } else if (from_model) {
    m.pooling = m.encoder && from_model->source == "default" ? Pooling::cls : from_model->mode;
    m.normalize_embeddings = options.normalize_embeddings.value_or(from_model->normalize);
  } else {
    m.pooling = Pooling::none;
    m.pooling_error = from_model.status().message();
    spdlog::warn("engine: embeddings are off: {}", m.pooling_error);
    return;
  }
  spdlog::debug("engine: embeddings pool {} ({}), {}", pooling_name(m.pooling),
                options.pooling ? "--pooling" : from_model->source,
                m.normalize_embeddings ? "normalized" : "not normalized");
}

Status summarize_encoder(const std::string& model_path, const std::vector<std::optional<LoadedInstance>>& loaded,
                         ModelSummary& m) {
  std::optional<ModelConfig> config;
  for (const auto& l : loaded)
    if (l && !config) config = l->ranks.front()->model->config();
  std::error_code ec;
  const auto json_path = std::filesystem::path(model_path) / "config.json";
  if (!config && std::filesystem::exists(json_path, ec)) {
    BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(json_path.string()));
    if (auto parsed = parse_hf_config(text)) config = *parsed;
  }
  if (!config || !config->encoder) return Status::ok();
  m.encoder = true;
  m.generates = false;
  m.token_types = config->type_vocab_size;
  return Status::ok();
}

Expected<Embedding> Engine::embed(const EmbedOptions& request) {
  return wait_for_answer<Embedding>([&](EmbedCallback done) { return submit_embed(request, std::move(done)); });
}

Expected<Classification> Engine::classify(EmbedOptions request) {
  request.task = PoolingTask::classify;
  BRIGADE_ASSIGN_OR_RETURN(Embedding e, embed(request));
  Classification c;
  c.probs = std::move(e.values);
  c.prompt_tokens = e.prompt_tokens;
  c.label = static_cast<int>(std::max_element(c.probs.begin(), c.probs.end()) - c.probs.begin());
  const auto& head = model().classifier;  // embed succeeded, so there is one
  if (head && c.label < static_cast<int>(head->labels.size())) c.label_name = head->labels[static_cast<size_t>(c.label)];
  return c;
}

}  // namespace brigade
