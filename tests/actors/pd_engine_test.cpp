// PD separation end to end (docs/architecture.md "PD separation"): prefill instances hand each
// sequence with its KV pages to decode instances. Outputs equal a colocated instance's, token for
// token, greedy and seeded, at in-flight depth 1 and 2 with the radix cache on, with local and
// inline transfers; aborts at any time lose nothing and leak no page or buffer; a full decode
// pool makes hand-offs wait; a dead instance fails its own requests only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "actors/engine/engine_testing.h"
#include "brigade/engine.h"
#include "messages/blob.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

using testing::Outcomes;

class PdEngine : public testing::TinyModelTest {
 protected:
  PdEngine() : TinyModelTest("pd_engine_test", 23) {}

  // Steps of at most 32 tokens: every matmul stays below the BLAS threshold (cpu/ops.h
  // kBlasMinRows), so a row's result does not depend on what else its step holds, and colocated
  // and separated instances, which batch differently, must give the same tokens.
  InstanceConfig proto(int depth) const {
    EngineOptions o = testing::test_engine_options(model(), 1);
    InstanceConfig inst = o.topology.instances.front();
    inst.kv.memory_mb = 8;
    inst.scheduler.max_step_tokens = 32;
    inst.scheduler.max_inflight_steps = depth;
    return inst;
  }
  EngineOptions colocated(int depth) const {
    EngineOptions o = testing::test_engine_options(model(), 1);
    o.topology.instances = {proto(depth)};
    return o;
  }
  // p0 .. p{n_prefill-1} then d0 .. d{n_decode-1}.
  EngineOptions separated(int n_prefill, int n_decode, int depth) const {
    EngineOptions o = testing::test_engine_options(model(), 1);
    o.topology.instances.clear();
    for (int i = 0; i < n_prefill + n_decode; ++i) {
      InstanceConfig inst = proto(depth);
      const bool prefill = i < n_prefill;
      inst.role = prefill ? "prefill" : "decode";
      inst.name = (prefill ? "p" : "d") + std::to_string(prefill ? i : i - n_prefill);
      o.topology.instances.push_back(inst);
    }
    return o;
  }


  // A mixed batch: prompts of 3 to 120 tokens (several prefill chunks, shared prefixes for the
  // radix cache), greedy or seeded sampling with penalties, max_tokens 1 (finishes on the
  // prefill side) to 24.
  static std::vector<GenerateOptions> batch(bool seeded) {
    std::vector<GenerateOptions> reqs;
    for (int i = 0; i < 14; ++i) {
      std::vector<int32_t> p = prompt(i % 5, 3 + (i * 29) % 118);  // i % 5: shared prefixes
      GenerateOptions r = testing::greedy_ids(p, i == 3 ? 1 : 8 + (i * 7) % 17);
      if (seeded) {
        r.sampling.temperature = 0.9f;
        r.sampling.top_k = 40;
        r.sampling.seed = 1000 + static_cast<uint64_t>(i);
        if (i % 3 == 0) r.sampling.repetition_penalty = 1.3f;
        if (i % 4 == 1) r.sampling.presence_penalty = 0.5f;
      }
      reqs.push_back(std::move(r));
    }
    return reqs;
  }

