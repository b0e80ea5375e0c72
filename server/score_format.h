// vLLM's scoring API over an embedding model: POST /score (/v1/score) and the Jina/Cohere-style
// POST /rerank (/v1/rerank, /v2/rerank). Each text is embedded as a /v1/embeddings input would
// be, and a pair's score is the cosine similarity of its two embeddings (vLLM's path for
// embedding models; brigade runs no cross-encoders). Plain functions over JSON text, tested
// without sockets; every malformed field is an invalid_argument naming it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "brigade/engine.h"
#include "core/status.h"
#include "server/embeddings_format.h"
#include "server/openai_parse.h"

namespace brigade::server {

enum class ScoreApi { score, rerank };

struct ScoreRequest {
  ScoreApi api = ScoreApi::score;
  std::string model;                // as sent; empty: the served name answers
  // score: text_1 (or queries / data_1), one input or as many as `second`; rerank: the query.
  std::vector<PromptInput> first;
  // score: text_2 (or documents / items / data_2); rerank: the documents.
  std::vector<PromptInput> second;
  int top_n = 0;                    // rerank: the best top_n results; 0 all of them
  int truncate_prompt_tokens = 0;   // > 0: embed each input's last k tokens; -1 until route() resolves it
  int priority = 0;                 // brigade's higher-first (vLLM's lower-first `priority`, negated)
  bool use_activation = true;       // a cross-encoder's activation (vLLM's use_activation); a cosine has none

  size_t n_pairs() const { return second.size(); }
  // The engine requests: every input of `first`, then every input of `second` (a query shared by
  // every pair is embedded once).
  std::vector<EmbedOptions> embed_options() const;
  // A cross-encoder's engine requests (a model with a classifier of one label), one per pair,
  // task score: two texts as the classifier reads a pair (use_pad_token: engine.tokenize_pair,
  // the tokenizer's pair template; otherwise the texts joined and tokenized with special tokens,
  // as vLLM runs an LLM turned reranker); a side sent as token ids is joined as it is, a text
  // beside it tokenized without special tokens. Errors: the tokenizer's (text that is not UTF-8,
  // a tokenizer without a pair template, no tokenizer).
  Expected<std::vector<EmbedOptions>> cross_encoder_options(const Engine& engine, const ClassifierHead& head) const;
};

// Validates a /score body: `text_1` and `text_2` (vLLM's other names for the pair, `queries` with
// `documents` or `items`, and `data_1` with `data_2`, are read too), each a string, token ids, or
// a batch of either (at most max_inputs); 1:1, 1:N or N:N. vLLM's `truncate_prompt_tokens`,
// `priority` and `use_activation` (its older names `activation` and `softmax` too: false scores by
// a cross-encoder's raw logit; a cosine has no activation); `mm_processor_kwargs` is checked and
// ignored. Multimodal inputs are refused.
Expected<ScoreRequest> parse_score_body(std::string_view body, int max_inputs = kMaxEmbeddingInputs);

// Validates a /rerank body: `query` (one string or token ids), `documents` (a string, token ids,
// or a batch; none empty), `top_n` >= 0 (0 or absent: all; more than the documents: all);
// `return_documents` is checked and ignored (vLLM returns every document's text), the rest as
// parse_score_body.
Expected<ScoreRequest> parse_rerank_body(std::string_view body, int max_inputs = kMaxEmbeddingInputs);

// Cosine similarity of two vectors of equal length, in f64: a.b / max(|a| |b|, 1e-8) (torch's
// CosineSimilarity, which vLLM applies).
double cosine_similarity(std::span<const float> a, std::span<const float> b);

struct PairScore {
  double score = 0;
  int64_t n_tokens = 0;  // both inputs' prompt tokens (a shared query counts once per pair, as vLLM's usage)
};

// Pair i's score: first[n_first == 1 ? 0 : i] against second[i]. `embeddings` holds the first
// side's n_first embeddings, then the second side's (ScoreRequest::embed_options' order).
std::vector<PairScore> pair_scores(size_t n_first, std::span<const Embedding> embeddings);
// A cross-encoder's: pair i's score is its request's one output (cross_encoder_options' order).
std::vector<PairScore> cross_encoder_scores(std::span<const Embedding> outputs);

// vLLM's ScoreResponse: {"id", "object": "list", "created", "model", "data": [{"index", "object":
// "score", "score"}], "usage": {"prompt_tokens", "total_tokens", "completion_tokens": 0}}.
std::string score_body(std::span<const PairScore> scores, const std::string& id, int64_t created,
                       const std::string& model);

// vLLM's RerankResponse: {"id", "model", "usage": {"prompt_tokens", "total_tokens"}, "results":
// [{"index", "document": {"text"}, "relevance_score"}]}, by score from the highest (ties in
// document order), the first top_n (0: all). A document sent as token ids has "text": null.
std::string rerank_body(std::span<const PairScore> scores, std::span<const PromptInput> documents, int top_n,
                        const std::string& id, const std::string& model);

}  // namespace brigade::server
