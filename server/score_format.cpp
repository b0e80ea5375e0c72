#include "server/score_format.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <nlohmann/json.hpp>

namespace brigade::server {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

Expected<json> parse_object(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("the request body must be a JSON object");
  return j;
}

// One side of the pairs: a string, token ids, or a batch of either, none empty. vLLM's multimodal
// form ({"content": [parts]}) is refused by name rather than as a wrong type.
Status read_side(const json& j, const std::string& field, int max_inputs, std::vector<PromptInput>& out) {
  const json& v = j.at(field);
  const bool multimodal = v.is_object() || (v.is_array() && std::any_of(v.begin(), v.end(), [](const json& e) {
                                              return e.is_object();
                                            }));
  if (multimodal)
    return unsupported("'" + field + "': multimodal score inputs ({\"content\": [...]}) are not supported; "
                       "brigade scores text or token ids");
  if (v.is_array() && v.empty()) return invalid_argument("'" + field + "' is an empty array: give at least one input");
  return read_prompt_batch(v, field, max_inputs, out);
}

// What /score and /rerank share: model, truncation, priority, and vLLM's fields that do not
// apply to a cosine score (checked for type, then ignored).
Status read_common(const json& j, ScoreRequest& r) {
  if (auto m = j.find("model"); m != j.end() && !m->is_null()) {
    if (!m->is_string()) return invalid_argument("'model' must be a string");
    r.model = m->get<std::string>();
  }
  BRIGADE_RETURN_IF_ERROR(read_truncate_prompt_tokens(j, r.truncate_prompt_tokens));
  BRIGADE_RETURN_IF_ERROR(read_priority(j, r.priority));
  for (const char* field : {"softmax", "activation", "use_activation"})  // the newest name wins
    BRIGADE_RETURN_IF_ERROR(read_bool(j, field, r.use_activation));
  if (auto k = j.find("mm_processor_kwargs"); k != j.end() && !k->is_null() && !k->is_object())
    return invalid_argument("'mm_processor_kwargs' must be an object");
  return Status::ok();
}

}  // namespace

std::vector<EmbedOptions> ScoreRequest::embed_options() const {
  std::vector<EmbedOptions> out;
  for (const auto* side : {&first, &second}) {
    for (const PromptInput& p : *side) {
      EmbedOptions o;
      o.prompt = p.text;
      o.prompt_ids = p.ids;
      o.truncate_prompt_tokens = truncate_prompt_tokens;
      o.priority = priority;
      out.push_back(std::move(o));
    }
  }
  return out;
}

Expected<std::vector<EmbedOptions>> ScoreRequest::cross_encoder_options(const Engine& engine,
                                                                         const ClassifierHead& head) const {
  std::vector<EmbedOptions> out;
  for (size_t i = 0; i < second.size(); ++i) {
    const PromptInput& a = first[first.size() == 1 ? 0 : i];
    const PromptInput& b = second[i];
    EmbedOptions o;
    if (a.ids.empty() && b.ids.empty() && !head.use_pad_token && truncate_prompt_tokens != 0) {
      // The two texts joined, as one text: the tokenizer actor cuts it as vLLM cuts a pooling
      // input's text (from the right, special tokens kept).
      o.prompt = a.text + b.text;
    } else if (a.ids.empty() && b.ids.empty()) {
      // An encoder of two token types (BERT) reads the second text as type 1. A pair is cut as
      // Hugging Face's tokenizer(a, b, truncation=True) cuts it, as vLLM scores one.
      const bool typed = engine.model().token_types > 1;
      auto ids = head.use_pad_token
                     ? engine.tokenize_pair(a.text, b.text, typed ? &o.token_type_ids : nullptr, truncate_prompt_tokens)
                     : engine.tokenize(a.text + b.text, true);
      if (!ids) return ids.status();
      o.prompt_ids = std::move(*ids);
    } else {
      for (const PromptInput* side : {&a, &b}) {
        if (!side->ids.empty()) {
          o.prompt_ids.insert(o.prompt_ids.end(), side->ids.begin(), side->ids.end());
          continue;
        }
        auto ids = engine.tokenize(side->text, false);
        if (!ids) return ids.status();
        o.prompt_ids.insert(o.prompt_ids.end(), ids->begin(), ids->end());
      }
    }
    if (o.prompt_ids.empty() && o.prompt.empty())
      return invalid_argument("pair " + std::to_string(i) + " tokenizes to no tokens");
    o.task = PoolingTask::score;
    o.use_activation = use_activation;
    o.truncate_prompt_tokens = truncate_prompt_tokens;
    o.priority = priority;
    out.push_back(std::move(o));
  }
  return out;
}

