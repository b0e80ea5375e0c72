// llama.cpp's GGUF files of two Llama-decoder families (models/gguf_checkpoint.cpp), written by
// llama.cpp's own converter (scripts/make_gguf_llama_family_fixtures.py): gguf_smollm3 (NoPE every
// 4th layer, as llama.cpp's smollm3 hard-codes it), gguf_granite (Granite 3's multipliers as
// metadata) and Granite 3 MoE's gguf_granitemoe (every layer 8 experts, top 2, the Hub's fused
// input_linear split into ffn_gate_exps / ffn_up_exps) and gguf_granitemoe_shared (beside them the
// shared MLP as ffn_*_shexp; models/gguf_moe.h), and Granite 4.0's attention-only gguf_granite4
// (GraniteMoeHybridForCausalLM written as dense granite), F32, q/k rows permuted for llama.cpp's
// interleaved RoPE; llama.cpp itself runs them within 2e-5 of transformers (llamacpp.json). The
// config as llama.cpp reads it, and transformers' logits, decode steps and greedy tokens.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "gguf_variants_util.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::expect_refused;
using testing::fixture_dir;
using testing::gguf_path;

TEST(GgufLlamaFamily, ReadsTheConfigsAsLlamaCppDoes) {
  auto smol = Checkpoint::open(gguf_path("gguf_smollm3"));
  ASSERT_TRUE(smol.has_value()) << smol.status().to_string();
  const ModelConfig& s = (*smol)->config();
  EXPECT_EQ(s.arch, "smollm3");
  EXPECT_EQ(s.nope_layers, (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(s.rope_style, RopeStyle::interleaved) << "the converter permutes q/k for llama.cpp's RoPE";
  EXPECT_TRUE(s.tie_embeddings);
  auto granite = Checkpoint::open(gguf_path("gguf_granite"));
  ASSERT_TRUE(granite.has_value()) << granite.status().to_string();
  const ModelConfig& g = (*granite)->config();
  EXPECT_EQ(g.arch, "granite");
  EXPECT_FLOAT_EQ(g.embedding_multiplier, 3.0f);
  EXPECT_FLOAT_EQ(g.residual_multiplier, 0.5f);
  EXPECT_FLOAT_EQ(g.logits_scaling, 2.0f);
  EXPECT_FLOAT_EQ(g.attn_scale, 0.2f);
  EXPECT_EQ(g.rope_style, RopeStyle::interleaved);
  // Granite's RoPE switch off is refused by name.
  const testing::TempDir dir("gguf_granite_refused");
  using testing::gguf_u32;
  const std::vector<testing::GgufKv> kv = {testing::gguf_str("general.architecture", "granite"),
                                           gguf_u32("granite.block_count", 1),
                                           gguf_u32("granite.context_length", 64),
                                           gguf_u32("granite.embedding_length", 64),
                                           gguf_u32("granite.feed_forward_length", 96),
                                           gguf_u32("granite.attention.head_count", 4),
                                           testing::gguf_bool("granite.rope.scaling.finetuned", false)};
  const Status st = testing::open_gguf_zeros(dir.file("model.gguf"), kv, {{"token_embd.weight", {64, 256}}});
  EXPECT_EQ(st.code(), StatusCode::unsupported) << st.to_string();
  EXPECT_NE(st.message().find("rope.scaling.finetuned"), std::string::npos) << st.message();
}

// gguf_granitemoe and gguf_granitemoe_shared read as the Hugging Face fixtures of the same shape
// (tests/fixtures/granitemoe, granitemoeshared: read_granite's multipliers, read_granite_moe's
// experts), but for RoPE's layout (the converter's permutation); the experts and the router under
// the names load_moe_block's GGUF branch reads, each expert's gate and up apart, the shared MLP's
// as three matrices; every other tensor as the checkpoint's.
TEST(GgufLlamaFamily, GraniteMoeAsItsHuggingFaceConfigs) {
  for (const auto& [gguf, hub] : {std::pair{"gguf_granitemoe", "granitemoe"}, {"gguf_granitemoe_shared", "granitemoeshared"}}) {
    SCOPED_TRACE(gguf);
    auto hf = Checkpoint::open(fixture_dir(hub));
    ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
    auto file = Checkpoint::open(gguf_path(gguf));
    ASSERT_TRUE(file.has_value()) << file.status().to_string();
    const ModelConfig &h = (*hf)->config(), &g = (*file)->config();
    testing::expect_same_attention(g, h, testing::RopeRows::permuted);
    EXPECT_EQ(g.n_heads, h.n_heads);
    EXPECT_EQ(g.n_kv_heads, h.n_kv_heads);
    testing::expect_same_granite_scales(g, h);
    testing::expect_same_experts(g, h);
    EXPECT_EQ(g.tie_embeddings, h.tie_embeddings);
    const auto& gt = (*file)->tensors();
    for (const auto& [name, t] : (*hf)->tensors()) {
      if (name.find("block_sparse_moe.") != std::string::npos || name.find("shared_mlp.") != std::string::npos) continue;
      auto it = gt.find(name);
      ASSERT_NE(it, gt.end()) << name;
      EXPECT_EQ(it->second.shape, t.shape) << name;
    }
    using Shape = std::vector<int64_t>;
    const int64_t e = h.n_experts, inter = h.moe_intermediate_size, hidden = h.hidden_size, shared = h.shared_width();
    std::vector<std::pair<std::string, Shape>> moe = {{"mlp.gate.weight", {e, hidden}},
                                                      {"mlp.experts.gate_proj", {e, inter, hidden}},
                                                      {"mlp.experts.up_proj", {e, inter, hidden}},
                                                      {"mlp.experts.down_proj", {e, hidden, inter}}};
    if (shared > 0)
      moe.insert(moe.end(), {{"mlp.shared_experts.gate_proj.weight", {shared, hidden}},
                             {"mlp.shared_experts.up_proj.weight", {shared, hidden}},
                             {"mlp.shared_experts.down_proj.weight", {hidden, shared}}});
    for (int l = 0; l < g.n_layers; ++l)
      for (const auto& [suffix, shape] : moe) {
        const std::string name = "model.layers." + std::to_string(l) + "." + suffix;
        ASSERT_EQ(gt.count(name), 1u) << name;
        EXPECT_EQ(gt.at(name).shape, shape) << name;
      }
    // The Hub's two fused tensors per block (and per shared MLP) are three in the file.
    const size_t hub_moe = shared > 0 ? 5 : 3;
    EXPECT_EQ(gt.size(), (*hf)->tensors().size() + static_cast<size_t>(g.n_layers) * (moe.size() - hub_moe));
  }
}

// gguf_granite4: Granite 4.0's attention-only GraniteMoeHybridForCausalLM (granite-4.0-micro, 1b,
// 350m), which llama.cpp's converter writes as dense granite, reads as the Hugging Face fixture of
// the same shape (tests/fixtures/granite4_rope) does in the state-space path (arch granitemoehybrid,
// no mixers): the same multipliers, RoPE theta, heads and tied embedding; the shared MLP's fused
// input_linear as gate and up, output_linear as down, feed_forward_length wide.
TEST(GgufLlamaFamily, Granite4AttentionOnlyAsItsHuggingFaceConfig) {
  auto hf = Checkpoint::open(fixture_dir("granite4_rope"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  auto file = Checkpoint::open(gguf_path("gguf_granite4"));
  ASSERT_TRUE(file.has_value()) << file.status().to_string();
  const ModelConfig &h = (*hf)->config(), &g = (*file)->config();
  EXPECT_EQ(h.arch, "granitemoehybrid");
  EXPECT_FALSE(h.recurrent()) << "every layer attention";
  EXPECT_FALSE(h.nope) << "position_embedding_type rope";
  EXPECT_EQ(g.arch, "granite");
  EXPECT_EQ(g.rope_style, RopeStyle::interleaved) << "the converter permutes q/k as llama's";
  EXPECT_EQ(h.rope_style, RopeStyle::neox);
  EXPECT_FLOAT_EQ(g.rope_theta, 1e5f);
  EXPECT_EQ(g.rope_theta, h.rope_theta);
  EXPECT_EQ(g.rms_eps, h.rms_eps);
  EXPECT_EQ(g.n_layers, h.n_layers);
  EXPECT_EQ(g.hidden_size, h.hidden_size);
  EXPECT_EQ(g.n_heads, h.n_heads);
  EXPECT_EQ(g.n_kv_heads, h.n_kv_heads);
  EXPECT_EQ(g.head_dim, h.head_dim);
  testing::expect_same_granite_scales(g, h);
  EXPECT_TRUE(g.tie_embeddings);
  EXPECT_EQ(g.tie_embeddings, h.tie_embeddings);
  EXPECT_EQ(g.n_experts, 0);
  EXPECT_EQ(h.n_experts, 0);
  EXPECT_EQ(g.intermediate_size, h.shared_width()) << "the shared MLP is the dense SwiGLU";
  const auto& gt = (*file)->tensors();
  for (const auto& [name, t] : (*hf)->tensors()) {
    if (name.find("shared_mlp.") != std::string::npos) continue;
    auto it = gt.find(name);
    ASSERT_NE(it, gt.end()) << name;
    EXPECT_EQ(it->second.shape, t.shape) << name;
  }
  using Shape = std::vector<int64_t>;
  const int64_t ff = h.shared_width(), hidden = h.hidden_size;
  const std::vector<std::pair<std::string, Shape>> mlp = {
      {"mlp.gate_proj.weight", {ff, hidden}}, {"mlp.up_proj.weight", {ff, hidden}}, {"mlp.down_proj.weight", {hidden, ff}}};
  for (int l = 0; l < g.n_layers; ++l)
    for (const auto& [suffix, shape] : mlp) {
      const std::string name = "model.layers." + std::to_string(l) + "." + suffix;
      ASSERT_EQ(gt.count(name), 1u) << name;
      EXPECT_EQ(gt.at(name).shape, shape) << name;
    }
  // The Hub's two MLP tensors per layer are three in the file.
  EXPECT_EQ(gt.size(), (*hf)->tensors().size() + static_cast<size_t>(g.n_layers));
}

// head_count_kv as the converter writes it for Granite 4.0 (one count per block, here [2, 2, 2]) is
// read; counts that differ per block, or a list of another length, are refused by name.
TEST(GgufLlamaFamily, PerBlockKvHeadCounts) {
  const testing::TempDir dir("gguf_granite_kv_heads");
  using testing::gguf_u32;
  const std::vector<testing::GgufKv> common = {
      testing::gguf_str("general.architecture", "granite"), gguf_u32("granite.block_count", 2),
      gguf_u32("granite.context_length", 64),              gguf_u32("granite.embedding_length", 64),
      gguf_u32("granite.feed_forward_length", 96),         gguf_u32("granite.attention.head_count", 4)};
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors = {{"token_embd.weight", {64, 256}}};
  std::vector<testing::GgufKv> kv = common;
  kv.push_back(testing::gguf_i32s("granite.attention.head_count_kv", {2, 2}));
  testing::write_gguf_zeros(dir.file("same.gguf"), kv, tensors);
  auto ck = Checkpoint::open(dir.file("same.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_EQ((*ck)->config().n_kv_heads, 2);
  kv.back() = testing::gguf_i32s("granite.attention.head_count_kv", {2, 4});
  expect_refused(dir.file("differ.gguf"), kv, tensors, StatusCode::unsupported, "head_count_kv");
  kv.back() = testing::gguf_i32s("granite.attention.head_count_kv", {2, 2, 2});
  expect_refused(dir.file("length.gguf"), kv, tensors, StatusCode::corrupt, "head_count_kv");
  kv.back() = testing::gguf_i32s("granite.attention.head_count_kv", {0, 0});
  expect_refused(dir.file("zero.gguf"), kv, tensors, StatusCode::corrupt, "head_count_kv");
}

// What the fixtures exercise: the top-k softmax renormalised (the softmax over all instead), and
// the shared MLP beside the experts (dropped).
TEST(GgufLlamaFamily, GraniteMoeRoutingAndSharedMlpChangeTheResult) {
  EXPECT_GT(testing::max_diff_with_rules("gguf_granitemoe", [](ModelConfig& c) { c.norm_topk_prob = false; },
                                         gguf_path("gguf_granitemoe")),
            100 * testing::kLogitTol);
  EXPECT_GT(testing::max_diff_with_rules("gguf_granitemoe_shared",
                                         [](ModelConfig& c) { c.shared_expert_intermediate_size = 0; },
                                         gguf_path("gguf_granitemoe_shared")),
            100 * testing::kLogitTol);
}

// granitemoe: expert_count, expert_used_count and logit_scale required (logit_scale by llama.cpp's
// loader too), expert_used_count at most expert_count, Granite's RoPE switch on; each refusal
// names the key. expert_shared_feed_forward_length 0 is no shared MLP (arch granitemoe).
TEST(GgufLlamaFamily, GraniteMoeKeysAndTheirRefusals) {
  const testing::TempDir dir("gguf_granitemoe_keys");
  using testing::gguf_u32;
  const std::vector<testing::GgufKv> common = {
      testing::gguf_str("general.architecture", "granitemoe"), gguf_u32("granitemoe.block_count", 1),
      gguf_u32("granitemoe.context_length", 64),              gguf_u32("granitemoe.embedding_length", 64),
      gguf_u32("granitemoe.feed_forward_length", 32),         gguf_u32("granitemoe.attention.head_count", 4),
      gguf_u32("granitemoe.expert_count", 8),                 gguf_u32("granitemoe.expert_used_count", 2),
      {"granitemoe.logit_scale", 6, 0, 2.0f}};
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors = {
      {"token_embd.weight", {64, 256}},            {"blk.0.ffn_gate_inp.weight", {64, 8}},
      {"blk.0.ffn_gate_exps.weight", {64, 32, 8}}, {"blk.0.ffn_up_exps.weight", {64, 32, 8}},
      {"blk.0.ffn_down_exps.weight", {32, 64, 8}}};
  std::vector<testing::GgufKv> kv = common;
  kv.push_back(gguf_u32("granitemoe.expert_shared_feed_forward_length", 0));
  testing::write_gguf_zeros(dir.file("no_shared.gguf"), kv, tensors);
  auto ck = Checkpoint::open(dir.file("no_shared.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_EQ((*ck)->config().arch, "granitemoe");
  EXPECT_EQ((*ck)->config().shared_width(), 0);
  EXPECT_FLOAT_EQ((*ck)->config().logits_multiplier(), 0.5f);

  for (const char* key : {"granitemoe.expert_count", "granitemoe.expert_used_count", "granitemoe.logit_scale"}) {
    kv.clear();
    for (const testing::GgufKv& e : common)
      if (e.key != key) kv.push_back(e);
    expect_refused(dir.file("missing.gguf"), kv, tensors, StatusCode::corrupt, key);
  }
  kv = common;
  kv[7] = gguf_u32("granitemoe.expert_used_count", 9);
  expect_refused(dir.file("used.gguf"), kv, tensors, StatusCode::corrupt, "expert_used_count");
  kv = common;
  kv.push_back(testing::gguf_bool("granitemoe.rope.scaling.finetuned", false));
  expect_refused(dir.file("no_rope.gguf"), kv, tensors, StatusCode::unsupported, "rope.scaling.finetuned");
  kv = common;
  kv[8] = {"granitemoe.logit_scale", 6, 0, 0.0f};
  expect_refused(dir.file("scale0.gguf"), kv, tensors, StatusCode::corrupt, "logit_scale");
}

class GgufLlamaFamilyF32 : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufLlamaFamilyF32, LogitsDecodeAndGreedyTokensMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path(GetParam()), *backend);
  ASSERT_NE(model, nullptr);
  testing::expect_fixture_cases_match(*model, *backend, GetParam(), 5e-4f);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufLlamaFamilyF32,
                         ::testing::Values("gguf_smollm3", "gguf_granite", "gguf_granitemoe", "gguf_granitemoe_shared",
                                           "gguf_granite4"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace brigade
