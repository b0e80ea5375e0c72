// llama.cpp's glm4moe GGUF (GLM-4.5 / 4.5-Air / 4.6): tests/fixtures/gguf_glm4moe is the glm4_moe
// checkpoint written as llama.cpp's converter writes it (scripts/make_gguf_fixtures.py
// gguf_glm4moe: F32, with an MTP layer as blk.3, whose drafts tests/models/mtp_test.cpp checks), and its reference
// is transformers on that checkpoint without expert groups, which llama.cpp's glm4moe neither
// stores nor runs; llama.cpp itself reads the file within 3e-6 of it (llamacpp.json). Also: the
// config as read, each part moving the logits, the vocabulary (pre-tokenizer glm4) tokenizing as
// llama.cpp does, and refusals naming the key.
#include <gtest/gtest.h>

#include <algorithm>

#include "cpu/cpu_backend.h"
#include "gguf_vocab.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::read_fixture_cases;
using testing::TempDir;

constexpr float kTol = 5e-4f;  // as gguf_quant_test.cpp's F32 files

std::string fixture_path() { return fixture_dir("gguf_glm4moe") + "/model.gguf"; }

TEST(GgufGlm4Moe, ConfigAsLlamaCppReadsIt) {
  auto ck = Checkpoint::open(fixture_path());
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "glm4_moe");
  EXPECT_EQ(c.n_layers, 3) << "block_count 4 less the MTP layer";
  EXPECT_EQ(c.n_mtp_layers, 1) << "nextn_predict_layers: drafts under speculative method mtp (tests/models/mtp_test.cpp)";
  EXPECT_EQ(c.head_dim, 32) << "attention.key_length";
  EXPECT_EQ(c.rope_dims(), 16) << "rope.dimension_count";
  EXPECT_EQ(c.rope_style, RopeStyle::neox);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_EQ(c.shared_width(), 32);
  EXPECT_EQ(c.first_k_dense_replace, 1);
  EXPECT_EQ(c.n_moe_layers(), 2);
  EXPECT_EQ(c.moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(c.moe_score_bias);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_EQ(c.moe_group_score, MoeGroupScore::none);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  // eos <|endoftext|> and eom <|call|> (GLM's <|observation|>) end generation, and so does the toy
  // vocabulary's <|return|> (llama.cpp's texts); its eot <|end|> does not, beside <|return|> and
  // <|call|> (llama.cpp's harmony exception; gguf_eog_test.cpp).
  EXPECT_EQ(c.eos_ids, (std::vector<int>{120, 127, 121}));
  const auto& tensors = (*ck)->tensors();
  EXPECT_TRUE(tensors.contains("model.layers.1.mlp.gate.e_score_correction_bias"));
  EXPECT_TRUE(tensors.contains("model.layers.1.mlp.shared_experts.down_proj.weight"));
  EXPECT_TRUE(tensors.contains("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_EQ(tensors.at("model.layers.2.post_attention_layernorm.weight").shape, (std::vector<int64_t>{64}));
}

TEST(GgufGlm4Moe, MatchesTransformersAsLlamaCppReadsIt) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(fixture_path(), *backend, std::nullopt);
  ASSERT_NE(model, nullptr);
  for (const auto& fc : read_fixture_cases("gguf_glm4moe")) {
    const auto run = testing::run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kTol) << "prompt of " << fc.prompt.size();
    EXPECT_EQ(run.greedy, fc.greedy) << "prompt of " << fc.prompt.size();
    ASSERT_FALSE(fc.decode_logits.empty());
    const float d = testing::decode_max_diff(*model, *backend, fc);
    EXPECT_LE(d, kTol) << "prompt of " << fc.prompt.size();
    RecordProperty("max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
    RecordProperty("decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(d));
  }
  // The reference is what llama.cpp computes from the file.
  const auto ref = testing::load_fixture_json("gguf_glm4moe/llamacpp.json");
  ASSERT_FALSE(ref.is_discarded());
  for (const auto& d : ref["logits_max_diff"]) EXPECT_LE(d.get<double>(), 1e-4);
  // Five strings, one asking for BOS (which this vocabulary's file adds: add_bos_token true).
  testing::expect_tokenizes_as_llamacpp("gguf_glm4moe", 5);
}

// The parts the file's keys and tensors carry each move the logits far: the q/k norms, the
// routed scaling, the renormalisation, the selection bias and the shared expert.
TEST(GgufGlm4Moe, EachPartChangesTheResult) {
  const std::string path = fixture_path();
  const float far = 100 * kTol;
  using testing::max_diff_with_rules;
  EXPECT_GT(max_diff_with_rules("gguf_glm4moe", [](ModelConfig& c) { c.qk_norm = false; }, path), far);
  EXPECT_GT(max_diff_with_rules("gguf_glm4moe", [](ModelConfig& c) { c.routed_scaling_factor = 1.0f; }, path), far);
  EXPECT_GT(max_diff_with_rules("gguf_glm4moe", [](ModelConfig& c) { c.norm_topk_prob = false; }, path), far);
  EXPECT_GT(max_diff_with_rules("gguf_glm4moe", [](ModelConfig& c) { c.moe_score_bias = false; }, path), far);
  EXPECT_GT(max_diff_with_rules("gguf_glm4moe", [](ModelConfig& c) { c.n_shared_experts = 0; }, path), far);
  EXPECT_GT(max_diff_with_rules("gguf_glm4moe", [](ModelConfig& c) { c.rotary_dim = 0; }, path), far);
}

// A glm4moe GGUF of 2 layers (0 dense, 1 sparse) and one MTP block whose keys are those the
// converter writes less `drop`, plus `extra`, and whose tensors are zeros.
std::string write_header(const TempDir& dir, const std::string& file, const std::vector<std::string>& drop,
                         std::vector<testing::GgufKv> extra) {
  using testing::gguf_u32;
  const std::string a = "glm4moe.";
  std::vector<testing::GgufKv> kv = {
      testing::gguf_str("general.architecture", "glm4moe"), gguf_u32(a + "block_count", 3),
      gguf_u32(a + "context_length", 256), gguf_u32(a + "embedding_length", 64), gguf_u32(a + "feed_forward_length", 96),
      gguf_u32(a + "attention.head_count", 4), gguf_u32(a + "attention.head_count_kv", 2),
      gguf_u32(a + "attention.key_length", 32), gguf_u32(a + "attention.value_length", 32),
      gguf_u32(a + "rope.dimension_count", 16), gguf_u32(a + "expert_count", 4), gguf_u32(a + "expert_used_count", 2),
      gguf_u32(a + "expert_feed_forward_length", 32), gguf_u32(a + "expert_shared_count", 1),
      gguf_u32(a + "leading_dense_block_count", 1), gguf_u32(a + "expert_gating_func", 2),
      gguf_u32(a + "nextn_predict_layers", 1)};
  std::erase_if(kv, [&](const testing::GgufKv& e) { return std::find(drop.begin(), drop.end(), e.key) != drop.end(); });
  kv.insert(kv.end(), extra.begin(), extra.end());
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors = {
      {"token_embd.weight", {64, 8}},          {"blk.0.ffn_gate.weight", {64, 96}},
      {"blk.1.ffn_gate_inp.weight", {64, 4}},  {"blk.1.ffn_gate_exps.weight", {64, 32, 4}},
      {"blk.1.ffn_up_exps.weight", {64, 32, 4}}, {"blk.1.ffn_down_exps.weight", {32, 64, 4}}};
  const std::string path = dir.file(file);
  testing::write_gguf_zeros(path, kv, tensors);
  return path;
}

TEST(GgufGlm4Moe, DefaultsAndRefusalsNamingTheKey) {
  const TempDir dir("gguf_glm4moe_keys");
  // Without expert_gating_func llama.cpp's glm4moe gates by sigmoid; without expert_weights_scale
  // or _norm the weights are neither scaled nor renormalised; no attn_q.bias or q_norm tensors:
  // none of either (GLM-4.5-Air has no q/k norms).
  auto ck = Checkpoint::open(write_header(dir, "defaults.gguf", {"glm4moe.expert_gating_func"}, {}));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.moe_scoring, MoeScoring::sigmoid);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 1.0f);
  EXPECT_FALSE(c.norm_topk_prob || c.qkv_bias || c.qk_norm);
  struct Bad {
    std::vector<std::string> drop;
    std::vector<testing::GgufKv> extra;
    StatusCode code;
    std::string key;
  };
  using testing::gguf_u32;
  const std::vector<Bad> bad = {
      {{"glm4moe.expert_gating_func"}, {gguf_u32("glm4moe.expert_gating_func", 1)}, StatusCode::unsupported,
       "glm4moe.expert_gating_func"},
      {{"glm4moe.nextn_predict_layers"}, {gguf_u32("glm4moe.nextn_predict_layers", 3)}, StatusCode::corrupt,
       "glm4moe.nextn_predict_layers"},
      {{"glm4moe.expert_shared_count"}, {}, StatusCode::corrupt, "glm4moe.expert_shared_count"},
      {{"glm4moe.expert_feed_forward_length"}, {}, StatusCode::corrupt, "glm4moe.expert_feed_forward_length"},
      {{"glm4moe.leading_dense_block_count"}, {gguf_u32("glm4moe.leading_dense_block_count", 5)}, StatusCode::corrupt,
       "glm4moe.leading_dense_block_count"},
      // Layer 0 without its experts when no layer is dense.
      {{"glm4moe.leading_dense_block_count"}, {}, StatusCode::corrupt, "blk.0.ffn_gate_inp.weight"},
      {{"glm4moe.attention.value_length"}, {gguf_u32("glm4moe.attention.value_length", 64)}, StatusCode::unsupported,
       "glm4moe.attention.value_length"},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    auto refused = Checkpoint::open(write_header(dir, std::to_string(i) + ".gguf", bad[i].drop, bad[i].extra));
    ASSERT_FALSE(refused.has_value()) << bad[i].key;
    EXPECT_EQ(refused.status().code(), bad[i].code) << refused.status().to_string();
    EXPECT_NE(refused.status().message().find(bad[i].key), std::string::npos) << refused.status().to_string();
  }
}

}  // namespace
}  // namespace brigade
