// llama.cpp's phimoe GGUF (Phi-3.5-MoE; models/gguf_phimoe.h): tests/fixtures/gguf_phimoe is the
// phimoe checkpoint written by llama.cpp's converter (scripts/make_gguf_phimoe_fixtures.py, a
// 512-token context over the original 256: the long factors), and its reference is llama.cpp
// itself on the file (expected.json), whose graph differs from transformers' (RMSNorms with
// biases, softmax top-2 renormalised, the converter's attention factor, no window). Also: the
// config as read beside the safetensors fixture's, each of llama.cpp's rules moving the logits,
// and the keys' refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cpu/cpu_backend.h"
#include "gguf_variants_util.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::gguf_path;
using testing::gguf_u32;

constexpr float kTol = 1e-4f;  // an F32 file against llama.cpp's run of it

// gguf_phimoe reads as tests/fixtures/phimoe where llama.cpp runs what transformers does (the
// attention and its biases, the experts' count, k and width, the head's bias, longrope's lists)
// and by llama.cpp's rules where it does not.
TEST(GgufPhimoe, ReadsWithLlamaCppsRules) {
  auto hf = Checkpoint::open(fixture_dir("phimoe"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  auto file = Checkpoint::open(gguf_path("gguf_phimoe"));
  ASSERT_TRUE(file.has_value()) << file.status().to_string();
  const ModelConfig& g = (*file)->config();
  EXPECT_EQ(g.arch, "phimoe");
  testing::expect_same_attention(g, h);
  EXPECT_EQ(g.n_kv_heads, h.n_kv_heads);
  EXPECT_TRUE(g.qkv_bias && g.o_bias && g.lm_head_bias && g.norm_bias);
  EXPECT_EQ(g.n_experts, h.n_experts);
  EXPECT_EQ(g.n_experts_per_tok, 2);
  EXPECT_EQ(g.moe_intermediate_size, h.moe_intermediate_size);
  EXPECT_EQ(g.n_moe_layers(), h.n_moe_layers());
  EXPECT_EQ(g.tie_embeddings, h.tie_embeddings);
  EXPECT_EQ(g.rope_scaling.long_factor, h.rope_scaling.long_factor);
  EXPECT_EQ(g.rope_scaling.short_factor, h.rope_scaling.short_factor);
  // llama.cpp's rules.
  EXPECT_FALSE(g.layer_norms) << "RMSNorms with biases";
  EXPECT_EQ(g.moe_scoring, MoeScoring::softmax);
  EXPECT_TRUE(g.norm_topk_prob);
  EXPECT_EQ(g.sliding_window, 0) << "the file's attention.sliding_window, which llama.cpp's phimoe ignores";
  EXPECT_EQ(g.rope_scaling.type, RopeScalingType::longrope);
  EXPECT_TRUE(g.rope_scaling.longrope_long) << "context_length 512 over original_context_length 256";
  EXPECT_NEAR(g.rope_scaling.attention_factor, std::sqrt(1.0 + std::log(2.0) / std::log(256.0)), 1e-6);
  const auto& gt = (*file)->tensors();
  for (const auto& [name, t] : (*hf)->tensors()) {
    if (name.find(".block_sparse_moe.") != std::string::npos) continue;  // (the Hub's experts one by one)
    EXPECT_EQ(gt.count(name), 1u) << name;
  }
  for (const char* name : {"model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.gate_proj"})
    EXPECT_EQ(gt.count(name), 1u) << name;
}

// Every case of expected.json (llama.cpp's run) within kTol, its greedy tokens and decode steps.
TEST(GgufPhimoe, MatchesLlamaCpp) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path("gguf_phimoe"), *backend);
  ASSERT_NE(model, nullptr);
  ASSERT_FALSE(testing::read_fixture_cases("gguf_phimoe").front().decode_logits.empty());
  testing::expect_fixture_cases_match(*model, *backend, "gguf_phimoe", kTol);
}

// What the file exercises: the norms' biases after RMSNorms, the head's bias, the attention factor,
// the long factors, the renormalised softmax routing (transformers' sparsemixer instead).
TEST(GgufPhimoe, LlamaCppsRulesMoveTheLogits) {
  const std::string path = gguf_path("gguf_phimoe");
  for (const auto& edit : std::vector<std::function<void(ModelConfig&)>>{
           [](ModelConfig& c) { c.norm_bias = false; },
           [](ModelConfig& c) { c.lm_head_bias = false; },
           [](ModelConfig& c) { c.rope_scaling.attention_factor = 1.0f; },
           [](ModelConfig& c) { c.rope_scaling.longrope_long = false; },
           [](ModelConfig& c) {
             c.moe_scoring = MoeScoring::sparsemixer;
             c.norm_topk_prob = false;
             c.router_jitter = 0.3f;
           }})
    EXPECT_GT(testing::max_diff_with_rules("gguf_phimoe", edit, path), 100 * testing::kLogitTol);
}

// A file without longrope's tensors: plain RoPE, no window; refused, naming the key or tensor: an
// attention factor without the factors (llama.cpp would scale plain RoPE), a factor that is not
// positive.
TEST(GgufPhimoe, KeysAndTheirRefusals) {
  const testing::TempDir dir("gguf_phimoe");
  const std::vector<testing::GgufKv> common = {
      testing::gguf_str("general.architecture", "phimoe"), gguf_u32("phimoe.block_count", 1),
      gguf_u32("phimoe.context_length", 64),              gguf_u32("phimoe.embedding_length", 64),
      gguf_u32("phimoe.feed_forward_length", 32),         gguf_u32("phimoe.attention.head_count", 4),
      gguf_u32("phimoe.expert_count", 4),                 gguf_u32("phimoe.expert_used_count", 2),
      gguf_u32("phimoe.attention.sliding_window", 8)};
  std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors = {
      {"token_embd.weight", {64, 128}},           {"output.bias", {128}},
      {"blk.0.ffn_gate_inp.weight", {64, 4}},     {"blk.0.ffn_gate_exps.weight", {64, 32, 4}},
      {"blk.0.ffn_up_exps.weight", {64, 32, 4}},  {"blk.0.ffn_down_exps.weight", {32, 64, 4}}};
  testing::write_gguf_zeros(dir.file("plain.gguf"), common, tensors);
  auto ck = Checkpoint::open(dir.file("plain.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "phimoe");
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::none);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_TRUE(c.lm_head_bias);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.moe_intermediate_size, 32);

  std::vector<testing::GgufKv> scaled = common;
  scaled.push_back({"phimoe.rope.scaling.attn_factor", 6, 0, 1.2f});
  testing::expect_refused(dir.file("scaled.gguf"), scaled, tensors, StatusCode::unsupported, "attn_factor");
  auto with = [&](std::vector<std::string> names) {
    auto t = tensors;
    for (const std::string& n : names) t.push_back({n, {8}});
    return t;
  };
  testing::expect_refused(dir.file("zero.gguf"), common, with({"rope_factors_short.weight"}), StatusCode::corrupt,
                          "rope_factors_short.weight");
}

}  // namespace
}  // namespace brigade
