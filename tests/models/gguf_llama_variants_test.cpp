// llama.cpp's GGUF files of the Llama decoder's newer relatives (models/gguf_llama_variants.h),
// written by llama.cpp's own converter (scripts/make_gguf_llama_variants_fixtures.py): gguf_olmo
// (LayerNorms without weights, clamp_kqv), gguf_dbrx (fused Wqkv clamped, experts renormalised), gguf_olmo2,
// gguf_olmo3 (window 8 on three layers of four, YaRN on the full one), gguf_exaone4 (llama3
// scaling as rope_freqs), gguf_glm4 (gate|up fused, half-rotated heads), gguf_seed_oss,
// gguf_ernie4_5 (tied), gguf_hunyuan_dense (the NTK alpha folded into the base), gguf_olmoe
// (experts not renormalised), gguf_apertus (its xIELU parameters as metadata), gguf_ernie4_5_moe
// (a dense layer, then experts with the selection bias and two shared ones), gguf_llama4 (NoPE
// on layer 3, q/k norms after llama3-scaled pair RoPE on the others, sparse layers 1 and 3 beside
// dense 0 and 2), gguf_minimax_m2 (whole-width q/k norms, half of each head rotated, sigmoid
// routing with the selection bias, renormalised), gguf_command_r (Command R+'s layer 64 deep:
// LayerNorms, parallel attention and MLP, per-head q/k LayerNorms, logit_scale), gguf_cohere2
// (windows of 8 with RoPE on layers 0-2, layer 3 full without RoPE), gguf_hunyuan_moe (Hunyuan
// dense's attention, every layer 8 experts, top 2 renormalised, beside an ungated shared MLP),
// gguf_dots1 (qwen3's attention, a dense layer, then grouped sigmoid routing with the selection
// bias beside two shared experts; its config: gguf_dots1_test.cpp), gguf_ministral3 (YaRN and the
// query temperature on every layer; its config: gguf_mistral3_test.cpp), gguf_internlm2 (InternLM2's
// wqkv taken apart per KV group by the converter, not by brigade), gguf_chatglm and gguf_glm_edge
// (llama.cpp's chatglm from ChatGLMModel's fused query_key_value and from GlmForCausalLM),
// gguf_minicpm (muP's scalings as metadata), F32; llama.cpp itself runs each
// within 2e-5 of transformers (llamacpp.json; the runs of gguf_olmo, gguf_dbrx, gguf_internlm2,
// gguf_chatglm, gguf_glm_edge and gguf_minicpm in llama.cpp are not yet recorded).
// The configs as llama.cpp reads them (Cohere's and Hunyuan MoE's: gguf_cohere_hunyuan_test.cpp), and
// transformers' logits, decode steps and greedy tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/cpu_backend.h"
#include "gguf_writer.h"
#include "gguf_variants_util.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::expect_refused;
using testing::fixture_dir;
using testing::gguf_path;
using testing::open_config;

