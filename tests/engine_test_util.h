// Shared by the tests that run a whole Engine (tests/actors, tests/server) over a tiny synthetic
// checkpoint: the checkpoint's shape, and engine options that keep such a test small.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

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

// test_engine_options with a small pool of 8-token pages and 32-token steps (a long prompt takes
// several chunked-prefill steps), at tensor parallelism tp (expert parallelism for MoE layers).
inline EngineOptions chunked_engine_options(const std::string& model, int tp = 1, bool expert_parallel = false) {
  EngineOptions o = test_engine_options(model, 1);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 16;
  inst.kv.page_size = 8;
  inst.scheduler.max_step_tokens = 32;
  inst.executors.front().tp = tp;
  inst.executors.front().expert_parallel = expert_parallel;
  return o;
}

// Waits (bounded, about 10 s) until `pred` holds for the engine's stats; false if it never does.
inline bool eventually(const Engine& e, const std::function<bool(const EngineStats&)>& pred) {
  for (int i = 0; i < 5000; ++i) {
    if (pred(e.stats())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

// Engine::create that fails the test, and returns null, when the engine does not start.
inline std::unique_ptr<Engine> create_engine(const EngineOptions& o) {
  auto engine = Engine::create(o);
  EXPECT_TRUE(engine.has_value()) << engine.status().to_string();
  return engine ? std::move(*engine) : nullptr;
}

// base's (first) instance as a prefill instance "prefill" and a decode instance "decode" (PD
// separation).
inline EngineOptions prefill_decode(EngineOptions base) {
  InstanceConfig prefill = base.topology.instances.front(), decode = prefill;
  prefill.name = prefill.role = "prefill";
  decode.name = decode.role = "decode";
  base.topology.instances = {prefill, decode};
  return base;
}

// The executor variants a sampled token can come from.
inline std::vector<std::pair<std::string, EngineOptions>> variants(const EngineOptions& base) {
  std::vector<std::pair<std::string, EngineOptions>> out;
  out.emplace_back("host", base);
  EngineOptions device = base;
  device.topology.instances.front().executors.front().step_path = "device";
  device.topology.instances.front().scheduler.max_inflight_steps = 2;
  out.emplace_back("device, depth 2", device);
  EngineOptions spec = base;
  spec.topology.instances.front().scheduler.speculative.method = "ngram";
  spec.topology.instances.front().scheduler.speculative.num_tokens = 3;
  out.emplace_back("ngram speculation", spec);
  // Prefill/decode separation: the first token is sampled on the prefill instance, the rest on
  // the decode instance, which rebuilds the penalty/JSON state from the hand-off.
  out.emplace_back("pd separation", prefill_decode(base));
  return out;
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

// The first n_kinds (1..3) of: `prompt` greedy; sampled at temperature 0.8 with seed + 1; the same
// with a frequency penalty and seed + 2. Speculative decoding must change none of their tokens.
inline std::vector<GenerateOptions> greedy_and_seeded(const std::vector<int32_t>& prompt, int max_tokens, int n_kinds,
                                                      uint64_t seed) {
  std::vector<GenerateOptions> reqs;
  for (int kind = 0; kind < n_kinds; ++kind) {
    GenerateOptions r = greedy_ids(prompt, max_tokens);
    if (kind >= 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.seed = seed + static_cast<uint64_t>(kind);
    }
    if (kind == 2) r.sampling.frequency_penalty = 0.4f;
    reqs.push_back(r);
  }
  return reqs;
}

// Submits every request at once (one thread each) and waits for all of them.
// Every request produced tokens, and the same ones in both runs (speculation against plain decoding).
inline void expect_same_tokens(const std::vector<Completion>& got, const std::vector<Completion>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_FALSE(want[i].token_ids.empty());
    EXPECT_EQ(got[i].token_ids, want[i].token_ids) << what << ", request " << i;
  }
}

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

// Submits every request before waiting for any, so they share steps, and returns each one's
// events in order (a refused submit fails the test and leaves its list empty).
inline std::vector<std::vector<Event>> collect_events(Engine& engine, const std::vector<GenerateOptions>& reqs) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<Event>> events(reqs.size());
  size_t n_done = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto id = engine.submit(reqs[i], [&, i](const Event& ev) {
      std::lock_guard<std::mutex> lock(mu);
      events[i].push_back(ev);
      if (ev.finish != FinishReason::none) {
        ++n_done;
        cv.notify_all();
      }
    });
    EXPECT_TRUE(id.has_value()) << id.status().to_string();
    if (!id) {
      std::lock_guard<std::mutex> lock(mu);
      ++n_done;
    }
  }
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return n_done == reqs.size(); });
  return events;
}

