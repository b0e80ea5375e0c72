// Host-side token sampling from logits: greedy, temperature, top-k, top-p, min-p, with a
// per-request seed. The random stream of a sequence depends only on (seed, n_generated), so the
// same seed gives the same tokens whether the sequence runs alone or batched with others, and
// the rule is the device sampler's (core/sample_params.h), so also whichever sampler runs it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/sample_params.h"

namespace brigade {

struct SamplingConfig {
  float temperature = 1.0f;  // 0 = greedy (argmax; ties go to the lowest id)
  float top_p = 1.0f;        // (0, 1]
  int top_k = 0;             // 0 = off
  float min_p = 0.0f;        // [0, 1): drop tokens below min_p * p(max)
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  // Added to the logits of these ids before sampling (OpenAI `logit_bias`: [-100, 100]; -100
  // bans a token in practice, +100 all but forces it). Ids are distinct and inside the vocabulary.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Not empty: only these ids may be sampled (vLLM's allowed_token_ids; sorted, distinct).
  std::vector<int32_t> allowed_token_ids;
  // vLLM's bad_words as token-id sequences (each word tokenized with and without a leading space;
  // the tokenizer actor fills them): a one-token word is never sampled; a longer one's last token
  // is masked whenever the output so far ends with the word's other tokens.
  std::vector<std::vector<int32_t>> bad_words;
  static constexpr size_t kMaxBadWords = 256;      // sequences, after the tokenizer's two forms
  static constexpr size_t kMaxBadWordTokens = 64;  // tokens in one sequence
  // While fewer than min_tokens tokens are generated, end_ids cannot be sampled.
  int min_tokens = 0;
  // The output must be a JSON object (OpenAI's response_format json_object): tokens that would
  // break it are masked, and end_ids are allowed only once the object is complete.
  bool json_object = false;
  // The output must be an instance of this JSON schema (response_format json_schema, vLLM's
  // guided_json; its text, checked by the engine: core/json_schema.h), or exactly one of these
  // strings (vLLM's guided_choice). Masked like json_object.
  std::string json_schema;
  std::vector<std::string> guided_choice;
  // The output must match this regex whole (vLLM's guided_regex, SGLang's regex; checked by the
  // engine: core/regex_dfa.h). Masked like json_schema.
  std::string regex;
  // The output must be a whole derivation of this GBNF grammar's `root` (vLLM's guided_grammar,
  // llama.cpp's grammar, SGLang's ebnf; checked by the engine: core/grammar.h). Masked likewise.
  std::string grammar;
  // Reasoning before the constraint (vLLM's and SGLang's structured output with a reasoning
  // parser): with reasoning_end >= 0 the constraint applies only once the model has generated
  // that token (`</think>`); until then the output is free. reasoning_start >= 0: the output
  // starts constrained unless its first token is this one (`<think>`), which opens the
  // reasoning; -1: the output starts inside the reasoning. Both -1: constrained from the start.
  // reasoning_header non-empty (harmony, gpt-oss): reasoning_end (`<|message|>`) ends the
  // reasoning only when it comes at most kMaxReasoningHeaderGap tokens after these tokens in a
  // row (`<|channel|>` `final`): the answer is the final channel's message, whatever channels
  // came before it (vLLM's gpt-oss reasoning end).
  int32_t reasoning_end = -1;
  int32_t reasoning_start = -1;
  std::vector<int32_t> reasoning_header;
  static constexpr int kMaxReasoningHeaderGap = 20;  // tokens between the header and reasoning_end
  static constexpr size_t kMaxReasoningHeader = 16;  // header tokens at most
  // vLLM's thinking_token_budget: >= 0 caps the reasoning block (reasoning_start / reasoning_end
  // above, which then delimit it whatever the response_format) at this many generated tokens;
  // the next tokens are forced to thinking_end (which ends with reasoning_end), one by one, and
  // the output goes on as the answer. -1: no cap. The executor's ThinkingBudgets keeps the count.
  int thinking_budget = -1;
  std::vector<int32_t> thinking_end;  // with a budget: the forced close, reasoning_end last
  static constexpr size_t kMaxThinkingEnd = 64;  // forced tokens at most
  // The ids that end the output: the model's EOS unless ignore_eos, and the request's stop ids.
  // The scheduler fills them for min_tokens and constrained output.
  std::vector<int32_t> end_ids;

  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
  // Whether sampling changes the logits first (apply_logit_rules, apply_penalties): the device
  // sampler does not, so such a sequence samples on the host.
  // The output is constrained (json_object, json_schema, guided_choice, regex or grammar): tokens are masked.
  bool constrained() const {
    return json_object || !json_schema.empty() || !guided_choice.empty() || !regex.empty() || !grammar.empty();
  }
  bool budgeted() const { return thinking_budget >= 0; }  // a thinking budget may force tokens
  bool shapes_logits() const {
    return has_penalties() || !logit_bias.empty() || !allowed_token_ids.empty() || !bad_words.empty() ||
           min_tokens > 0 || constrained() || budgeted();
  }
  // Whether sampling reads the sequence's history (PenaltyHistory): penalties or bad words.
  bool needs_history() const { return has_penalties() || !bad_words.empty(); }
};

// The logit rules that come before the penalties (vLLM's order), at the n_generated-th token:
// logit_bias, then the min_tokens mask (-inf on the stop ids while n_generated < min_tokens, so
// no bias lifts a masked id).
void apply_logit_rules(std::span<float> logits, const SamplingConfig& cfg, uint64_t n_generated);

// What penalties and bad words need to know of one sequence: every token seen (prompt and
// output), how often each token occurs in the output, and the output's last tokens (at most
// kMaxBadWordTokens - 1 of them, for bad words only).
struct PenaltyHistory {
  std::unordered_set<int32_t> seen;
  std::unordered_map<int32_t, int> output_counts;
  std::vector<int32_t> output_tail;
  // Records one output token under cfg (counts with penalties, the tail with bad words).
  void add_output(const SamplingConfig& cfg, int32_t token);
};

// vLLM's bad words: -inf on each word's last token when the output ends with the word's other
// tokens (always for a one-token word). tail: the output's last tokens, oldest first.
void apply_bad_words(std::span<float> logits, const std::vector<std::vector<int32_t>>& bad_words,
                     std::span<const int32_t> tail);

// Applies the penalties of cfg to logits in place (vLLM/Hugging Face semantics):
// repetition: a seen token's logit is divided by the penalty when positive, multiplied when not;
// presence: subtracted once from each token that occurs in the output;
// frequency: subtracted once per occurrence in the output.
void apply_penalties(std::span<float> logits, const SamplingConfig& cfg, const PenaltyHistory& history);

// The k most likely tokens with their log-softmax values, best first (ties: lower id first).
std::vector<std::pair<int32_t, float>> top_logprobs(std::span<const float> logits, int k);

struct SampleOutput {
  int32_t token = 0;
  float logprob = 0.0f;  // log-softmax of the raw logits (temperature 1) at `token`, when asked
};

// Picks one token from logits [vocab] (not modified): sample_like_device with
// sample_params(cfg, n_generated). with_logprob computes SampleOutput::logprob (one more pass
// over the vocabulary).
SampleOutput sample_token(std::span<const float> logits, const SamplingConfig& cfg,
                          uint64_t n_generated, bool with_logprob = false);

// The sampler parameters of a request at its n_generated-th token: greedy (temperature 0) when
// cfg.temperature <= 0 or top_k == 1. Penalties are not in them (applied to the logits first).
SampleParams sample_params(const SamplingConfig& cfg, uint64_t n_generated);

// Index of the largest logit; ties go to the lowest index.
int32_t argmax(std::span<const float> logits);

// log-softmax at one index, computed stably.
float log_softmax_at(std::span<const float> logits, int32_t index);

// The sampling rule (gpu/sampling.cu runs it on the device; the CPU backend's Backend::sample
// and the host sampler run this): greedy when temperature <= 0; else x = logit / temperature in
// f32 and m = max x; keep the top_k largest keys (sample_order_key; ties at the cut all stay) and
// those with x >= m + log_min_p; then the largest kept keys whose mass exp(x - m) reaches top_p
// of the kept mass; walk the kept tokens in vocabulary order until the running mass exceeds
// device_uniform(seed, step) times the total (the last kept token when rounding leaves none).
int32_t sample_like_device(std::span<const float> logits, const SampleParams& p);

// Speculative verification (DESIGN.md §7) of k draft tokens against the target's k + 1 logits
// rows (row j: the distribution of the token after the step's input j; input 0 is the sequence's
// last token, input j >= 1 is drafts[j - 1]). sample_row(j) draws the target's token from row j by
// the ordinary rule (penalties with the history up to that row, then sample_like_device with the
// draw of stream step n_generated + j). Draft j is accepted when that token equals it; the first
// token that differs, or the bonus token of row k after all k were accepted, ends the run.
// Returns the tokens to append: drafts[0, a) and then the target's token of row a (1..k+1).
//
// This is the standard rule for a drafter whose distribution is a point mass on its draft d
// (accept with probability min(1, p(d) / q(d)) = p(d); on rejection draw from the residual
// max(0, p - q) normalised, which is p with d removed, renormalised): the ordinary draw equals
// d with probability p(d), and given that it is not d it is distributed as p restricted to the
// other tokens. It is the coupling in which the random draw of each position is the one
// non-speculative decoding uses, so with equal logits speculation changes no token, greedy or
// seeded (what may differ is the logits themselves: a row verified in a k + 1 row step and the
// same row decoded alone agree bit for bit on the CPU backend below cpu/ops.h kBlasMinRows rows, and
// below kQuantGemmMinRows for block-quantized weights).
// sample_row(j) is called in order and only while drafts are accepted, so it may extend the
// penalty history with drafts[j - 1] when called for j >= 1.
template <class SampleRow>
std::vector<int32_t> verify_drafts(std::span<const int32_t> drafts, SampleRow&& sample_row) {
  std::vector<int32_t> out;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    const int32_t token = sample_row(static_cast<int>(j));
    out.push_back(token);
    if (j == drafts.size() || token != drafts[j]) break;
  }
  return out;
}

}  // namespace brigade