  // No sequence holds a page (the prefix cache may), nothing runs or waits, no buffer is left.
  static void expect_drained(Engine& e) {
    for (const auto& inst : e.instance_stats()) {
      EXPECT_EQ(inst.stats.kv_pages_used, inst.stats.cache_pages) << inst.name << ": pages outside the cache leaked";
      EXPECT_EQ(inst.stats.n_running, 0) << inst.name;
      EXPECT_EQ(inst.stats.n_waiting, 0) << inst.name;
    }
    // The last hand-off message may still be finishing in its actor's handler when the final
    // token reaches the client (a loaded machine shows the gap): freed soon after, not leaked.
    for (int i = 0; i < 5000 && n_live_blobs() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(n_live_blobs(), 0u) << "every hand-off buffer was freed with its messages";
  }

};

std::vector<std::vector<int32_t>> run(const EngineOptions& o, const std::vector<GenerateOptions>& reqs,
                                      EngineStats* stats = nullptr) {
  auto e = Engine::create(o);
  EXPECT_TRUE(e.has_value()) << e.status().to_string();
  if (!e) return {};
  auto out = testing::generate_all(**e, reqs);
  if (stats) *stats = (*e)->stats();
  return out;
}

// The batch runs twice on the separated engine: the second time its prompts hit the prefill
// instance's radix cache.
TEST_F(PdEngine, GreedyTokensEqualColocatedAtDepthOneAndTwo) {
  const auto reqs = batch(/*seeded=*/false);
  for (int depth : {1, 2}) {
    const auto want = run(colocated(depth), reqs);
    ASSERT_EQ(want.size(), reqs.size());
    auto e = Engine::create(separated(1, 1, depth));
    ASSERT_TRUE(e.has_value()) << e.status().to_string();
    for (int pass = 0; pass < 2; ++pass) {
      const auto got = testing::generate_all(**e, reqs);
      for (size_t i = 0; i < reqs.size(); ++i) {
        EXPECT_EQ(got[i], want[i]) << "request " << i << " at depth " << depth << ", pass " << pass;
        EXPECT_EQ(got[i].size(), static_cast<size_t>(reqs[i].max_tokens));
      }
    }
    const auto per = (*e)->instance_stats();
    ASSERT_EQ(per.size(), 2u);
    EXPECT_EQ(per[0].role, "prefill");
    EXPECT_EQ(per[1].role, "decode");
    const uint64_t n_moved = 2 * (reqs.size() - 1);  // request 3 (max_tokens 1) ends on the prefill side
    EXPECT_EQ(per[0].stats.pd_transfers_out, n_moved);
    EXPECT_EQ(per[1].stats.pd_transfers_in, n_moved);
    EXPECT_EQ(per[0].stats.pd_bytes_out, per[1].stats.pd_bytes_in);
    EXPECT_GT(per[1].stats.pd_bytes_in, 0u);
    EXPECT_EQ(per[1].stats.pd_import_failures, 0u);
    EXPECT_EQ(per[0].stats.generated_tokens, 2 * reqs.size()) << "the prefill side samples first tokens only";
    EXPECT_EQ(per[1].stats.step_tokens, per[1].stats.generated_tokens)
        << "the decode instance computes one token per token it generates: never a prompt chunk";
    EXPECT_EQ(per[0].stats.requests_done + per[1].stats.requests_done, 2 * reqs.size());
    EXPECT_GT(per[0].stats.cache_hit_tokens, 0u) << "the second pass hits the prefill instance's radix cache";
    expect_drained(**e);
  }
}

// Salted requests (vLLM's cache_salt) hand off like others and give the same tokens; the
// prefill instance's cache serves a prompt again only under its own salt.
TEST_F(PdEngine, SaltedRequestsHitOnlyTheirOwnSaltsPages) {
  auto reqs = batch(/*seeded=*/false);
  const auto want = run(colocated(1), reqs);
  auto e = Engine::create(separated(1, 1, 1));
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  const auto hits = [&] { return (*e)->instance_stats()[0].stats.cache_hit_tokens; };
  const auto salted = [&](const std::string& salt) {
    std::vector<GenerateOptions> out;
    for (size_t i = 0; i < reqs.size(); ++i) {
      out.push_back(reqs[i]);
      out.back().cache_salt = salt + std::to_string(i);  // each prompt its own salt: no sharing
    }
    return out;
  };
  EXPECT_EQ(testing::generate_all(**e, salted("a")), want);
  EXPECT_EQ(hits(), 0u) << "every prompt had a salt of its own";
  EXPECT_EQ(testing::generate_all(**e, salted("b")), want);
  EXPECT_EQ(hits(), 0u) << "salt b found salt a's pages";
  EXPECT_EQ(testing::generate_all(**e, salted("b")), want);
  EXPECT_GT(hits(), 0u) << "salt b's own pages serve it again";
  expect_drained(**e);
}

TEST_F(PdEngine, SeededTokensEqualColocatedAtDepthOneAndTwo) {
  const auto reqs = batch(/*seeded=*/true);
  for (int depth : {1, 2}) {
    const auto want = run(colocated(depth), reqs);
    EngineStats s;
    const auto got = run(separated(1, 1, depth), reqs, &s);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i], want[i]) << "request " << i << " at depth " << depth;
    EXPECT_EQ(s.pd_transfers_in, reqs.size() - 1);
  }
}

TEST_F(PdEngine, InlineTransfersAndSeveralInstancesGiveTheSameTokens) {
  const auto reqs = batch(/*seeded=*/true);
  const auto want = run(colocated(2), reqs);
  EngineOptions o = separated(2, 2, 2);
  o.topology.pd.transfer = "inline";
  auto e = Engine::create(o);
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  const auto got = testing::generate_all(**e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i], want[i]) << "request " << i;
  const auto per = (*e)->instance_stats();
  EXPECT_EQ(per[2].stats.pd_transfers_in + per[3].stats.pd_transfers_in, reqs.size() - 1);
  EXPECT_GT(per[2].stats.pd_transfers_in, 0u) << "hand-offs spread over the decode instances";
  EXPECT_GT(per[3].stats.pd_transfers_in, 0u);
  expect_drained(**e);
}

