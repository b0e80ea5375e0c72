// Kimi Linear in GGUF, written by llama.cpp's own converter from the kimi_linear checkpoint
// (scripts/make_gguf_kimi_linear_fixtures.py: llama.cpp's `kimi-linear`, models/gguf_kimi_linear.h),
// with llama.cpp's run of the file (llama-cpp-python 0.3.36) as the reference: every prompt
// position, the greedy continuation and every cached decode step (the KDA state carried across
// steps). llama.cpp's logits are within 2.5e-5 of transformers' on the checkpoint (llamacpp.json).
#include <gtest/gtest.h>

#include <cstdio>

#include "cpu/cpu_backend.h"
#include "gguf_variants_util.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::expect_refused;
using testing::gguf_path;
using testing::open_config;

constexpr float kTol = 1e-4f;  // F32 file against llama.cpp
constexpr const char* kFixture = "gguf_kimi_linear";

TEST(GgufKimiLinear, ConfigAsTheCheckpoints) {
  auto hf = Checkpoint::open(fixture_dir("kimi_linear"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  const ModelConfig g = open_config(kFixture);
  EXPECT_EQ(g.arch, "kimi_linear");
  EXPECT_EQ(g.ssm_layers, h.ssm_layers) << "attention.head_count_kv 0 for the KDA blocks";
  EXPECT_TRUE(g.ssm.kda && g.nope);
  EXPECT_EQ(g.ssm.layout.n_heads, h.ssm.layout.n_heads);
  EXPECT_EQ(g.ssm.layout.n_groups, h.ssm.layout.n_groups);
  EXPECT_EQ(g.ssm.layout.head_dim, h.ssm.layout.head_dim);
  EXPECT_EQ(g.ssm.layout.state_size, h.ssm.layout.state_size);
  EXPECT_EQ(g.ssm.layout.conv_kernel, h.ssm.layout.conv_kernel);
  EXPECT_EQ(g.n_heads, h.n_heads);
  EXPECT_EQ(g.q_lora_rank, h.q_lora_rank);
  EXPECT_EQ(g.kv_lora_rank, h.kv_lora_rank);
  EXPECT_EQ(g.qk_nope_head_dim, h.qk_nope_head_dim);
  EXPECT_EQ(g.qk_rope_head_dim, h.qk_rope_head_dim);
  EXPECT_EQ(g.v_head_dim, h.v_head_dim);
  EXPECT_NEAR(g.attn_scale, h.attn_scale, 1e-7f);
  EXPECT_EQ(g.n_experts, h.n_experts);
  EXPECT_EQ(g.n_experts_per_tok, h.n_experts_per_tok);
  EXPECT_EQ(g.n_shared_experts, h.n_shared_experts);
  EXPECT_EQ(g.moe_intermediate_size, h.moe_intermediate_size);
  EXPECT_EQ(g.first_k_dense_replace, h.first_k_dense_replace);
  EXPECT_EQ(g.moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(g.moe_score_bias);
  EXPECT_TRUE(g.norm_topk_prob);
  EXPECT_FLOAT_EQ(g.routed_scaling_factor, h.routed_scaling_factor);
  EXPECT_FLOAT_EQ(g.mla_norm_eps, g.rms_eps) << "llama.cpp's latent norms: layer_norm_rms_epsilon";
}

// Every case of expected.json (llama.cpp's run) within kTol at every prompt position and cached
// decode step, and its greedy tokens.
TEST(GgufKimiLinear, MatchesLlamaCpp) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path(kFixture), *backend);
  ASSERT_NE(model, nullptr);
  testing::expect_fixture_cases_match(*model, *backend, kFixture, kTol);
  std::string measured;
  for (const auto& fc : testing::read_fixture_cases(kFixture)) {
    char line[96];
    const float prefill = testing::run_fixture_case(*model, *backend, fc).max_abs_diff;
    const float decode = testing::decode_max_diff(*model, *backend, fc);
    std::snprintf(line, sizeof(line), "%zu tokens: %.3g / decode %.3g; ", fc.prompt.size(), prefill, decode);
    measured += line;
  }
  RecordProperty("max_abs_diff", measured);
}

// A small kimi-linear file's keys (testing::moe_file_keys' MoE, 2 blocks: KDA then MLA) and what is
// refused, naming the key: head_count_kv as one count (the block kinds come from its list), softmax
// gating, no gating key (llama.cpp requires it), the KDA or MLA widths missing.
TEST(GgufKimiLinear, KeysAndTheirRefusals) {
  const testing::TempDir dir("gguf_kimi_linear");
  using testing::gguf_u32;
  const std::string a = "kimi-linear.";
  std::vector<testing::GgufKv> common = testing::moe_file_keys("kimi-linear", 2, 1, 1);
  for (const auto& [key, v] : std::vector<std::pair<std::string, uint32_t>>{
           {"kda.head_dim", 16}, {"ssm.conv_kernel", 4}, {"attention.kv_lora_rank", 32}, {"rope.dimension_count", 8},
           {"attention.key_length_mla", 24}, {"attention.value_length_mla", 16}, {"expert_gating_func", 2}})
    common.push_back(gguf_u32(a + key, v));
  common.push_back(testing::gguf_i32s(a + "attention.head_count_kv", {0, 1}));
  const testing::GgufTensorShapes tensors = testing::moe_file_tensors(2, 1);
  testing::write_gguf_zeros(dir.file("plain.gguf"), common, tensors);
  auto ck = Checkpoint::open(dir.file("plain.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "kimi_linear");
  EXPECT_EQ(c.ssm_layers, (std::vector<bool>{true, false}));
  EXPECT_EQ(c.ssm.layout.n_heads, 4) << "attention.head_count";
  EXPECT_EQ(c.qk_nope_head_dim, 16);
  EXPECT_TRUE(c.norm_topk_prob) << "llama.cpp's graph renormalises whatever expert_weights_norm says";

  const auto with = [&](const std::string& key, const testing::GgufKv* replacement) {
    std::vector<testing::GgufKv> kv;
    for (const testing::GgufKv& e : common)
      if (e.key != key) kv.push_back(e);
    if (replacement != nullptr) kv.push_back(*replacement);
    return kv;
  };
  const testing::GgufKv one_count = gguf_u32(a + "attention.head_count_kv", 1);
  const testing::GgufKv softmax = gguf_u32(a + "expert_gating_func", 1);
  expect_refused(dir.file("r.gguf"), with(a + "attention.head_count_kv", &one_count), tensors, StatusCode::corrupt,
                 "attention.head_count_kv");
  expect_refused(dir.file("r.gguf"), with(a + "expert_gating_func", &softmax), tensors, StatusCode::unsupported,
                 "expert_gating_func");
  for (const std::string key : {"expert_gating_func", "kda.head_dim", "attention.key_length_mla"})
    expect_refused(dir.file("r.gguf"), with(a + key, nullptr), tensors, StatusCode::corrupt, key);
}

}  // namespace
}  // namespace brigade
