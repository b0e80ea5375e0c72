// llama.cpp's dots1 GGUF files (dots.llm1; models/gguf_llama_variants.h), gguf_dots1 written by
// llama.cpp's own converter (scripts/make_gguf_llama_variants_fixtures.py) from a tiny
// Dots1ForCausalLM: its config as the Hugging Face fixture's (tests/fixtures/dots1, read_dots1's
// fields), what the file exercises, and the keys llama.cpp's loader reads with their refusals. The
// logits: GgufLlamaVariantsF32 (gguf_llama_variants_test.cpp).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gguf_variants_util.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::expect_refused;
using testing::fixture_dir;
using testing::gguf_path;

// gguf_dots1 reads as tests/fixtures/dots1 (its checkpoint without the window and with as many KV
// heads as query heads, which llama.cpp's dots1 requires): qwen3's attention, the dense layer 0,
// then 8 experts in 2 groups, top 2 by sigmoid + selection bias, renormalised, times 2.5, beside
// 2 shared experts; the tensors under the names load_moe_block's GGUF branch reads.
TEST(GgufDots1, ReadsAsItsHuggingFaceConfig) {
  auto hf = Checkpoint::open(fixture_dir("dots1"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  auto file = Checkpoint::open(gguf_path("gguf_dots1"));
  ASSERT_TRUE(file.has_value()) << file.status().to_string();
  const ModelConfig& g = (*file)->config();
  testing::expect_same_attention(g, h);
  EXPECT_EQ(g.n_kv_heads, g.n_heads);
  EXPECT_EQ(g.qkv_bias, h.qkv_bias);
  EXPECT_EQ(g.o_bias, h.o_bias);
  EXPECT_EQ(g.sliding_window, 0);
  testing::expect_same_experts(g, h);
  EXPECT_EQ(g.first_k_dense_replace, h.first_k_dense_replace);
  EXPECT_EQ(g.n_shared_experts, h.n_shared_experts);
  EXPECT_EQ(g.n_group, h.n_group);
  EXPECT_EQ(g.topk_group, h.topk_group);
  EXPECT_EQ(g.moe_group_score, h.moe_group_score);
  EXPECT_EQ(g.tie_embeddings, h.tie_embeddings);
  const auto& gt = (*file)->tensors();
  for (const auto& [name, t] : (*hf)->tensors()) {
    if (name.find(".mlp.experts.") != std::string::npos) continue;  // (the Hub's experts one by one)
    EXPECT_EQ(gt.count(name), 1u) << name;
  }
  const int64_t hidden = g.hidden_size, e = g.n_experts, inter = g.moe_intermediate_size;
  for (int l = g.first_k_dense_replace; l < g.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.";
    ASSERT_EQ(gt.count(p + "experts.gate_proj"), 1u) << p;
    EXPECT_EQ(gt.at(p + "experts.gate_proj").shape, (std::vector<int64_t>{e, inter, hidden}));
    EXPECT_EQ(gt.at(p + "experts.down_proj").shape, (std::vector<int64_t>{e, hidden, inter}));
    EXPECT_EQ(gt.at(p + "gate.e_score_correction_bias").shape, (std::vector<int64_t>{e}));
    EXPECT_EQ(gt.at(p + "shared_experts.gate_proj.weight").shape, (std::vector<int64_t>{g.shared_width(), hidden}));
  }
}

// What gguf_dots1 exercises: the expert groups (ignored), the selection bias (dropped), the
// renormalisation (off), the shared experts (dropped).
TEST(GgufDots1, GroupsSelectionBiasAndSharedExpertsChangeTheResult) {
  const std::string path = gguf_path("gguf_dots1");
  for (const auto& edit : std::vector<std::function<void(ModelConfig&)>>{
           [](ModelConfig& c) { c.moe_group_score = MoeGroupScore::none; },
           [](ModelConfig& c) { c.moe_score_bias = false; },
           [](ModelConfig& c) { c.norm_topk_prob = false; },
           [](ModelConfig& c) { c.n_shared_experts = 0; }})
    EXPECT_GT(testing::max_diff_with_rules("gguf_dots1", edit, path), 100 * testing::kLogitTol);
}

// dots1's keys as llama.cpp's loader reads them: without expert_gating_func (which llama.cpp
// cannot run) sigmoid, dots.llm1's; no groups, scale or renormalisation where the keys are absent;
// no selection bias where exp_probs_b is not stored. Refused, naming the key: softmax gating,
// expert_shared_count and expert_feed_forward_length missing, groups that do not fit the experts.
TEST(GgufDots1, KeysAndTheirRefusals) {
  const testing::TempDir dir("gguf_dots1");
  using testing::gguf_u32;
  const std::vector<testing::GgufKv> common = testing::moe_file_keys("dots1", 2, 1, 2);
  const testing::GgufTensorShapes tensors = testing::moe_file_tensors(2, 2);
  testing::write_gguf_zeros(dir.file("plain.gguf"), common, tensors);
  auto ck = Checkpoint::open(dir.file("plain.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "dots1");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.moe_scoring, MoeScoring::sigmoid);
  EXPECT_FALSE(c.moe_score_bias);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.routed_scaling_factor, 1.0f);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.n_moe_layers(), 1);
  EXPECT_EQ(c.shared_width(), 32);
  EXPECT_FALSE(c.shared_gate);

  const std::vector<std::tuple<testing::GgufKv, StatusCode, std::string>> refused = {
      {gguf_u32("dots1.expert_gating_func", 1), StatusCode::unsupported, "expert_gating_func"},
      {gguf_u32("dots1.expert_group_count", 3), StatusCode::corrupt, "expert_group_count"}};
  for (const auto& [extra, code, key] : refused) {
    std::vector<testing::GgufKv> kv = common;
    kv.push_back(extra);
    expect_refused(dir.file("refused.gguf"), kv, tensors, code, key);
  }
  for (const std::string key : {"dots1.expert_shared_count", "dots1.expert_feed_forward_length"}) {
    std::vector<testing::GgufKv> kv;
    for (const testing::GgufKv& e : common)
      if (e.key != key) kv.push_back(e);
    expect_refused(dir.file("missing.gguf"), kv, tensors, StatusCode::corrupt, key);
  }
}

}  // namespace
}  // namespace brigade