Expected<ScoreRequest> parse_score_body(std::string_view body, int max_inputs) {
  auto j = parse_object(body);
  if (!j) return j.status();
  // vLLM's names for the two sides, in the order its request union tries them.
  static const std::pair<const char*, const char*> kSides[] = {
      {"text_1", "text_2"}, {"queries", "documents"}, {"queries", "items"}, {"data_1", "data_2"}};
  const std::pair<const char*, const char*>* sides = nullptr;
  for (const auto& s : kSides)
    if (!sides && j->contains(s.first) && j->contains(s.second)) sides = &s;
  if (!sides) {
    for (const auto& [a, b] : kSides) {
      if (j->contains(a)) return invalid_argument(std::string("'") + b + "' is required with '" + a + "'");
      if (j->contains(b)) return invalid_argument(std::string("'") + a + "' is required with '" + b + "'");
    }
    return invalid_argument("'text_1' and 'text_2' are required: a string or an array of strings each "
                            "(one text_1 for every text_2, or as many of each)");
  }
  ScoreRequest r;
  BRIGADE_RETURN_IF_ERROR(read_side(*j, sides->first, max_inputs, r.first));
  BRIGADE_RETURN_IF_ERROR(read_side(*j, sides->second, max_inputs, r.second));
  if (r.first.size() > 1 && r.first.size() != r.second.size())
    return invalid_argument(std::string("'") + sides->first + "' holds " + std::to_string(r.first.size()) +
                            " inputs and '" + sides->second + "' " + std::to_string(r.second.size()) +
                            ": the lengths must be 1:1, 1:N or N:N");
  BRIGADE_RETURN_IF_ERROR(read_common(*j, r));
  return r;
}

Expected<ScoreRequest> parse_rerank_body(std::string_view body, int max_inputs) {
  auto j = parse_object(body);
  if (!j) return j.status();
  ScoreRequest r;
  r.api = ScoreApi::rerank;
  if (!j->contains("query") || j->at("query").is_null())
    return invalid_argument("'query' is required: the string the documents are ranked against");
  if (!j->contains("documents") || j->at("documents").is_null())
    return invalid_argument("'documents' is required: an array of strings to rank");
  if (const json& q = j->at("query"); q.is_array() && !q.empty() && (q[0].is_string() || q[0].is_array()))
    return invalid_argument("'query' must be one string (or one array of token ids), not an array of them");
  BRIGADE_RETURN_IF_ERROR(read_side(*j, "query", 1, r.first));
  BRIGADE_RETURN_IF_ERROR(read_side(*j, "documents", max_inputs, r.second));
  BRIGADE_RETURN_IF_ERROR(read_int(*j, "top_n", 0, std::numeric_limits<int32_t>::max(), r.top_n));
  bool return_documents = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(*j, "return_documents", return_documents));
  BRIGADE_RETURN_IF_ERROR(read_common(*j, r));
  return r;
}

double cosine_similarity(std::span<const float> a, std::span<const float> b) {
  BRIGADE_CHECK(a.size() == b.size(), "cosine of embeddings of one model: the lengths agree");
  double dot = 0, aa = 0, bb = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    dot += static_cast<double>(a[k]) * b[k];
    aa += static_cast<double>(a[k]) * a[k];
    bb += static_cast<double>(b[k]) * b[k];
  }
  return dot / std::max(std::sqrt(aa) * std::sqrt(bb), 1e-8);
}

std::vector<PairScore> pair_scores(size_t n_first, std::span<const Embedding> embeddings) {
  BRIGADE_CHECK(n_first >= 1 && embeddings.size() > n_first, "both sides hold at least one input");
  const size_t n_pairs = embeddings.size() - n_first;
  BRIGADE_CHECK(n_first == 1 || n_first == n_pairs, "the parsers allow 1:1, 1:N and N:N only");
  std::vector<PairScore> out(n_pairs);
  for (size_t i = 0; i < n_pairs; ++i) {
    const Embedding& a = embeddings[n_first == 1 ? 0 : i];
    const Embedding& b = embeddings[n_first + i];
    out[i] = {cosine_similarity(a.values, b.values), static_cast<int64_t>(a.prompt_tokens) + b.prompt_tokens};
  }
  return out;
}

std::vector<PairScore> cross_encoder_scores(std::span<const Embedding> outputs) {
  std::vector<PairScore> out;
  for (const Embedding& e : outputs) {
    BRIGADE_CHECK(!e.values.empty(), "a score request returns its classifier's one output");
    out.push_back({static_cast<double>(e.values[0]), e.prompt_tokens});
  }
  return out;
}

std::string score_body(std::span<const PairScore> scores, const std::string& id, int64_t created,
                       const std::string& model) {
  ordered_json data = ordered_json::array();
  int64_t n_tokens = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    data.push_back({{"index", i}, {"object", "score"}, {"score", scores[i].score}});
    n_tokens += scores[i].n_tokens;
  }
  ordered_json out = {{"id", id}, {"object", "list"}, {"created", created}, {"model", model}, {"data", std::move(data)}};
  out["usage"] = {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}, {"completion_tokens", 0}};
  return out.dump();
}

std::string rerank_body(std::span<const PairScore> scores, std::span<const PromptInput> documents, int top_n,
                        const std::string& id, const std::string& model) {
  BRIGADE_CHECK(scores.size() == documents.size(), "one score per document");
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a].score > scores[b].score; });
  if (top_n > 0 && static_cast<size_t>(top_n) < order.size()) order.resize(static_cast<size_t>(top_n));
  int64_t n_tokens = 0;
  for (const PairScore& s : scores) n_tokens += s.n_tokens;
  ordered_json results = ordered_json::array();
  for (size_t i : order) {
    const PromptInput& doc = documents[i];
    ordered_json text = doc.ids.empty() ? ordered_json(doc.text) : ordered_json(nullptr);
    results.push_back({{"index", i}, {"document", {{"text", std::move(text)}}}, {"relevance_score", scores[i].score}});
  }
  ordered_json out = {{"id", id}, {"model", model}};
  out["usage"] = {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}};
  out["results"] = std::move(results);
  return out.dump();
}

}  // namespace brigade::server
