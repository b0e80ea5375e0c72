// DeepSeek checkpoints served through the whole engine: a deepseek_v3 written by make-model
// (MLA with q_lora_rank, grouped sigmoid routing with the score bias, a shared expert, a dense
// first layer) and a deepseek_v2 (q_proj, softmax routing) give, through the scheduler's chunked
// prefill, the radix cache and shared steps, the greedy tokens of a full forward recomputed over
// the whole sequence for every token; the transformers fixture serves transformers' tokens; a
// second request reuses the first's cached latent pages; bad setups are refused at create.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include <unistd.h>

#include "brigade/engine.h"
#include "cpu/cpu_backend.h"
#include "models/make_model.h"
#include "models/model.h"
#include "tests/engine_test_util.h"
#include "tests/models/model_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

std::string synthetic_deepseek(const std::string& arch) {
  const fs::path p = fs::temp_directory_path() / ("brigade_ds_engine_" + arch + "_" + std::to_string(::getpid()));
  if (fs::exists(p / "model.safetensors")) return p.string();
  SyntheticModelSpec s = testing::tiny_llama(320, 256, 13);
  s.arch = arch;
  s.n_layers = 3;
  s.n_experts = 8;
  s.n_experts_per_tok = 2;
  s.moe_intermediate_size = 32;
  s.kv_lora_rank = 32;
  s.qk_nope_head_dim = 16;
  s.qk_rope_head_dim = 8;
  s.v_head_dim = 16;
  s.first_k_dense_replace = 1;
  s.n_group = 4;
  s.topk_group = 2;
  s.q_lora_rank = arch == "deepseek_v3" ? 24 : 0;
  s.n_shared_experts = arch == "deepseek_v3" ? 1 : 2;
  s.routed_scaling_factor = arch == "deepseek_v3" ? 2.5f : 1.0f;
  const Status st = write_synthetic_model(s, p.string());
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return p.string();
}

EngineOptions options(const std::string& model) {
  EngineOptions o = testing::test_engine_options(model, 1);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 16;
  inst.kv.page_size = 8;
  inst.scheduler.max_step_tokens = 16;  // the long prompt takes several chunked-prefill steps
  return o;
}

// Greedy tokens by brute force: for every new token, one forward over the whole sequence in a
// fresh KV cache (no chunking, no cached prefix, no decode path) and the argmax of its last row.
std::vector<int32_t> full_forward_greedy(const std::string& dir, std::vector<int32_t> seq, int n) {
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions lo;
  lo.progress = false;
  lo.max_batch_tokens = 128;
  auto model = Model::load(dir, *backend, lo);
  EXPECT_TRUE(model.has_value()) << model.status().to_string();
  if (!model) return {};
  const int vocab = (*model)->config().vocab_size, page = 16, pages = 8;
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    auto kv = KvCache::allocate(*backend, (*model)->kv_layout(pages, page, DType::f32));
    EXPECT_TRUE(kv.has_value());
    const auto logits = testing::run_step(**model, *backend, *kv, testing::make_step({{0, seq, 0, false}}, page, pages));
    out.push_back(testing::argmax(logits.data(), vocab));
    seq.push_back(out.back());
  }
  return out;
}

const std::vector<std::vector<int32_t>> kPrompts = {
    {1, 17, 200, 3, 99}, {5}, {7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
                               29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48},
    {60, 61, 4, 4, 4, 4}};

class DeepseekEngine : public ::testing::TestWithParam<std::string> {};

TEST_P(DeepseekEngine, GreedyTokensEqualAFullForwardPerToken) {
  const std::string dir = synthetic_deepseek(GetParam());
  auto engine = Engine::create(options(dir));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  std::vector<GenerateOptions> together;
  std::vector<std::vector<int32_t>> want;
  std::set<int32_t> distinct;
  for (const auto& p : kPrompts) {
    together.push_back(testing::greedy_ids(p, 10));
    want.push_back(full_forward_greedy(dir, p, 10));
    distinct.insert(want.back().begin(), want.back().end());
  }
  EXPECT_GT(distinct.size(), 4u);  // the model generates, not one repeated token
  EXPECT_EQ(testing::generate_all(**engine, together), want) << "prompts sharing steps";
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    auto c = (*engine)->generate(together[i]);  // again, alone: now over radix-cached pages
    ASSERT_TRUE(c.has_value()) << c.status().to_string();
    EXPECT_EQ(c->token_ids, want[i]) << "prompt " << i << " alone";
  }
}

