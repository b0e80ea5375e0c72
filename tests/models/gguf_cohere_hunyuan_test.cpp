// llama.cpp's GGUF files of Cohere's Command R family and Tencent's Hunyuan MoE
// (models/gguf_llama_variants.h), written by llama.cpp's own converter
// (scripts/make_gguf_llama_variants_fixtures.py): their configs as the Hugging Face fixtures', the
// keys llama.cpp requires and what brigade refuses by name. Their logits against transformers:
// gguf_llama_variants_test.cpp's GgufLlamaVariantsF32.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "gguf_variants_util.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::expect_refused;
using testing::fixture_dir;
using testing::gguf_path;
using testing::open_config;

// gguf_cohere2 reads as the Hugging Face fixture of the same shape (tests/fixtures/cohere2,
// read_cohere's fields), tensor for tensor; gguf_command_r as Command R+'s layer (the cohere
// fixture's, 64 layers deep): its per-head q/k norms as the checkpoint's [n_heads, head_dim].
TEST(GgufLlamaVariants, CohereAsTheirHuggingFaceConfigs) {
  auto hf = Checkpoint::open(fixture_dir("cohere2"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  auto gguf = Checkpoint::open(gguf_path("gguf_cohere2"));
  ASSERT_TRUE(gguf.has_value()) << gguf.status().to_string();
  const ModelConfig& g = (*gguf)->config();
  EXPECT_EQ(g.arch, "cohere2");
  testing::expect_same_attention(g, h);
  EXPECT_TRUE(g.layer_norms && g.parallel_blocks && !g.qk_norm);
  EXPECT_EQ(g.layer_norms, h.layer_norms);
  EXPECT_EQ(g.parallel_blocks, h.parallel_blocks);
  EXPECT_EQ(g.logit_scale, h.logit_scale);
  EXPECT_FLOAT_EQ(g.logit_scale, 0.125f);
  EXPECT_EQ(g.rope_style, RopeStyle::interleaved);
  EXPECT_EQ(g.sliding_window, 8);
  EXPECT_EQ(g.sliding_window, h.sliding_window);
  EXPECT_EQ(g.sliding_layers, (std::vector<bool>{true, true, true, false})) << "llama.cpp's default pattern 4";
  EXPECT_EQ(g.sliding_layers, h.sliding_layers);
  EXPECT_EQ(g.nope_layers, (std::vector<bool>{false, false, false, true})) << "RoPE on the sliding layers only";
  EXPECT_EQ(g.nope_layers, h.nope_layers);
  EXPECT_TRUE(g.tie_embeddings && h.tie_embeddings);
  EXPECT_FALSE(g.qkv_bias || g.o_bias || g.mlp_bias);
  ASSERT_EQ((*gguf)->tensors().size(), (*hf)->tensors().size());
  for (const auto& [name, t] : (*hf)->tensors()) {
    auto it = (*gguf)->tensors().find(name);
    ASSERT_NE(it, (*gguf)->tensors().end()) << name;
    EXPECT_EQ(it->second.shape, t.shape) << name;
  }

  const ModelConfig r = open_config("gguf_command_r");
  EXPECT_EQ(r.arch, "cohere");
  EXPECT_EQ(r.n_layers, 64);
  EXPECT_TRUE(r.layer_norms && r.parallel_blocks && r.qk_norm && !r.qk_norm_whole && !r.qk_norm_after_rope);
  EXPECT_EQ(r.rope_style, RopeStyle::interleaved);
  EXPECT_FLOAT_EQ(r.logit_scale, 0.25f);
  EXPECT_FLOAT_EQ(r.rms_eps, 1e-5f) << "attention.layer_norm_epsilon";
  EXPECT_EQ(r.sliding_window, 0);
  EXPECT_TRUE(r.nope_layers.empty());
  EXPECT_TRUE(r.tie_embeddings);
  auto ck = Checkpoint::open(gguf_path("gguf_command_r"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const auto& tensors = (*ck)->tensors();
  ASSERT_EQ(tensors.count("model.layers.63.self_attn.q_norm.weight"), 1u);
  EXPECT_EQ(tensors.at("model.layers.63.self_attn.q_norm.weight").shape, (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(tensors.at("model.layers.63.self_attn.k_norm.weight").shape, (std::vector<int64_t>{1, 8}));
  EXPECT_EQ(tensors.count("model.layers.0.post_attention_layernorm.weight"), 0u) << "one norm per layer";
  EXPECT_EQ(tensors.count("lm_head.weight"), 0u);
}

// command-r: logit_scale absent is no scale (llama.cpp's default 0); q/k norms wherever the file
// has them (llama.cpp loads them only at 64 layers or more; brigade, as transformers, by the
// file). cohere2: logit_scale, attention.sliding_window and attention.layer_norm_epsilon
// required (by llama.cpp's loader too), sliding_window_pattern as a count or one bool per layer,
// a partial rotary width refused; each naming the key.
TEST(GgufLlamaVariants, CohereKeysAndTheirRefusals) {
  const testing::TempDir dir("gguf_cohere");
  using testing::gguf_u32;
  auto common = [](const std::string& a) {
    return std::vector<testing::GgufKv>{
        testing::gguf_str("general.architecture", a),  gguf_u32(a + ".block_count", 2),
        gguf_u32(a + ".context_length", 64),          gguf_u32(a + ".embedding_length", 64),
        gguf_u32(a + ".feed_forward_length", 96),     gguf_u32(a + ".attention.head_count", 4),
        {a + ".attention.layer_norm_epsilon", 6, 0, 1e-5f}};
  };
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> embed = {{"token_embd.weight", {64, 256}}};
  std::vector<std::pair<std::string, std::vector<uint64_t>>> normed = embed;
  for (const std::string l : {"0", "1"})  // {head_dim, n_head} as stored
    for (const char* n : {".attn_q_norm.weight", ".attn_k_norm.weight"}) normed.push_back({"blk." + l + n, {16, 4}});
  testing::write_gguf_zeros(dir.file("command_r.gguf"), common("command-r"), normed);
  auto ck = Checkpoint::open(dir.file("command_r.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_EQ((*ck)->config().logit_scale, 0.0f) << "no logit_scale: none";
  EXPECT_TRUE((*ck)->config().qk_norm) << "two layers, q/k norms in the file";
  ASSERT_EQ((*ck)->tensors().count("model.layers.1.self_attn.k_norm.weight"), 1u);
  EXPECT_EQ((*ck)->tensors().at("model.layers.1.self_attn.k_norm.weight").shape, (std::vector<int64_t>{4, 16}));

  std::vector<testing::GgufKv> kv = common("command-r");
  kv.pop_back();
  expect_refused(dir.file("no_eps.gguf"), kv, embed, StatusCode::corrupt, "attention.layer_norm_epsilon");

  auto cohere2 = [&] {
    std::vector<testing::GgufKv> c = common("cohere2");
    c.push_back({"cohere2.logit_scale", 6, 0, 0.25f});
    c.push_back(gguf_u32("cohere2.attention.sliding_window", 8));
    return c;
  };
  kv = cohere2();
  kv.push_back(gguf_u32("cohere2.attention.sliding_window_pattern", 2));
  testing::write_gguf_zeros(dir.file("pattern2.gguf"), kv, embed);
  ck = Checkpoint::open(dir.file("pattern2.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_EQ((*ck)->config().sliding_layers, (std::vector<bool>{true, false}));
  EXPECT_EQ((*ck)->config().nope_layers, (std::vector<bool>{false, true}));

  kv = cohere2();
  testing::GgufKv pattern{"cohere2.attention.sliding_window_pattern", 9};
  pattern.elem_type = 7;
  pattern.i32s = {1, 0, 1};
  kv.push_back(pattern);
  expect_refused(dir.file("pattern3.gguf"), kv, embed, StatusCode::corrupt, "sliding_window_pattern");
  kv = cohere2();
  kv.erase(kv.end() - 2);
  expect_refused(dir.file("no_scale.gguf"), kv, embed, StatusCode::corrupt, "cohere2.logit_scale");
  kv = cohere2();
  kv.pop_back();
  expect_refused(dir.file("no_window.gguf"), kv, embed, StatusCode::corrupt, "cohere2.attention.sliding_window");
  kv = cohere2();
  kv.push_back(gguf_u32("cohere2.rope.dimension_count", 8));  // the converter's rotary_pct 0.5
  expect_refused(dir.file("partial.gguf"), kv, embed, StatusCode::unsupported, "rope.dimension_count");
}

// gguf_hunyuan_moe reads as the Hugging Face fixture (tests/fixtures/hunyuan_v1_moe,
// read_hunyuan_moe's fields; the GGUF's heads are 128 wide, the converter's assumption for its
// alpha), but for the base, which the converter stretched by alpha 1000 over heads of 128; the
// attention's tensors under the checkpoint's names, the router, the stacked experts and the
// shared MLP under those load_moe_block's GGUF branch reads.
TEST(GgufLlamaVariants, HunyuanMoeAsItsHuggingFaceConfig) {
  auto hf = Checkpoint::open(fixture_dir("hunyuan_v1_moe"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  auto file = Checkpoint::open(gguf_path("gguf_hunyuan_moe"));
  ASSERT_TRUE(file.has_value()) << file.status().to_string();
  const ModelConfig& g = (*file)->config();
  EXPECT_EQ(g.arch, h.arch);
  EXPECT_EQ(g.rope_style, h.rope_style);
  EXPECT_NEAR(g.rope_theta, 1e4 * std::pow(1000.0, 128.0 / 126.0), 1.0) << "alpha folded over heads of 128";
  EXPECT_EQ(g.rms_eps, h.rms_eps);
  EXPECT_EQ(g.head_dim, 128);
  EXPECT_TRUE(g.qk_norm && g.qk_norm_after_rope && !g.qk_norm_whole);
  EXPECT_EQ(g.qk_norm_after_rope, h.qk_norm_after_rope);
  EXPECT_EQ(g.qkv_bias, h.qkv_bias);
  EXPECT_EQ(g.o_bias, h.o_bias);
  testing::expect_same_experts(g, h);
  EXPECT_EQ(g.tie_embeddings, h.tie_embeddings);
  const auto& gt = (*file)->tensors();
  for (const auto& [name, t] : (*hf)->tensors()) {
    if (name.find(".mlp.") != std::string::npos) continue;  // (the Hub's experts one by one)
    EXPECT_EQ(gt.count(name), 1u) << name;
  }
  using Shape = std::vector<int64_t>;
  const int64_t hidden = g.hidden_size, hd = g.head_dim, q = g.n_heads * hd, kv = g.n_kv_heads * hd;
  const int64_t e = g.n_experts, inter = g.moe_intermediate_size, shared = g.shared_width();
  const std::vector<std::pair<std::string, Shape>> layer = {
      {"input_layernorm.weight", {hidden}},  {"post_attention_layernorm.weight", {hidden}},
      {"self_attn.q_proj.weight", {q, hidden}}, {"self_attn.k_proj.weight", {kv, hidden}},
      {"self_attn.v_proj.weight", {kv, hidden}}, {"self_attn.o_proj.weight", {hidden, q}},
      {"self_attn.query_layernorm.weight", {hd}}, {"self_attn.key_layernorm.weight", {hd}},
      {"mlp.gate.weight", {e, hidden}},      {"mlp.experts.gate_proj", {e, inter, hidden}},
      {"mlp.experts.up_proj", {e, inter, hidden}}, {"mlp.experts.down_proj", {e, hidden, inter}},
      {"mlp.shared_experts.gate_proj.weight", {shared, hidden}},
      {"mlp.shared_experts.up_proj.weight", {shared, hidden}},
      {"mlp.shared_experts.down_proj.weight", {hidden, shared}}};
  for (int l = 0; l < g.n_layers; ++l)
    for (const auto& [suffix, shape] : layer) {
      const std::string name = "model.layers." + std::to_string(l) + "." + suffix;
      ASSERT_EQ(gt.count(name), 1u) << name;
      EXPECT_EQ(gt.at(name).shape, shape) << name;
    }
  EXPECT_EQ(gt.size(), 3 + static_cast<size_t>(g.n_layers) * layer.size()) << "and the embedding, norm and head";
}

// What gguf_hunyuan_moe exercises: the top-k softmax renormalised (the softmax over all instead),
// the shared MLP beside the experts (dropped), the base the alpha stretched (unstretched).
TEST(GgufLlamaVariants, HunyuanMoeRoutingSharedMlpAndAlphaChangeTheResult) {
  const std::string path = gguf_path("gguf_hunyuan_moe");
  EXPECT_GT(testing::max_diff_with_rules("gguf_hunyuan_moe", [](ModelConfig& c) { c.norm_topk_prob = false; }, path),
            100 * testing::kLogitTol);
  EXPECT_GT(testing::max_diff_with_rules("gguf_hunyuan_moe",
                                         [](ModelConfig& c) { c.shared_expert_intermediate_size = 0; }, path),
            100 * testing::kLogitTol);
  EXPECT_GT(testing::max_diff_with_rules("gguf_hunyuan_moe", [](ModelConfig& c) { c.rope_theta = 1e4f; }, path),
            100 * testing::kLogitTol);
}

// hunyuan-moe: the experts and the shared MLP feed_forward_length wide where the file gives no
// width of theirs (llama.cpp's fallback), expert_feed_forward_length checked against the tensors;
// expert_shared_count other than 1, expert groups, per-layer counts and rope.scaling.alpha (which
// llama.cpp's hunyuan-moe loader ignores) refused, expert_used_count required; each naming the key.
TEST(GgufLlamaVariants, HunyuanMoeKeysAndTheirRefusals) {
  const testing::TempDir dir("gguf_hunyuan_moe");
  using testing::gguf_u32;
  const std::vector<testing::GgufKv> common = {
      testing::gguf_str("general.architecture", "hunyuan-moe"), gguf_u32("hunyuan-moe.block_count", 1),
      gguf_u32("hunyuan-moe.context_length", 64),              gguf_u32("hunyuan-moe.embedding_length", 64),
      gguf_u32("hunyuan-moe.feed_forward_length", 32),         gguf_u32("hunyuan-moe.attention.head_count", 4),
      gguf_u32("hunyuan-moe.expert_count", 8),                 gguf_u32("hunyuan-moe.expert_used_count", 2)};
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors = {
      {"token_embd.weight", {64, 256}},            {"blk.0.ffn_gate_inp.weight", {64, 8}},
      {"blk.0.ffn_gate_exps.weight", {64, 32, 8}}, {"blk.0.ffn_up_exps.weight", {64, 32, 8}},
      {"blk.0.ffn_down_exps.weight", {32, 64, 8}}, {"blk.0.ffn_gate_shexp.weight", {64, 32}},
      {"blk.0.ffn_up_shexp.weight", {64, 32}},     {"blk.0.ffn_down_shexp.weight", {32, 64}}};
  testing::write_gguf_zeros(dir.file("plain.gguf"), common, tensors);
  auto ck = Checkpoint::open(dir.file("plain.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_EQ((*ck)->config().arch, "hunyuan_v1_moe");
  EXPECT_EQ((*ck)->config().moe_intermediate_size, 32);
  EXPECT_EQ((*ck)->config().shared_width(), 32);
  EXPECT_FALSE((*ck)->config().shared_gate);
  EXPECT_EQ((*ck)->tensors().count("model.layers.0.mlp.shared_experts.down_proj.weight"), 1u);

  const std::vector<std::tuple<testing::GgufKv, StatusCode, std::string>> refused = {
      {gguf_u32("hunyuan-moe.expert_shared_count", 2), StatusCode::unsupported, "expert_shared_count"},
      {gguf_u32("hunyuan-moe.expert_group_count", 4), StatusCode::unsupported, "expert_group_count"},
      {testing::gguf_i32s("hunyuan-moe.expert_feed_forward_length", {32}), StatusCode::unsupported,
       "expert_feed_forward_length"},
      {{"hunyuan-moe.rope.scaling.alpha", 6, 0, 1000.0f}, StatusCode::unsupported, "rope.scaling.alpha"},
      {gguf_u32("hunyuan-moe.expert_feed_forward_length", 16), StatusCode::corrupt, "ffn_gate_exps"}};
  for (const auto& [extra, code, key] : refused) {
    std::vector<testing::GgufKv> kv = common;
    kv.push_back(extra);
    expect_refused(dir.file("refused.gguf"), kv, tensors, code, key);
  }
  std::vector<testing::GgufKv> kv(common.begin(), common.end() - 1);
  kv.push_back(testing::gguf_i32s("hunyuan-moe.expert_used_count", {2}));
  expect_refused(dir.file("per_layer.gguf"), kv, tensors, StatusCode::unsupported, "expert_used_count");
  kv.pop_back();
  expect_refused(dir.file("no_used.gguf"), kv, tensors, StatusCode::corrupt, "expert_used_count");
}

}  // namespace
}  // namespace brigade