// Aborts at random moments: at once (waiting on prefill or during it), on the first token (the
// hand-off is in flight) or later (on the decode side). Each request ends exactly once; no page
// or buffer is left behind, and the engine serves on.
TEST_F(PdEngine, AbortsAtEveryStageLoseNothingAndLeakNothing) {
  auto e = Engine::create(separated(1, 1, 2));
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  Engine& engine = **e;
  Outcomes out;
  std::vector<uint64_t> ids;
  std::mutex mu;
  std::map<uint64_t, int> cancel_after;  // events seen before cancelling (-1: at once)
  for (int i = 0; i < 24; ++i) {
    const int when = i % 4 == 0 ? -1 : i % 4 == 1 ? 1 : i % 4 == 2 ? 3 : 1000;
    auto seen = std::make_shared<int>(0);
    auto id = engine.submit(testing::greedy_ids(prompt(i, 20 + 13 * (i % 7)), 30),
                            out.callback([&engine, when, seen](const Event& ev) {
                              if (++*seen == when && ev.finish == FinishReason::none) engine.cancel(ev.request_id);
                            }));
    ASSERT_TRUE(id.has_value());
    if (when < 0) engine.cancel(*id);
    std::lock_guard<std::mutex> lock(mu);
    ids.push_back(*id);
    cancel_after[*id] = when;
  }
  ASSERT_TRUE(out.wait(ids.size())) << "every request ends, none hangs";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // late duplicates would show now
  for (uint64_t id : ids) {
    EXPECT_EQ(out.n_final(id), 1) << "request " << id << " ends exactly once";
    const Completion c = out.get(id);
    if (cancel_after[id] == 1000) {
      EXPECT_EQ(c.finish, FinishReason::length) << out.error(id);
    } else {
      EXPECT_TRUE(c.finish == FinishReason::abort || c.finish == FinishReason::length) << out.error(id);
    }
  }
  expect_drained(engine);
  auto c = engine.generate(testing::greedy_ids(prompt(99, 40), 6));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids.size(), 6u);
}

// A decode pool with room for about two sequences: hand-offs wait for pages, none fails.
TEST_F(PdEngine, AFullDecodePoolMakesHandOffsWait) {
  std::vector<GenerateOptions> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(testing::greedy_ids(prompt(i, 40 + i), 20));
  const auto want = run(colocated(2), reqs);
  EngineOptions o = separated(1, 1, 2);
  o.topology.instances[1].kv.pages = 9;  // 16-token pages: one sequence needs 4 to 5
  auto e = Engine::create(o);
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  const auto got = testing::generate_all(**e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i], want[i]) << "request " << i;
  const auto per = (*e)->instance_stats();
  EXPECT_EQ(per[1].stats.pd_transfers_in, reqs.size());
  EXPECT_EQ(per[1].stats.kv_pages_total, 9);
  expect_drained(**e);
}

