#include "server/classify_format.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace brigade::server {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

EmbedOptions ClassifyRequest::classify_options(size_t i) const {
  EmbedOptions o;
  o.prompt = inputs[i].text;
  o.prompt_ids = inputs[i].ids;
  o.add_bos = add_special_tokens;
  o.task = PoolingTask::classify;
  o.use_activation = use_activation;
  o.truncate_prompt_tokens = truncate_prompt_tokens;
  o.priority = priority;
  return o;
}

Expected<ClassifyRequest> parse_classify_body(std::string_view body, int max_inputs) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("the request body must be a JSON object");
  ClassifyRequest r;
  BRIGADE_RETURN_IF_ERROR(read_pooling_input(j, max_inputs, r.model, r.inputs, r.chat, r.add_special_tokens));
  for (const char* field : {"softmax", "activation", "use_activation"})  // the newest name wins
    BRIGADE_RETURN_IF_ERROR(read_bool(j, field, r.use_activation));
  BRIGADE_RETURN_IF_ERROR(read_truncate_prompt_tokens(j, r.truncate_prompt_tokens));
  BRIGADE_RETURN_IF_ERROR(read_priority(j, r.priority));
  if (auto u = j.find("user"); u != j.end() && !u->is_null() && !u->is_string())
    return invalid_argument("'user' must be a string");
  return r;
}

std::string classify_body(std::span<const Embedding> outputs, const std::vector<std::string>& labels,
                          const std::string& id, int64_t created, const std::string& model) {
  ordered_json data = ordered_json::array();
  int64_t n_tokens = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::vector<float>& probs = outputs[i].values;
    const size_t best = static_cast<size_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
    ordered_json label = best < labels.size() ? ordered_json(labels[best]) : ordered_json(nullptr);
    data.push_back({{"index", i}, {"label", std::move(label)}, {"probs", probs}, {"num_classes", probs.size()}});
    n_tokens += outputs[i].prompt_tokens;
  }
  ordered_json out = {{"id", id}, {"object", "list"}, {"created", created}, {"model", model}, {"data", std::move(data)}};
  out["usage"] = {{"prompt_tokens", n_tokens},
                  {"total_tokens", n_tokens},
                  {"completion_tokens", 0},
                  {"prompt_tokens_details", nullptr}};
  return out.dump();
}

}  // namespace brigade::server
