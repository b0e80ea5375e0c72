// Shared by the tests that run a whole Engine (tests/actors, tests/server) over a tiny synthetic
// checkpoint: the checkpoint's shape, and engine options that keep such a test small.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "brigade/engine.h"
#include "models/make_model.h"

namespace brigade::testing {

// A tiny f32 Llama (hidden 64, 2 layers, 4 query heads over 2 KV heads, MLP 128): a step takes
// microseconds, yet GQA, paging and every engine path run. Suites differ in the vocabulary and
// context they need; the seed names the weights.
inline SyntheticModelSpec tiny_llama(int vocab_size, int max_position, uint64_t seed) {
  return SyntheticModelSpec{.hidden_size = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                            .intermediate_size = 128, .vocab_size = vocab_size, .max_position = max_position,
                            .dtype = DType::f32, .seed = seed};
}

// An engine over `model` with no progress bar and its executor on `threads` threads (tests run in
// parallel on shared cores); everything else is the default topology's.
inline EngineOptions test_engine_options(const std::string& model, int threads) {
  EngineOptions o;
  o.model_path = model;
  o.progress = false;
  o.topology.instances.front().executors.front().threads = threads;
  o.topology.instances.front().executors.front().roofline = false;  // no ceiling probe per engine
  return o;
}

// Greedy decoding of `ids` for max_tokens tokens, never stopping at EOS (outputs of a fixed length).
inline GenerateOptions greedy_ids(std::vector<int32_t> ids, int max_tokens) {
  GenerateOptions r;
  r.prompt_ids = std::move(ids);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  return r;
}

// Submits every request at once (one thread each) and waits for all of them.
inline std::vector<Completion> run_concurrently(Engine& engine, const std::vector<GenerateOptions>& reqs) {
  std::vector<std::future<Expected<Completion>>> futures;
  for (const auto& r : reqs) futures.push_back(std::async(std::launch::async, [&engine, r] { return engine.generate(r); }));
  std::vector<Completion> out;
  for (auto& f : futures) {
    auto c = f.get();
    EXPECT_TRUE(c.has_value()) << c.status().to_string();
    out.push_back(c ? *c : Completion{});
  }
  return out;
}

}  // namespace brigade::testing