TEST_F(PdEngine, ADeadDecodeInstanceFailsOnlyItsRequests) {
  auto e = Engine::create(separated(1, 2, 2));  // p0, d0, d1
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  Outcomes out;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) {
    auto id = (*e)->submit(testing::greedy_ids(prompt(i, 12), 1500), out.callback());
    ASSERT_TRUE(id.has_value());
    ids.push_back(*id);
  }
  // Wait until every request decodes somewhere, then kill d0's executor.
  for (int tries = 0; tries < 2000; ++tries) {
    const auto per = (*e)->instance_stats();
    if (per[1].stats.pd_transfers_in + per[2].stats.pd_transfers_in == ids.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto before = (*e)->instance_stats();
  ASSERT_EQ(before[1].stats.pd_transfers_in + before[2].stats.pd_transfers_in, ids.size());
  ASSERT_TRUE(kill_instance_executor_for_testing(**e, 1).is_ok());
  ASSERT_TRUE(out.wait(ids.size()));
  size_t n_error = 0, n_ok = 0;
  for (uint64_t id : ids) {
    const Completion c = out.get(id);
    if (c.finish == FinishReason::error) {
      ++n_error;
      const std::string why = out.error(id);
      EXPECT_TRUE(why.find("instance 'd0' stopped") != std::string::npos || why.find("executor failed") != std::string::npos)
          << why;
    } else {
      EXPECT_EQ(c.finish, FinishReason::length);
      EXPECT_EQ(c.token_ids.size(), 1500u);
      ++n_ok;
    }
  }
  EXPECT_EQ(n_error, before[1].stats.pd_transfers_in) << "d0's requests fail";
  EXPECT_EQ(n_ok, before[2].stats.pd_transfers_in) << "d1's go on";
  const auto per = (*e)->instance_stats();
  EXPECT_FALSE(per[1].serving);
  for (int i = 0; i < 3; ++i) {  // later hand-offs all go to d1
    auto c = (*e)->generate(testing::greedy_ids(prompt(50 + i, 8), 4));
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
  }
  EXPECT_EQ((*e)->instance_stats()[2].stats.pd_transfers_in, before[2].stats.pd_transfers_in + 3);
  // With no decode instance left, a request ends with an error after its prefill.
  ASSERT_TRUE(kill_instance_executor_for_testing(**e, 2).is_ok());
  for (int tries = 0; tries < 400 && (*e)->instance_stats()[2].serving; ++tries)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto c = (*e)->generate(testing::greedy_ids(prompt(60, 8), 4));
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.status().message().find("no decode instance is serving"), std::string::npos) << c.status().to_string();
}

TEST_F(PdEngine, ADeadPrefillInstanceFailsOnlyItsRequests) {
  auto e = Engine::create(separated(2, 1, 2));  // p0, p1, d0
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  ASSERT_TRUE(kill_instance_executor_for_testing(**e, 0).is_ok());
  for (int tries = 0; tries < 400 && (*e)->instance_stats()[0].serving; ++tries)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE((*e)->instance_stats()[0].serving);
  for (int i = 0; i < 4; ++i) {  // p1 prefills everything now
    auto c = (*e)->generate(testing::greedy_ids(prompt(i, 30), 5));
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    EXPECT_EQ(c->token_ids.size(), 5u);
  }
  EXPECT_EQ((*e)->instance_stats()[1].stats.pd_transfers_out, 4u);
  ASSERT_TRUE(kill_instance_executor_for_testing(**e, 1).is_ok());
  for (int tries = 0; tries < 400 && (*e)->instance_stats()[1].serving; ++tries)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto c = (*e)->generate(testing::greedy_ids(prompt(9, 8), 4));
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.status().message().find("no prefill instance is serving"), std::string::npos) << c.status().to_string();
}

// Under tensor parallelism a hand-off carries every rank's kv heads: rank 0 gathers the
// followers' parts of the pages on the prefill side and scatters them on the decode side.
TEST_F(PdEngine, TensorParallelInstancesHandOffEveryRanksHeads) {
  const auto reqs = batch(/*seeded=*/false);
  EngineOptions tp1 = separated(1, 1, 2);
  const auto want = run(tp1, reqs);
  ASSERT_EQ(want.size(), reqs.size());
  EngineOptions tp2 = separated(1, 1, 2);
  for (auto& inst : tp2.topology.instances) inst.executors.front().tp = 2;
  EngineStats s;
  const auto got = run(tp2, reqs, &s);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i], want[i]) << "request " << i;
  EXPECT_EQ(s.pd_transfers_in, reqs.size() - 1);
  EXPECT_EQ(s.pd_import_failures, 0u);
  EngineStats s1;
  run(tp1, reqs, &s1);
  EXPECT_EQ(s.pd_bytes_in, s1.pd_bytes_in) << "both ranks' halves of each page: the bytes of tp 1";
  EXPECT_EQ(n_live_blobs(), 0u);
}

TEST_F(PdEngine, PrefillAndDecodeSplitDifferentlyAreRefused) {
  EngineOptions o = separated(1, 1, 2);
  o.topology.instances[0].executors.front().tp = 2;
  auto e = Engine::create(o);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("one model and KV layout"), std::string::npos) << e.status().to_string();
  EXPECT_NE(e.status().message().find("tp=2"), std::string::npos) << e.status().to_string();
}

TEST_F(PdEngine, InstancesWithDifferentKvLayoutsAreRefused) {
  EngineOptions o = separated(1, 1, 2);
  o.topology.instances[1].kv.page_size = 8;
  auto e = Engine::create(o);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.status().message().find("one KV layout"), std::string::npos) << e.status().to_string();
}

}  // namespace
}  // namespace brigade
