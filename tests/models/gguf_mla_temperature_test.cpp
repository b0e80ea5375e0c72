// DeepSeek-V3's descendants in GGUF, written by llama.cpp's own converter from the mistral4 and
// glm4_moe_lite checkpoints (scripts/make_gguf_mla_fixtures.py), with llama.cpp's run of each file
// as the reference (expected.json):
//   gguf_mistral4               llama.cpp's `mistral4` arch (conversion/mistral3.py Mistral4Model):
//                               deepseek2 under its own prefix, fused gate_up experts, no temperature
//                               keys (so llama.cpp runs Mistral Small 4 without its temperature),
//                               mscale_all_dim 0.707 (llama.cpp's mscale 1 for this arch);
//   gguf_deepseek2_temperature  deepseek2 with attention.temperature_scale / temperature_length as
//                               Mistral Large 3's files carry them (conversion/mistral.py): the
//                               query temperature applied to the absorbed query and its rope part;
//   gguf_glm4_moe_lite          GLM-4.7-Flash's deepseek2 (conversion/glm.py Glm4MoeLiteModel):
//                               sigmoid routing with the selection bias, the latent norms at
//                               layer_norm_rms_epsilon (1e-5) as llama.cpp runs them.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu/cpu_backend.h"
#include "gguf_variants_util.h"
#include "gguf_vocab.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/rope_scaling.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::gguf_path;
using testing::max_diff_with_rules;
using testing::open_config;
using testing::read_fixture_cases;

constexpr float kTol = 1e-4f;  // F32 files against llama.cpp (measured: 2e-6 at most)

