// Plain step types shared by the scheduler policy and the executor's step runner; they mirror
// schema::SeqWork / StepPlan / SampledToken (messages/step.capnp) one to one.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/sampling.h"
#include "models/pooling.h"

namespace brigade {

// An image of a prompt (mirrors schema::SeqImage): its image tokens (VisionConfig::image_tokens
// of its grid) start at `position`; pixels and grid as models/model.h StepImage takes them,
// shared by the request, its sequence and every chunk that carries it. A request's images
// (SeqRequest::images) have no position yet (0) until the scheduler finds their tokens.
struct SeqImage {
  int32_t position = 0;
  std::shared_ptr<const std::vector<float>> pixels;
  int32_t grid_h = 0;
  int32_t grid_w = 0;
};

// One sequence's part of a step (mirrors schema::SeqWork).
struct SeqWorkItem {
  uint64_t seq_id = 0;
  std::vector<int32_t> tokens;
  int start_pos = 0;
  std::vector<int32_t> block_table;  // pages covering [0, start_pos + tokens.size())
  bool sample = false;
  SamplingConfig sampling;
  uint32_t n_generated = 0;
  int logprobs = -1;
  bool use_last_sampled = false;  // tokens[0] is the token the executor sampled last
  int prompt_len = 0;             // positions [0, prompt_len) are prompt, later ones output
  std::vector<int32_t> history;   // tokens at positions [0, len) not computed here (cached
                                  // prefix): only for penalty history
  int n_draft = 0;                // the last n_draft tokens are drafts to verify (SeqWork.nDraft)
  // Prompt logprobs (SeqWork.sampling.promptLogprobs, .promptLogprobsFrom, .nextToken): with
  // prompt_logprobs = k >= 0 the chunk reports each prompt token at position q in
  // [max(prompt_lp_from, start_pos + 1), min(start_pos + tokens.size(), prompt_len - 1)]: its
  // logprob given the tokens before it and the top k. next_token is the known token at
  // start_pos + tokens.size() when the chunk ends before it (-1 otherwise): the prompt token
  // scored last, and the input of an MTP module's entry at the chunk's last position.
  int prompt_logprobs = -1;
  int prompt_lp_from = 1;
  int32_t next_token = -1;
  // A pooling request's prompt chunk (SeqWork.pooling; actors/executor/pooler.h): never samples;
  // the chunk that ends the prompt returns the pooled embedding (StepResult.embeddings).
  Pooling pooling = Pooling::none;
  uint32_t lora = 0;              // LoRA adapter id (SeqWork.lora; StepBatch::lora)
  int mtp_drafts = 0;             // MTP drafts to propose after the step (SeqWork.mtpDrafts)
  std::vector<SeqImage> images;   // the images whose tokens the chunk holds, whole or in part (SeqWork.images)
  int32_t rope_delta = 0;         // M-RoPE: rotary positions behind start_pos (SeqWork.ropeDelta)
  // Before the step: rows [0, copy_rows) of KV page copy_src go to page copy_dst (a prefix-cache
  // match that ends inside a cached page; SeqWork.copySrc/copyDst/copyRows). 0: no copy.
  int32_t copy_src = -1;
  int32_t copy_dst = -1;
  int copy_rows = 0;
  // Recurrent models' state snapshots (SeqWork.stateFrom/stateSave/stateSavePos; the executor's
  // snapshot slots 0..n-1, StepRunnerOptions::state_snapshots): the item starts from the state
  // in snapshot state_from (ending at start_pos), and/or copies its state after the first
  // state_save_pos positions into snapshot state_save. -1: none.
  int32_t state_from = -1;
  int32_t state_save = -1;
  int state_save_pos = 0;
};

// The MTP module's proposal for a sequence after a step (mirrors schema::SeqDrafts).
struct SeqDrafts {
  uint64_t seq_id = 0;
  std::vector<int32_t> tokens;
};

// A pooling request's embedding, pooled but not normalized (mirrors schema::PooledEmbedding).
struct PooledEmbedding {
  uint64_t seq_id = 0;
  std::vector<float> values;  // [hidden_size] f32
};

// One token's logprob with its rank and the most likely alternatives (prompt logprobs).
struct TokenLogprobEntry {
  int32_t token = 0;
  float logprob = 0.0f;
  int32_t rank = 0;  // 1 + the tokens strictly more likely; 0: none (the first prompt token)
  std::vector<std::pair<int32_t, float>> top;  // best first
};

// The prompt logprobs one work item produced: entries[i] is the prompt token at first_pos + i
// (mirrors schema::PromptLogprobs).
struct PromptLogprobRun {
  uint64_t seq_id = 0;
  int first_pos = 0;
  std::vector<TokenLogprobEntry> entries;
};

struct PlannedStep {
  uint64_t step_id = 0;
  std::vector<SeqWorkItem> seqs;
  std::vector<uint64_t> released;  // sequences that ended since the last plan
  int n_tokens = 0;
};

// What the executor reports of a step's work besides its tokens (messages/step.capnp StepResult).
struct StepReport {
  int n_tokens = 0;          // tokens computed
  uint64_t forward_us = 0;   // executor time
  double flops = 0.0;        // the step's cost (models/model.h StepCost)
  double bytes = 0.0;
  double roofline_us = 0.0;  // what the ceilings allow: max(bytes / bandwidth, flops / peak); 0 = unknown
  bool compute_bound = false;
};

// One sampled token. A sequence that verified drafts has 1..n_draft+1 consecutive results.
struct SampledResult {
  uint64_t seq_id = 0;
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // most likely alternatives, when asked
};

}  // namespace brigade