// The long prompt's whole pages stay in the radix cache; a prompt that extends it is computed
// from the cached latent rows and still gives the full forward's tokens.
TEST_P(DeepseekEngine, ARadixCacheHitReusesTheLatentPages) {
  const std::string dir = synthetic_deepseek(GetParam());
  auto engine = Engine::create(options(dir));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  const auto& base = kPrompts[2];
  ASSERT_TRUE((*engine)->generate(testing::greedy_ids(base, 4)).has_value());
  std::vector<int32_t> longer = base;
  longer.insert(longer.end(), {100, 101, 102});
  auto cached = (*engine)->cached_prefix_tokens(longer);
  ASSERT_TRUE(cached.has_value()) << cached.status().to_string();
  EXPECT_GE(*cached, 40);  // five pages of eight tokens
  auto c = (*engine)->generate(testing::greedy_ids(longer, 6));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids, full_forward_greedy(dir, longer, 6));
}

INSTANTIATE_TEST_SUITE_P(Archs, DeepseekEngine, ::testing::Values("deepseek_v3", "deepseek_v2"));

TEST(DeepseekEngineFixture, ServesTransformersGreedyTokens) {
  auto engine = Engine::create(options(std::string(BRIGADE_FIXTURES) + "/deepseek_v3"));
  ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
  // expected.json's first case: transformers' greedy continuation of this prompt.
  auto c = (*engine)->generate(testing::greedy_ids({1, 20, 45, 102, 78, 6, 80}, 8));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->token_ids, (std::vector<int32_t>{28, 71, 32, 33, 125, 45, 88, 32}));
}

// Under tp the ranks split the heads (the latent cache is the same on each) and the experts, by
// columns or by expert: transformers' greedy tokens at tp 2 and 4.
TEST(DeepseekEngineFixture, ServesTransformersGreedyTokensUnderTensorAndExpertParallelism) {
  for (const int tp : {2, 4}) {
    for (const bool ep : {false, true}) {
      EngineOptions o = options(std::string(BRIGADE_FIXTURES) + "/deepseek_v3");
      o.topology.instances.front().executors.front().tp = tp;
      o.topology.instances.front().executors.front().expert_parallel = ep;
      auto engine = Engine::create(o);
      ASSERT_TRUE(engine.has_value()) << engine.status().to_string();
      auto c = (*engine)->generate(testing::greedy_ids({1, 20, 45, 102, 78, 6, 80}, 8));
      ASSERT_TRUE(c.has_value()) << c.status().to_string();
      EXPECT_EQ(c->token_ids, (std::vector<int32_t>{28, 71, 32, 33, 125, 45, 88, 32})) << "tp " << tp << " ep " << ep;
    }
  }
}

// MLA's latent cache is the same on every rank, so a prefill instance at tp 2 hands its pages
// (rank 0's bytes) to a decode instance at tp 1, and the reverse, with colocated tokens.
TEST(DeepseekEngineFixture, PdInstancesMayDifferInTpForTheLatentCache) {
  const std::string dir = synthetic_deepseek("deepseek_v3");
  std::vector<GenerateOptions> reqs;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> p;
    for (int j = 0; j < 9 + 11 * i; ++j) p.push_back((j * 37 + i * 5) % 300 + 3);
    reqs.push_back(testing::greedy_ids(p, 8));
  }
  EngineOptions colocated = options(dir);
  colocated.topology.instances.front().scheduler.max_step_tokens = 32;
  auto c = Engine::create(colocated);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  const auto want = testing::generate_all(**c, reqs);
  for (const auto& [prefill_tp, decode_tp] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
    EngineOptions o = colocated;
    InstanceConfig p = o.topology.instances.front(), d = p;
    p.name = "p0", p.role = "prefill", p.executors.front().tp = prefill_tp;
    d.name = "d0", d.role = "decode", d.executors.front().tp = decode_tp;
    o.topology.instances = {p, d};
    auto e = Engine::create(o);
    ASSERT_TRUE(e.has_value()) << e.status().to_string();
    EXPECT_EQ(testing::generate_all(**e, reqs), want) << "prefill tp " << prefill_tp << ", decode tp " << decode_tp;
    EXPECT_EQ((*e)->stats().pd_transfers_in, reqs.size());
    EXPECT_EQ((*e)->stats().pd_import_failures, 0u);
  }
}

TEST(DeepseekEngineFixture, BadSetupsAreRefusedAtCreate) {
  const std::string dir = synthetic_deepseek("deepseek_v3");
  EngineOptions tp = options(dir);
  tp.topology.instances.front().executors.front().tp = 3;
  auto e1 = Engine::create(tp);
  ASSERT_FALSE(e1.has_value());
  EXPECT_EQ(e1.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(e1.status().message().find("valid tp for this model: 1, 2, 4"), std::string::npos) << e1.status().message();
  EngineOptions int8 = options(dir);
  int8.topology.instances.front().kv.dtype = "int8";
  auto e2 = Engine::create(int8);
  ASSERT_FALSE(e2.has_value());
  EXPECT_NE(e2.status().message().find("MLA"), std::string::npos) << e2.status().message();
}

}  // namespace
}  // namespace brigade
