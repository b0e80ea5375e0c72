// What the engine tests of the draft modules the executor runs after each step (LoadOptions::mtp
// or ::eagle3; engine_mtp_test.cpp, engine_eagle3_test.cpp) share: a StepRunner driven one
// sampling item at a time, whose drafts they compare with their references, and their requests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/executor/step_runner.h"
#include "brigade/engine.h"
#include "cpu/cpu_backend.h"
#include "models/model.h"
#include "tests/engine_test_util.h"

namespace brigade::testing {

class DraftPassRunner {
 public:
  static constexpr int kPage = 4, kPages = 32;
  // `lo` names the draft module (mtp or eagle3); max_batch_tokens and progress are set here.
  DraftPassRunner(const std::string& model, LoadOptions lo) : backend_(make_cpu_backend({.n_threads = 2})) {
    lo.max_batch_tokens = 64;
    lo.progress = false;
    auto m = Model::load(model, *backend_, lo);
    EXPECT_TRUE(m.has_value()) << m.status().to_string();
    if (!m) return;
    model_ = std::move(*m);
    auto kv = KvCache::allocate(*backend_, model_->kv_layout(kPages, kPage, DType::f32));
    EXPECT_TRUE(kv.has_value());
    runner_ = std::make_unique<StepRunner>(*backend_, *model_, std::move(*kv));
  }
  // One greedy sampling item of sequence 1 at `start` whose last n_draft tokens are drafts,
  // asking for k drafts after it; returns its tokens and the drafts that came back for it.
  std::pair<std::vector<int32_t>, std::vector<int32_t>> step(std::vector<int32_t> tokens, int start, int n_draft, int k) {
    if (!runner_) return {};
    SeqWorkItem w;
    w.seq_id = 1;
    w.tokens = std::move(tokens);
    w.start_pos = start;
    w.n_draft = n_draft;
    for (int p = 0; p < kPages; ++p) w.block_table.push_back(p);
    w.sample = true;
    w.sampling.temperature = 0.0f;
    w.prompt_len = start == 0 ? static_cast<int>(w.tokens.size()) : 0;
    w.mtp_drafts = k;
    PlannedStep s;
    s.step_id = ++step_id_;
    s.seqs.push_back(w);
    auto started = runner_->start(s);
    EXPECT_TRUE(started.has_value()) << started.status().to_string();
    if (!started) return {};
    std::vector<int32_t> got;
    for (const SampledResult& r : runner_->finish(*started)) got.push_back(r.token);
    std::vector<int32_t> drafts;
    for (const SeqDrafts& d : started->take_drafts()) {
      EXPECT_EQ(d.seq_id, 1u);
      drafts = d.tokens;
    }
    return {got, drafts};
  }

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<StepRunner> runner_;
  uint64_t step_id_ = 0;
};

// An engine over `model` with a small KV pool of 4-token pages, prompts in chunks of 16 tokens and
// `depth` steps in flight; speculation off.
inline EngineOptions draft_engine_options(const std::string& model, int depth) {
  EngineOptions o = test_engine_options(model, 2);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 16;
  inst.kv.page_size = 4;
  inst.scheduler.max_step_tokens = 16;  // long prompts take several chunks
  inst.scheduler.max_inflight_steps = depth;
  return o;
}

// Prompts of 2, 7, 19 and 33 ids in [3, 3 + id_range), each greedy and (sampled) seeded with and
// without a penalty (greedy_and_seeded), 20 to 24 tokens long.
inline std::vector<GenerateOptions> draft_engine_requests(bool sampled, int id_range) {
  std::vector<GenerateOptions> reqs;
  for (int n : {2, 7, 19, 33}) {
    std::vector<int32_t> prompt;
    for (int i = 0; i < n; ++i) prompt.push_back((i * 37 + n) % id_range + 3);
    for (const GenerateOptions& r : greedy_and_seeded(prompt, 20 + n % 5, sampled ? 3 : 1, static_cast<uint64_t>(n)))
      reqs.push_back(r);
  }
  return reqs;
}

}  // namespace brigade::testing