// collect_events' tokens per request (an error event fails the test).
inline std::vector<std::vector<int32_t>> generate_all(Engine& engine, const std::vector<GenerateOptions>& reqs) {
  std::vector<std::vector<int32_t>> tokens(reqs.size());
  const auto events = collect_events(engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    for (const Event& ev : events[i]) {
      tokens[i].insert(tokens[i].end(), ev.token_ids.begin(), ev.token_ids.end());
      EXPECT_NE(ev.finish, FinishReason::error) << ev.error;
    }
  }
  return tokens;
}

// Collects the events of many requests submitted at once, by request id; `also` (optional) sees
// each event first.
class Outcomes {
 public:
  EventCallback callback(std::function<void(const Event&)> also = {}) {
    return [this, also](const Event& ev) {
      if (also) also(ev);
      std::lock_guard<std::mutex> lock(mu_);
      auto& c = done_[ev.request_id];
      c.token_ids.insert(c.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
      if (ev.finish == FinishReason::none) return;
      c.finish = ev.finish;
      errors_[ev.request_id] = ev.error;
      ++n_final_[ev.request_id];
      ++n_final_total_;
      cv_.notify_all();
    };
  }
  // Waits (bounded) until n requests have ended; false on timeout.
  bool wait(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(120), [&] { return n_final_total_ >= n; });
  }
  Completion get(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return done_[id];
  }
  std::string error(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_[id];
  }
  // Final events of request id (a request ends exactly once).
  int n_final(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    return n_final_[id];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Completion> done_;
  std::map<uint64_t, std::string> errors_;
  std::map<uint64_t, int> n_final_;
  size_t n_final_total_ = 0;
};

// A fixture that writes a tiny_llama(300, 2048, seed) checkpoint into a temporary directory of
// its own for each test (model()) and removes it afterwards.
class TinyModelTest : public ::testing::Test {
 protected:
  TinyModelTest(const std::string& name, uint64_t seed) : name_(name), seed_(seed) {}
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("brigade_" + name_ + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(write_synthetic_model(tiny_llama(300, 2048, seed_), model()).is_ok());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string model() const { return (dir_ / "model").string(); }

  // n token ids in [1, 290], a different sequence per seed.
  static std::vector<int32_t> prompt(int32_t seed, int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(1 + (seed * 37 + i * 11) % 290);
    return p;
  }

  // Submits n greedy requests of max_tokens tokens (prompts prompt(i, 8)) to `e`, collected by
  // `out`; their ids in order (under round robin over two instances, even positions go to the
  // first). Fails the test for a request that is refused.
  static std::vector<uint64_t> submit_long(Engine& e, int n, int max_tokens, Outcomes& out) {
    std::vector<uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      auto id = e.submit(greedy_ids(prompt(i, 8), max_tokens), out.callback());
      EXPECT_TRUE(id.has_value()) << id.status().to_string();
      if (id) ids.push_back(*id);
    }
    return ids;
  }

  // Waits (bounded) until the engine's router has placed n requests. A test that kills an
  // instance must wait for this first: a request still on its way through the tokenizer when the
  // instance goes is routed to another and completes (a busy machine makes that hop slow).
  static bool wait_routed(Engine& e, uint64_t n) {
    const auto routed = [&] {
      uint64_t sum = 0;
      for (const auto& inst : e.instance_stats()) sum += inst.routed_cache + inst.routed_load + inst.routed_round_robin;
      return sum;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (routed() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return routed() >= n;
  }

  std::filesystem::path dir_;

 private:
  std::string name_;
  uint64_t seed_;
};

}  // namespace brigade::testing