TEST(GgufMla, ConfigAsLlamaCppReadsIt) {
  auto hf = Checkpoint::open(fixture_dir("mistral4"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  const ModelConfig m4 = open_config("gguf_mistral4");
  EXPECT_EQ(m4.arch, "mistral4");
  EXPECT_EQ(m4.attn_temperature_floor, 0.0f) << "the converter writes no temperature keys";
  const ModelConfig t = open_config("gguf_deepseek2_temperature");
  EXPECT_EQ(t.arch, "deepseek_v2") << "deepseek2 without expert_gating_func: llama.cpp's softmax";
  EXPECT_FLOAT_EQ(t.attn_temperature_floor, 8.0f) << "attention.temperature_length";
  EXPECT_FLOAT_EQ(t.attn_temperature_scale, 0.5f) << "attention.temperature_scale";
  EXPECT_FLOAT_EQ(t.attn_temperature_offset, 0.0f);
  EXPECT_FLOAT_EQ(t.attn_temperature_floor, h.attn_temperature_floor);
  EXPECT_FLOAT_EQ(t.attn_temperature_scale, h.attn_temperature_scale);
  for (const ModelConfig* g : {&m4, &t}) {
    SCOPED_TRACE(g->arch);
    EXPECT_EQ(g->n_layers, h.n_layers);
    EXPECT_EQ(g->q_lora_rank, h.q_lora_rank);
    EXPECT_EQ(g->kv_lora_rank, h.kv_lora_rank);
    EXPECT_EQ(g->qk_nope_head_dim, h.qk_nope_head_dim);
    EXPECT_EQ(g->qk_rope_head_dim, h.qk_rope_head_dim);
    EXPECT_EQ(g->v_head_dim, h.v_head_dim);
    EXPECT_EQ(g->rope_style, RopeStyle::interleaved);
    EXPECT_EQ(g->moe_scoring, MoeScoring::softmax);
    EXPECT_FALSE(g->moe_score_bias);
    EXPECT_EQ(g->moe_group_score, MoeGroupScore::top2_sum);
    EXPECT_EQ(g->n_group, h.n_group);
    EXPECT_EQ(g->topk_group, h.topk_group);
    EXPECT_EQ(g->first_k_dense_replace, h.first_k_dense_replace);
    EXPECT_TRUE(g->norm_topk_prob);
    EXPECT_FLOAT_EQ(g->routed_scaling_factor, h.routed_scaling_factor);
    EXPECT_EQ(g->rope_scaling.type, RopeScalingType::yarn);
    EXPECT_NEAR(g->attn_scale, h.attn_scale, 1e-6f) << "mscale(4, 1)^2 / sqrt(24) both";
  }
  const ModelConfig glm = open_config("gguf_glm4_moe_lite");
  auto glm_hf = Checkpoint::open(fixture_dir("glm4_moe_lite"));
  ASSERT_TRUE(glm_hf.has_value()) << glm_hf.status().to_string();
  const ModelConfig& gh = (*glm_hf)->config();
  EXPECT_EQ(glm.arch, "deepseek_v3") << "expert_gating_func 2 (sigmoid)";
  EXPECT_EQ(glm.moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(glm.moe_score_bias);
  EXPECT_EQ(glm.v_head_dim, 24);
  EXPECT_EQ(glm.qk_nope_head_dim, 16);
  EXPECT_EQ(glm.first_k_dense_replace, gh.first_k_dense_replace);
  EXPECT_FLOAT_EQ(glm.routed_scaling_factor, 1.8f);
  EXPECT_FLOAT_EQ(glm.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(glm.mla_norm_eps, 1e-5f) << "llama.cpp's latent norms: layer_norm_rms_epsilon";
  EXPECT_FLOAT_EQ(gh.mla_norm_eps, 1e-6f) << "transformers' DeepseekV3RMSNorm default";
  EXPECT_NEAR(glm.attn_scale, gh.attn_scale, 1e-7f);
  auto ck = Checkpoint::open(gguf_path("gguf_mistral4"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_TRUE((*ck)->tensors().contains("model.layers.1.mlp.experts.gate_up_proj")) << "ffn_gate_up_exps";
}

// Every case of expected.json (llama.cpp's run) within kTol at every prompt position and cached
// decode step, its greedy tokens; the vocabulary tokenizing as llama.cpp does.
void expect_matches_llamacpp(const std::string& fixture) {
  SCOPED_TRACE(fixture);
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path(fixture), *backend);
  ASSERT_NE(model, nullptr);
  testing::expect_fixture_cases_match(*model, *backend, fixture, kTol);
  testing::expect_tokenizes_as_llamacpp(fixture, 3);
}

TEST(GgufMla, Mistral4MatchesLlamaCpp) { expect_matches_llamacpp("gguf_mistral4"); }
TEST(GgufMla, Deepseek2TemperatureMatchesLlamaCpp) { expect_matches_llamacpp("gguf_deepseek2_temperature"); }
TEST(GgufMla, Glm4MoeLiteMatchesLlamaCpp) { expect_matches_llamacpp("gguf_glm4_moe_lite"); }

// The temperature keys are what make the deepseek2 file match (without them, or with Llama 4's
// offset of 1, the logits move far past the tolerance), and the mistral4 file matches llama.cpp
// only because brigade, as llama.cpp, runs it without one (the HF config's temperature added moves
// them as far).
TEST(GgufMla, TemperatureMovesTheLogits) {
  const std::string temp = "gguf_deepseek2_temperature", plain = "gguf_mistral4";
  EXPECT_GT(max_diff_with_rules(temp, [](ModelConfig& c) { c.attn_temperature_floor = 0.0f; }, gguf_path(temp)),
            100 * kTol);
  EXPECT_GT(max_diff_with_rules(temp, [](ModelConfig& c) { c.attn_temperature_offset = 1.0f; }, gguf_path(temp)),
            10 * kTol);
  EXPECT_GT(max_diff_with_rules(plain,
                                [](ModelConfig& c) {
                                  c.attn_temperature_floor = 8.0f;
                                  c.attn_temperature_scale = 0.5f;
                                  c.attn_temperature_offset = 0.0f;
                                  c.attn_temperature_all_layers = true;
                                },
                                gguf_path(plain)),
            100 * kTol);
}

// gguf_mistral4 carries mscale_all_dim 0.707 (yarn_log_multiplier 0.0707): llama.cpp's context
// takes mscale = mscale_all_dim for LLM_ARCH_DEEPSEEK2 only, 1 for mistral4, so the cos/sin factor
// is mscale(4, 1) / mscale(4, 0.707) and the softmax scale mscale(4, 1)^2 / sqrt(24). Read with
// deepseek2's rule instead (cos/sin factor 1, softmax scale mscale(4, 0.707)^2 / sqrt(24)) the
// logits leave llama.cpp's far past the tolerance.
TEST(GgufMla, Mistral4YarnTakesMscaleOne) {
  const std::string f = "gguf_mistral4";
  const ModelConfig m4 = open_config(f);
  EXPECT_NEAR(m4.rope_scaling.mscale_all_dim, 0.707f, 1e-6f);
  EXPECT_FLOAT_EQ(m4.rope_scaling.mscale, 1.0f);
  EXPECT_NEAR(m4.rope_scaling.attention_factor, yarn_mscale(4.0f, 1.0f) / yarn_mscale(4.0f, 0.707f), 1e-6f);
  const float as_deepseek2 = max_diff_with_rules(
      f,
      [](ModelConfig& c) {
        RopeScaling& s = c.rope_scaling;
        s.mscale = s.mscale_all_dim;
        s.attention_factor = 1.0f;
        const float m = yarn_mscale(s.factor, s.mscale_all_dim);
        c.attn_scale = m * m / std::sqrt(static_cast<float>(c.qk_nope_head_dim + c.qk_rope_head_dim));
      },
      gguf_path(f));
  EXPECT_GT(as_deepseek2, 100 * kTol);
  ::testing::Test::RecordProperty("deepseek2_rule", std::to_string(as_deepseek2));
}

// GLM-4.7-Flash's latent norms at llama.cpp's eps (layer_norm_rms_epsilon, 1e-5): at transformers'
// 1e-6 the logits leave llama.cpp's by several times what brigade's run differs from it.
TEST(GgufMla, Glm4MoeLiteLatentNormsTakeTheFilesEpsilon) {
  const std::string f = "gguf_glm4_moe_lite";
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path(f), *backend);
  ASSERT_NE(model, nullptr);
  const float as_read = testing::run_fixture_case(*model, *backend, read_fixture_cases(f).back()).max_abs_diff;
  const float at_1e6 = max_diff_with_rules(f, [](ModelConfig& c) { c.mla_norm_eps = 1e-6f; }, gguf_path(f));
  EXPECT_GT(at_1e6, 3 * as_read) << "as read " << as_read;
  ::testing::Test::RecordProperty("as_read", std::to_string(as_read));
  ::testing::Test::RecordProperty("at_1e-6", std::to_string(at_1e6));
}

}  // namespace
}  // namespace brigade