TEST(GgufLlamaVariants, ReadsTheConfigsAsLlamaCppDoes) {
  const ModelConfig olmo = open_config("gguf_olmo");
  EXPECT_EQ(olmo.arch, "olmo");
  EXPECT_TRUE(olmo.layer_norms && olmo.norms_weightless && !olmo.norm_bias);
  EXPECT_FLOAT_EQ(olmo.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(olmo.clip_qkv, 1.0f) << "attention.clamp_kqv";
  EXPECT_EQ(olmo.rope_style, RopeStyle::interleaved) << "q/k rows permuted, as llama's";
  EXPECT_TRUE(olmo.tie_embeddings);

  const ModelConfig dbrx = open_config("gguf_dbrx");
  EXPECT_EQ(dbrx.arch, "dbrx");
  EXPECT_TRUE(dbrx.layer_norms && !dbrx.norm_bias && dbrx.fused_weights && !dbrx.tie_embeddings);
  EXPECT_FLOAT_EQ(dbrx.clip_qkv, 1.0f);
  EXPECT_FLOAT_EQ(dbrx.rope_theta, 500000.0f);
  EXPECT_EQ(dbrx.rope_style, RopeStyle::neox);
  EXPECT_EQ(dbrx.n_experts, 8);
  EXPECT_EQ(dbrx.n_experts_per_tok, 2);
  EXPECT_EQ(dbrx.moe_intermediate_size, 32);
  EXPECT_TRUE(dbrx.norm_topk_prob) << "llama.cpp's dbrx: norm_w true";
  EXPECT_EQ(dbrx.n_moe_layers(), 2);

  // InternLM2: the converter took wqkv apart per KV group into llama's permuted attn_q / attn_k / attn_v.
  const ModelConfig internlm2 = open_config("gguf_internlm2");
  EXPECT_EQ(internlm2.arch, "internlm2");
  EXPECT_EQ(internlm2.rope_style, RopeStyle::interleaved) << "q/k rows permuted, as llama's";
  EXPECT_EQ(internlm2.n_heads, 8);
  EXPECT_EQ(internlm2.n_kv_heads, 2);
  EXPECT_FLOAT_EQ(internlm2.rope_theta, 1000000.0f);
  EXPECT_FALSE(internlm2.qkv_bias || internlm2.o_bias || internlm2.tie_embeddings);

  // ChatGLM: GLM-4-9B's file (from ChatGLMModel: attn_qkv fused, with its bias) and GLM-Edge's (from
  // GlmForCausalLM: attn_q / attn_k / attn_v) both run as GlmForCausalLM.
  for (const char* name : {"gguf_chatglm", "gguf_glm_edge"}) {
    const ModelConfig glm = open_config(name);
    EXPECT_EQ(glm.arch, "glm") << name;
    EXPECT_EQ(glm.rope_style, RopeStyle::interleaved) << name << ": adjacent pairs, not permuted";
    EXPECT_EQ(glm.rope_dims(), 8) << name << ": half of each head";
    EXPECT_TRUE(glm.qkv_bias && !glm.o_bias && !glm.tie_embeddings && !glm.fused_weights) << name;
    EXPECT_EQ(glm.n_kv_heads, 2) << name;
  }
  EXPECT_FLOAT_EQ(open_config("gguf_chatglm").rope_theta, 5e6f) << "10000 * rope_ratio";
  {
    auto ck = Checkpoint::open(gguf_path("gguf_chatglm"));
    ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
    const auto& t = (*ck)->tensors();
    EXPECT_EQ(t.count("model.layers.1.self_attn.qkv_proj.weight"), 0u) << "attn_qkv split";
    EXPECT_EQ(t.at("model.layers.1.self_attn.k_proj.bias").shape, std::vector<int64_t>{32});
    EXPECT_EQ(t.at("model.layers.1.mlp.gate_up_proj.weight").shape, (std::vector<int64_t>{256, 64}));
  }

  // MiniCPM: the converter's embedding_scale, residual_scale and logit_scale (hidden / dim_model_base),
  // q/k rows permuted as llama's; tied.
  const ModelConfig minicpm = open_config("gguf_minicpm");
  EXPECT_EQ(minicpm.arch, "minicpm");
  EXPECT_EQ(minicpm.rope_style, RopeStyle::interleaved);
  EXPECT_FLOAT_EQ(minicpm.embedding_multiplier, 12.0f);
  EXPECT_FLOAT_EQ(minicpm.residual_multiplier, 1.4f / std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(minicpm.logits_scaling, 4.0f);
  EXPECT_TRUE(minicpm.tie_embeddings);

  const ModelConfig olmo2 = open_config("gguf_olmo2");
  EXPECT_EQ(olmo2.arch, "olmo2");
  EXPECT_TRUE(olmo2.post_norms && olmo2.qk_norm && olmo2.qk_norm_whole);
  EXPECT_EQ(olmo2.sliding_window, 0);
  EXPECT_EQ(olmo2.rope_style, RopeStyle::neox) << "no q/k permutation";

  const ModelConfig olmo3 = open_config("gguf_olmo3");
  EXPECT_EQ(olmo3.arch, "olmo3");
  EXPECT_EQ(olmo3.sliding_window, 8);
  EXPECT_EQ(olmo3.sliding_layers, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(olmo3.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_FLOAT_EQ(olmo3.rope_scaling.factor, 4.0f);
  EXPECT_EQ(olmo3.rope_scaling.original_max_position, 64);
  EXPECT_FLOAT_EQ(olmo3.rope_local_theta, 500000.0f) << "the sliding layers unscaled";

  const ModelConfig exaone = open_config("gguf_exaone4");
  EXPECT_EQ(exaone.arch, "exaone4");
  EXPECT_TRUE(exaone.post_norms && exaone.qk_norm && !exaone.qk_norm_whole);
  EXPECT_EQ(exaone.rope_scaling.freq_factors.size(), 8u) << "llama3 scaling as rope_freqs.weight";
  EXPECT_TRUE(exaone.nope_layers.empty()) << "no window: every layer rotates";

  const ModelConfig glm4 = open_config("gguf_glm4");
  EXPECT_EQ(glm4.arch, "glm4");
  EXPECT_TRUE(glm4.sandwich_norms && glm4.qkv_bias && !glm4.o_bias);
  EXPECT_EQ(glm4.rope_style, RopeStyle::interleaved);
  EXPECT_EQ(glm4.rope_dims(), 8);

  const ModelConfig seed = open_config("gguf_seed_oss");
  EXPECT_EQ(seed.arch, "seed_oss");
  EXPECT_TRUE(seed.qkv_bias && !seed.o_bias && !seed.mlp_bias);

  const ModelConfig ernie = open_config("gguf_ernie4_5");
  EXPECT_EQ(ernie.arch, "ernie4_5");
  EXPECT_EQ(ernie.rope_style, RopeStyle::interleaved);
  EXPECT_TRUE(ernie.tie_embeddings);

  const ModelConfig olmoe = open_config("gguf_olmoe");
  EXPECT_EQ(olmoe.arch, "olmoe");
  EXPECT_TRUE(olmoe.qk_norm && olmoe.qk_norm_whole && !olmoe.post_norms);
  EXPECT_EQ(olmoe.n_experts, 8);
  EXPECT_EQ(olmoe.n_experts_per_tok, 2);
  EXPECT_EQ(olmoe.moe_intermediate_size, 32);
  EXPECT_FALSE(olmoe.norm_topk_prob) << "llama.cpp's olmoe: norm_w false";

  const ModelConfig apertus = open_config("gguf_apertus");
  EXPECT_EQ(apertus.arch, "apertus");
  EXPECT_EQ(apertus.mlp_activation, MlpActivation::xielu);
  EXPECT_TRUE(apertus.qk_norm && apertus.qkv_bias && apertus.o_bias);
  EXPECT_EQ(apertus.rope_scaling.freq_factors.size(), 8u) << "llama3 scaling as rope_freqs.weight";

  const ModelConfig ernie_moe = open_config("gguf_ernie4_5_moe");
  EXPECT_EQ(ernie_moe.arch, "ernie4_5_moe");
  EXPECT_EQ(ernie_moe.rope_style, RopeStyle::interleaved);
  EXPECT_EQ(ernie_moe.first_k_dense_replace, 1);
  EXPECT_EQ(ernie_moe.n_moe_layers(), 2);
  EXPECT_EQ(ernie_moe.shared_width(), 64) << "expert_shared_feed_forward_length";
  EXPECT_TRUE(ernie_moe.moe_score_bias && ernie_moe.norm_topk_prob);

  const ModelConfig llama4 = open_config("gguf_llama4");
  EXPECT_EQ(llama4.arch, "llama4_text");
  EXPECT_EQ(llama4.rope_style, RopeStyle::interleaved) << "no q/k permutation: transformers' Llama 4 rotates pairs";
  EXPECT_EQ(llama4.rope_scaling.freq_factors.size(), 8u) << "llama3 scaling as rope_freqs.weight";
  EXPECT_EQ(llama4.nope_layers, (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(llama4.chunked_layers, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(llama4.attention_chunk, 8192) << "llama.cpp's, which no key sets";
  EXPECT_FLOAT_EQ(llama4.attn_temperature_floor, 8192.0f);
  EXPECT_FLOAT_EQ(llama4.attn_temperature_scale, 0.1f);
  EXPECT_TRUE(llama4.qk_norm && llama4.qk_norm_weightless && llama4.qk_norm_after_rope) << "4 experts, not 128";
  EXPECT_FALSE(llama4.qkv_bias || llama4.o_bias || llama4.tie_embeddings);
  EXPECT_EQ(llama4.intermediate_size, 96) << "the dense layers' feed_forward_length";
  EXPECT_EQ(llama4.n_experts, 4);
  EXPECT_EQ(llama4.n_experts_per_tok, 2);
  EXPECT_EQ(llama4.moe_intermediate_size, 48);
  EXPECT_EQ(llama4.shared_width(), 48) << "the shared expert as wide as the routed ones";
  EXPECT_EQ(llama4.mlp_only_layers, (std::vector<int>{0, 2})) << "interleave_moe_layer_step 2";
  EXPECT_EQ(llama4.n_moe_layers(), 2);
  EXPECT_EQ(llama4.moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(llama4.moe_weight_on_input && !llama4.norm_topk_prob);

  const ModelConfig minimax = open_config("gguf_minimax_m2");
  EXPECT_EQ(minimax.arch, "minimax_m2");
  EXPECT_EQ(minimax.rope_style, RopeStyle::neox) << "no q/k permutation";
  EXPECT_EQ(minimax.head_dim, 32);
  EXPECT_EQ(minimax.rope_dims(), 16) << "rope.dimension_count (the config's rotary_dim)";
  EXPECT_FLOAT_EQ(minimax.rope_theta, 5e6f);
  EXPECT_TRUE(minimax.qk_norm && minimax.qk_norm_whole && !minimax.qk_norm_after_rope);
  EXPECT_FALSE(minimax.qkv_bias || minimax.o_bias || minimax.tie_embeddings);
  EXPECT_EQ(minimax.n_experts, 8);
  EXPECT_EQ(minimax.n_experts_per_tok, 2);
  EXPECT_EQ(minimax.moe_intermediate_size, 32) << "feed_forward_length, which llama.cpp sizes the experts by";
  EXPECT_EQ(minimax.n_moe_layers(), 2) << "every layer sparse";
  EXPECT_EQ(minimax.shared_width(), 0);
  EXPECT_EQ(minimax.moe_scoring, MoeScoring::sigmoid) << "expert_gating_func 2";
  EXPECT_TRUE(minimax.moe_score_bias && minimax.norm_topk_prob);

  const ModelConfig hunyuan = open_config("gguf_hunyuan_dense");
  EXPECT_EQ(hunyuan.arch, "hunyuan_v1_dense");
  EXPECT_TRUE(hunyuan.qk_norm && hunyuan.qk_norm_after_rope);
  // The converter folded alpha 1000 into the base: 1e4 * 1000^(16 / 14), as f32.
  EXPECT_NEAR(hunyuan.rope_theta, 1e4 * std::pow(1000.0, 16.0 / 14.0), 4.0);
}

// A hunyuan-dense file with rope.scaling.alpha (which llama.cpp's converter does not write) has
// its base stretched at load, as llama.cpp's loader does; an EXAONE window pattern of the wrong
// length is corrupt, naming the key; so are OLMo's missing LayerNorm epsilon and a negative clamp,
// and a DBRX file without its clamp; a MiniCPM file without its scales takes MiniCPM-2B's.
TEST(GgufLlamaVariants, HunyuansAlphaKeyAndABadWindowPattern) {
  const testing::TempDir dir("gguf_variants");
  using testing::gguf_u32;
  auto common = [](const std::string& a) {
    return std::vector<testing::GgufKv>{testing::gguf_str("general.architecture", a), gguf_u32(a + ".block_count", 2),
                                        gguf_u32(a + ".context_length", 64), gguf_u32(a + ".embedding_length", 64),
                                        gguf_u32(a + ".feed_forward_length", 96), gguf_u32(a + ".attention.head_count", 4)};
  };
  std::vector<testing::GgufKv> kv = common("hunyuan-dense");
  kv.push_back({"hunyuan-dense.rope.freq_base", 6, 0, 10000.0f});
  kv.push_back({"hunyuan-dense.rope.scaling.alpha", 6, 0, 1000.0f});
  testing::write_gguf_zeros(dir.file("hunyuan.gguf"), kv, {{"token_embd.weight", {64, 256}}});
  auto ck = Checkpoint::open(dir.file("hunyuan.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_NEAR((*ck)->config().rope_theta, 1e4 * std::pow(1000.0, 16.0 / 14.0), 4.0);

  kv = common("exaone4");
  kv.push_back(gguf_u32("exaone4.attention.sliding_window", 8));
  testing::GgufKv pattern{"exaone4.attention.sliding_window_pattern", 9};
  pattern.elem_type = 7;
  pattern.i32s = {1, 0, 1};
  kv.push_back(pattern);
  expect_refused(dir.file("exaone.gguf"), kv, {{"token_embd.weight", {64, 256}}}, StatusCode::corrupt,
                 "sliding_window_pattern");

  // OLMo 1: its LayerNorms' epsilon is required; a negative clamp_kqv is corrupt.
  kv = common("olmo");
  expect_refused(dir.file("olmo_eps.gguf"), kv, {{"token_embd.weight", {64, 256}}}, StatusCode::corrupt,
                 "layer_norm_epsilon");
  kv.push_back({"olmo.attention.layer_norm_epsilon", 6, 0, 1e-5f});
  kv.push_back({"olmo.attention.clamp_kqv", 6, 0, -8.0f});
  expect_refused(dir.file("olmo_clamp.gguf"), kv, {{"token_embd.weight", {64, 256}}}, StatusCode::corrupt,
                 "clamp_kqv");
  // DBRX: clamp_kqv is required, as llama.cpp's loader has it.
  kv = common("dbrx");
  kv.push_back({"dbrx.attention.layer_norm_epsilon", 6, 0, 1e-5f});
  kv.push_back(gguf_u32("dbrx.expert_count", 4));
  kv.push_back(gguf_u32("dbrx.expert_used_count", 2));
  expect_refused(dir.file("dbrx_clamp.gguf"), kv, {{"token_embd.weight", {64, 256}}}, StatusCode::corrupt, "clamp_kqv");

  // MiniCPM without its scales (files from before llama.cpp's converter wrote them): MiniCPM-1B /
  // 2B's (scale_emb 12, scale_depth 1.4, dim_model_base 256); a non-positive one is corrupt.
  kv = common("minicpm");
  testing::write_gguf_zeros(dir.file("minicpm.gguf"), kv, {{"token_embd.weight", {64, 256}}});
  ck = Checkpoint::open(dir.file("minicpm.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_FLOAT_EQ((*ck)->config().embedding_multiplier, 12.0f);
  EXPECT_FLOAT_EQ((*ck)->config().residual_multiplier, 1.4f / std::sqrt(2.0f));
  EXPECT_FLOAT_EQ((*ck)->config().logits_scaling, 64.0f / 256.0f);
  kv.push_back({"minicpm.logit_scale", 6, 0, 0.0f});
  expect_refused(dir.file("minicpm_scale.gguf"), kv, {{"token_embd.weight", {64, 256}}}, StatusCode::corrupt, "logit_scale");
}

// Apertus's xIELU parameters are metadata (xielu.*, one f32 per layer, or one for all), read as
// the checkpoint's mlp.act_fn.* tensors; one missing, or of another count, is corrupt naming it.
TEST(GgufLlamaVariants, ApertusXieluParametersAreReadPerLayer) {
  auto ck = Checkpoint::open(gguf_path("gguf_apertus"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const auto& tensors = (*ck)->tensors();
  ASSERT_EQ(tensors.count("model.layers.1.mlp.act_fn.alpha_n"), 1u);
  // The converter's values for this fixture (raw, before the softplus; scripts/make_gguf_llama_variants_fixtures.py).
  EXPECT_FLOAT_EQ(static_cast<float>(tensors.at("model.layers.0.mlp.act_fn.alpha_p").at(0)), -0.013085273f);
  EXPECT_FLOAT_EQ(static_cast<float>(tensors.at("model.layers.1.mlp.act_fn.alpha_n").at(0)), -0.066484697f);
  EXPECT_FLOAT_EQ(static_cast<float>(tensors.at("model.layers.1.mlp.act_fn.beta").at(0)), 0.5f);

  const testing::TempDir dir("gguf_apertus_bad");
  using testing::gguf_u32;
  std::vector<testing::GgufKv> kv = {testing::gguf_str("general.architecture", "apertus"), gguf_u32("apertus.block_count", 2),
                                     gguf_u32("apertus.context_length", 64), gguf_u32("apertus.embedding_length", 64),
                                     gguf_u32("apertus.feed_forward_length", 96), gguf_u32("apertus.attention.head_count", 4),
                                     testing::gguf_f32s("xielu.alpha_p", {0.1f, 0.2f}), testing::gguf_f32s("xielu.alpha_n", {0.1f, 0.2f}),
                                     testing::gguf_f32s("xielu.beta", {0.5f}), {"xielu.eps", 6, 0, -1e-6f}};
  EXPECT_TRUE(testing::open_gguf_zeros(dir.file("one.gguf"), kv, {{"token_embd.weight", {64, 256}}}).is_ok())
      << "one value for every layer, as an array of one or a scalar";
  kv[6] = testing::gguf_f32s("xielu.alpha_p", {0.1f, 0.2f, 0.3f});
  expect_refused(dir.file("three.gguf"), kv, {{"token_embd.weight", {64, 256}}}, StatusCode::corrupt, "xielu.alpha_p");
  kv[6] = testing::gguf_f32s("xielu.alpha_p", {0.1f, 0.2f});
  kv.pop_back();
  const Status none = testing::open_gguf_zeros(dir.file("none.gguf"), kv, {{"token_embd.weight", {64, 256}}});
  EXPECT_NE(none.message().find("xielu.eps"), std::string::npos) << none.message();
}

// llama4: no q/k norms in a file of Maverick's 128 experts (llama.cpp's rule; no key says it);
// attention.sliding_window 0 and a rope.freq_base_swa of its own are refused, naming the key.
TEST(GgufLlamaVariants, Llama4QkNormsByExpertCountAndItsRefusals) {
  const testing::TempDir dir("gguf_llama4");
  using testing::gguf_u32;
  auto llama4 = [](uint32_t n_experts) {  // two layers, neither sparse (every 4th is)
    return std::vector<testing::GgufKv>{
        testing::gguf_str("general.architecture", "llama4"), gguf_u32("llama4.block_count", 2),
        gguf_u32("llama4.context_length", 64),             gguf_u32("llama4.embedding_length", 64),
        gguf_u32("llama4.feed_forward_length", 96),        gguf_u32("llama4.attention.head_count", 4),
        gguf_u32("llama4.expert_count", n_experts),        gguf_u32("llama4.expert_used_count", 1),
        gguf_u32("llama4.expert_feed_forward_length", 48), gguf_u32("llama4.interleave_moe_layer_step", 4)};
  };
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> embed = {{"token_embd.weight", {64, 256}}};
  testing::write_gguf_zeros(dir.file("maverick.gguf"), llama4(128), embed);
  auto ck = Checkpoint::open(dir.file("maverick.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_FALSE((*ck)->config().qk_norm);
  EXPECT_EQ((*ck)->config().mlp_only_layers, (std::vector<int>{0, 1}));

  std::vector<testing::GgufKv> kv = llama4(16);
  kv.push_back(gguf_u32("llama4.attention.sliding_window", 0));
  expect_refused(dir.file("full.gguf"), kv, embed, StatusCode::unsupported, "attention.sliding_window");

  kv = llama4(16);
  kv.push_back({"llama4.rope.freq_base", 6, 0, 500000.0f});
  kv.push_back({"llama4.rope.freq_base_swa", 6, 0, 10000.0f});
  expect_refused(dir.file("swa_base.gguf"), kv, embed, StatusCode::unsupported, "rope.freq_base_swa");
}

// gguf_minimax_m2 reads as the Hugging Face fixture of the same shape (tests/fixtures/minimax_m2,
// read_minimax_m2's fields); a file without expert_gating_func (llama.cpp aborts on one) runs
// MiniMax-M2's sigmoid; another gating function, expert groups and a per-layer
// expert_used_count are refused, naming the key.
TEST(GgufLlamaVariants, MiniMaxM2AsItsHuggingFaceConfigAndItsRefusals) {
  auto hf = Checkpoint::open(fixture_dir("minimax_m2"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  const ModelConfig g = open_config("gguf_minimax_m2");
  testing::expect_same_attention(g, h);
  EXPECT_EQ(g.sliding_window, h.sliding_window);
  testing::expect_same_experts(g, h);

  const testing::TempDir dir("gguf_minimax_m2");
  using testing::gguf_u32;
  const std::vector<testing::GgufKv> common = {
      testing::gguf_str("general.architecture", "minimax-m2"), gguf_u32("minimax-m2.block_count", 1),
      gguf_u32("minimax-m2.context_length", 64),              gguf_u32("minimax-m2.embedding_length", 64),
      gguf_u32("minimax-m2.feed_forward_length", 32),         gguf_u32("minimax-m2.attention.head_count", 4),
      gguf_u32("minimax-m2.rope.dimension_count", 8),         gguf_u32("minimax-m2.expert_count", 8)};
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> tensors = {
      {"token_embd.weight", {64, 256}},         {"blk.0.ffn_gate_inp.weight", {64, 8}},
      {"blk.0.ffn_gate_exps.weight", {64, 32, 8}}, {"blk.0.ffn_up_exps.weight", {64, 32, 8}},
      {"blk.0.ffn_down_exps.weight", {32, 64, 8}}, {"blk.0.exp_probs_b.bias", {8}}};
  std::vector<testing::GgufKv> kv = common;
  kv.push_back(gguf_u32("minimax-m2.expert_used_count", 2));
  testing::write_gguf_zeros(dir.file("no_gating.gguf"), kv, tensors);
  auto ck = Checkpoint::open(dir.file("no_gating.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_EQ((*ck)->config().moe_scoring, MoeScoring::sigmoid);
  EXPECT_EQ((*ck)->config().rope_dims(), 8);
  EXPECT_EQ((*ck)->tensors().count("model.layers.0.mlp.gate.e_score_correction_bias"), 1u);

  const std::vector<std::pair<testing::GgufKv, std::string>> refused = {
      {gguf_u32("minimax-m2.expert_gating_func", 1), "expert_gating_func"},
      {gguf_u32("minimax-m2.expert_group_count", 4), "expert_group_count"},
      {testing::gguf_i32s("minimax-m2.expert_used_count", {2}), "expert_used_count"}};
  for (const auto& [extra, key] : refused) {
    kv = common;
    if (key != "expert_used_count") kv.push_back(gguf_u32("minimax-m2.expert_used_count", 2));
    kv.push_back(extra);
    expect_refused(dir.file(key + ".gguf"), kv, tensors, StatusCode::unsupported, key);
  }
}

class GgufLlamaVariantsF32 : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufLlamaVariantsF32, LogitsDecodeAndGreedyTokensMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path(GetParam()), *backend);
  ASSERT_NE(model, nullptr);
  testing::expect_fixture_cases_match(*model, *backend, GetParam(), 5e-4f);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufLlamaVariantsF32,
                         ::testing::Values("gguf_olmo", "gguf_dbrx", "gguf_olmo2", "gguf_olmo3", "gguf_exaone4", "gguf_glm4", "gguf_seed_oss",
                                           "gguf_ernie4_5", "gguf_hunyuan_dense", "gguf_olmoe", "gguf_apertus",
                                           "gguf_ernie4_5_moe", "gguf_llama4", "gguf_minimax_m2", "gguf_command_r",
                                           "gguf_cohere2", "gguf_hunyuan_moe", "gguf_dots1", "gguf_ministral3",
                                           "gguf_internlm2", "gguf_chatglm", "gguf_glm_edge", "gguf_minicpm"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace brigade
