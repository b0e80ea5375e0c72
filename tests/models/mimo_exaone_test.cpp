// MiMo-V2-Flash (mimo_v2_flash), K-EXAONE (exaone_moe) and Kolibri-1 (kolibri1),
// models/mimo_exaone_config.h and models/gguf_mimo_exaone.h. The Hugging Face fixtures
// (tests/fixtures/mimo_v2_flash, exaone_moe, kolibri1, kolibri1_norm: scripts/make_fixtures.py) run
// in HfFixture against transformers; here: llama.cpp's own GGUF
// conversions of checkpoints of the same shapes (gguf_mimo2, gguf_exaone_moe:
// scripts/make_gguf_mimo_exaone_fixtures.py) against transformers, with llama.cpp's own logits
// on them as the second reference; what each fixture exercises (every piece moves the logits);
// the Hub's config.json fields of MiMo-V2-Flash; the refusals by name.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "chat_test_util.h"
#include "gguf_variants_util.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::gguf_path;
using testing::kLogitTol;

class GgufMimoExaone : public ::testing::TestWithParam<std::string> {};

// The GGUF file's experts as the Hugging Face fixture's, sigmoid-routed with the selection bias
// and renormalised (the groups and the scale may differ: the GGUF sources' own).
void expect_same_routed_experts(const ModelConfig& g, const ModelConfig& h) {
  for (auto m : {&ModelConfig::n_experts, &ModelConfig::n_experts_per_tok, &ModelConfig::moe_intermediate_size,
                 &ModelConfig::n_shared_experts, &ModelConfig::first_k_dense_replace})
    EXPECT_EQ(g.*m, h.*m);
  EXPECT_EQ(g.moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(g.moe_score_bias && g.norm_topk_prob);
}

// llama.cpp computes the same logits from each file (the script's --llamacpp pass: llamacpp.json).
TEST_P(GgufMimoExaone, LogitsDecodeAndGreedyTokensMatchTransformers) {
  testing::expect_gguf_fixture_matches(GetParam(), 5e-4f, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufMimoExaone, ::testing::Values("gguf_mimo2", "gguf_exaone_moe"),
                         [](const auto& p) { return p.param; });

// gguf_mimo2 reads as tests/fixtures/mimo_v2_flash (less the groups and the scale llama.cpp's
// mimo2 does not run): the sliding layers' 2 KV heads and the full layers' 1, v heads of 16 in
// q/k heads of 24, the value scale, 8 rotated dims with a theta per layer type, sinks on the
// sliding layers, layer 0 dense; the tensors under the safetensors names.
TEST(GgufMimo2, ReadsAsItsHuggingFaceConfig) {
  auto hf = Checkpoint::open(fixture_dir("mimo_v2_flash"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  const ModelConfig g = testing::open_config("gguf_mimo2");
  EXPECT_EQ(g.arch, "mimo_v2_flash");
  testing::expect_same_attention(g, h);
  EXPECT_EQ(h.n_kv_heads, 2);
  EXPECT_EQ(h.n_kv_heads_full, 1);
  EXPECT_EQ(h.v_head_width, 16);
  EXPECT_EQ(h.rotary_dim, 8);
  EXPECT_FLOAT_EQ(h.rope_theta, 50000.0f);
  EXPECT_FLOAT_EQ(h.rope_local_theta, 10000.0f);
  EXPECT_FLOAT_EQ(h.attn_value_scale, 0.707f);
  for (auto m : {&ModelConfig::n_kv_heads, &ModelConfig::n_kv_heads_full, &ModelConfig::v_head_width,
                 &ModelConfig::rotary_dim, &ModelConfig::sliding_window, &ModelConfig::first_k_dense_replace})
    EXPECT_EQ(g.*m, h.*m);
  EXPECT_EQ(g.rope_local_theta, h.rope_local_theta);
  EXPECT_EQ(g.attn_value_scale, h.attn_value_scale);
  EXPECT_EQ(g.sliding_layers, h.sliding_layers);
  EXPECT_TRUE(g.attn_sinks && g.sinks_sliding_only && h.attn_sinks && h.sinks_sliding_only);
  expect_same_routed_experts(g, h);
  EXPECT_EQ(g.n_group, 1);  // (the source's; the Hugging Face fixture's 2)
  EXPECT_EQ(g.routed_scaling_factor, 1.0f);
  auto file = Checkpoint::open(gguf_path("gguf_mimo2"));
  ASSERT_TRUE(file.has_value()) << file.status().to_string();
  const auto& gt = (*file)->tensors();
  for (const auto& [name, t] : (*hf)->tensors()) {
    if (name.find(".mlp.experts.") != std::string::npos) continue;  // (one tensor per expert; GGUF's stacked)
    EXPECT_EQ(gt.count(name), 1u) << name;
  }
}

// gguf_exaone_moe reads as tests/fixtures/exaone_moe (less the groups): q/k norms, windows of 8
// with RoPE on layers 0-2, layer 3 full without, layer 0 dense, the selection bias, the
// renormalisation, the scale and the shared expert.
TEST(GgufExaoneMoe, ReadsAsItsHuggingFaceConfig) {
  auto hf = Checkpoint::open(fixture_dir("exaone_moe"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  const ModelConfig g = testing::open_config("gguf_exaone_moe");
  EXPECT_EQ(g.arch, "exaone_moe");
  testing::expect_same_attention(g, h);
  EXPECT_TRUE(g.qk_norm && h.qk_norm);
  EXPECT_FALSE(h.post_norms);
  EXPECT_EQ(g.sliding_window, h.sliding_window);
  EXPECT_EQ(g.sliding_layers, h.sliding_layers);
  EXPECT_EQ(g.nope_layers, (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(g.nope_layers, h.nope_layers);
  expect_same_routed_experts(g, h);
  EXPECT_EQ(g.first_k_dense_replace, 1);
  EXPECT_EQ(g.shared_width(), h.shared_width());
  EXPECT_EQ(g.routed_scaling_factor, h.routed_scaling_factor);
}

// What the fixtures exercise: each piece, taken away, moves the logits on the long prompt (40
// tokens: the windows of 8 cut in), by far more than the tolerance.
TEST(MimoExaone, EachPieceChangesTheResult) {
  for (const auto& edit : std::vector<std::function<void(ModelConfig&)>>{
           [](ModelConfig& c) { c.sinks_sliding_only = false, c.attn_sinks = false; },
           [](ModelConfig& c) { c.sliding_window = 64; },  // longer than the prompt: no window
           [](ModelConfig& c) { c.attn_value_scale = 1.0f; },
           [](ModelConfig& c) { c.rope_local_theta = c.rope_theta; },
           [](ModelConfig& c) { c.moe_score_bias = false; },
           [](ModelConfig& c) { c.moe_group_score = MoeGroupScore::none, c.n_group = 1, c.topk_group = 1; },
           [](ModelConfig& c) { c.routed_scaling_factor = 1.0f; }})
    EXPECT_GT(testing::max_diff_with_rules("mimo_v2_flash", edit), 100 * kLogitTol);
  for (const auto& edit : std::vector<std::function<void(ModelConfig&)>>{
           [](ModelConfig& c) { c.nope_layers.assign(c.nope_layers.size(), false); },
           [](ModelConfig& c) { c.sliding_window = 0; },
           [](ModelConfig& c) { c.n_shared_experts = 0; },
           [](ModelConfig& c) { c.moe_group_score = MoeGroupScore::none, c.n_group = 1, c.topk_group = 1; },
           [](ModelConfig& c) { c.routed_scaling_factor = 1.0f; }})
    EXPECT_GT(testing::max_diff_with_rules("exaone_moe", edit), 100 * kLogitTol);
}

nlohmann::json fixture_config(const std::string& name) {
  const auto j = testing::load_fixture_json(name + "/config.json");
  EXPECT_FALSE(j.is_discarded());
  return nlohmann::json::parse(j.dump());
}

Expected<ModelConfig> parse(const nlohmann::json& j) { return parse_hf_config(j.dump()); }

// MiMo-V2-Flash's Hub config.json names the layout its own way (transformers 5 derives the same
// from its defaults): hybrid_layer_pattern, swa_num_key_value_heads, flat rope_theta /
// swa_rope_theta / partial_rotary_factor, sliding_window_size (the window is one more: the
// query), routed_scaling_factor null (1), attention_value_scale null (1).
TEST(MimoConfig, ReadsTheHubFields) {
  nlohmann::json j = fixture_config("mimo_v2_flash");
  j.erase("layer_types");
  j.erase("rope_parameters");
  j["hybrid_layer_pattern"] = {0, 1, 1, 0};
  j["swa_num_key_value_heads"] = 4;
  j["rope_theta"] = 5000000;
  j["swa_rope_theta"] = 10000;
  j["partial_rotary_factor"] = 0.334;
  j["sliding_window_size"] = 128;
  j["routed_scaling_factor"] = nullptr;
  j["attention_value_scale"] = nullptr;
  auto c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(c->n_kv_heads, 4);
  EXPECT_EQ(c->n_kv_heads_full, 1);
  EXPECT_EQ(c->sliding_window, 129);
  EXPECT_FLOAT_EQ(c->rope_theta, 5e6f);
  EXPECT_FLOAT_EQ(c->rope_local_theta, 1e4f);
  EXPECT_EQ(c->rotary_dim, 8);
  EXPECT_EQ(c->routed_scaling_factor, 1.0f);
  EXPECT_EQ(c->attn_value_scale, 1.0f);
  // Without layer_types or the pattern: MiMoV2FlashConfig's rule, layer 0 and every 6th full.
  j.erase("hybrid_layer_pattern");
  j["num_hidden_layers"] = 12;
  j.erase("mlp_layer_types");
  c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->sliding_layers,
            (std::vector<bool>{false, true, true, true, true, false, true, true, true, true, true, false}));
  EXPECT_EQ(c->first_k_dense_replace, 1);
  EXPECT_EQ(c->n_moe_layers(), 11);
}

TEST(MimoExaoneConfig, RefusesWhatItDoesNotRunByName) {
  const nlohmann::json mimo = fixture_config("mimo_v2_flash"), exaone = fixture_config("exaone_moe");
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"v_head_dim", 32}}, "v_head_dim"},
      {{{"swa_head_dim", 16}}, "swa_head_dim"},
      {{{"swa_v_head_dim", 8}}, "swa_v_head_dim"},
      {{{"swa_num_attention_heads", 8}}, "swa_num_attention_heads"},
      {{{"num_key_value_heads", 2}, {"swa_num_key_value_heads", 3}}, "swa_num_key_value_heads"},
      {{{"add_full_attention_sink_bias", true}}, "add_full_attention_sink_bias"},
      {{{"add_swa_attention_sink_bias", false}}, "add_swa_attention_sink_bias"},
      {{{"n_shared_experts", 1}}, "n_shared_experts"},
      {{{"scoring_func", "softmax"}}, "scoring_func"},
      {{{"topk_method", "greedy"}}, "topk_method"},
      {{{"hidden_act", "gelu"}}, "hidden_act"},
      {{{"attention_bias", true}}, "attention_bias"},
      {{{"rope_parameters", {{"full_attention", {{"rope_type", "yarn"}, {"factor", 2.0}}},
                             {"sliding_attention", {{"rope_type", "default"}}}}}},
       "rope_type"},
      {{{"rope_parameters", {{"full_attention", {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}}},
                             {"sliding_attention", {{"rope_type", "default"}}}}}},
       "partial_rotary_factor"}};
  for (const auto& [patch, field] : cases) {
    nlohmann::json j = mimo;
    j.update(patch);
    auto c = parse(j);
    ASSERT_FALSE(c.has_value()) << field;
    EXPECT_EQ(c.status().code(), StatusCode::unsupported) << c.status().to_string();
    EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status().to_string();
  }
  for (const auto& [patch, field] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"scoring_func", "softmax"}}, "scoring_func"}, {{{"hidden_act", "gelu"}}, "hidden_act"}}) {
    nlohmann::json j = exaone;
    j.update(patch);
    auto c = parse(j);
    ASSERT_FALSE(c.has_value()) << field;
    EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status().to_string();
  }
}

TEST(Kolibri1Config, ReadsKolibri1ConfigsFields) {
  auto c = parse(fixture_config("kolibri1"));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "kolibri1");
  EXPECT_TRUE(c->qk_norm && c->sandwich_norms && c->moe_score_bias && c->moe_select_on_logits);
  EXPECT_FALSE(c->norm_topk_prob) << "Qwen3MoeConfig's default";
  EXPECT_EQ(c->moe_scoring, MoeScoring::sigmoid);
  EXPECT_EQ(c->moe_group_score, MoeGroupScore::none);
  EXPECT_EQ(c->n_experts, 8) << "num_local_experts, as Kolibri1Config saves num_experts";
  EXPECT_EQ(c->n_experts_per_tok, 2);
  EXPECT_EQ(c->shared_width(), 24) << "shared_expert_intermediate_size";
  EXPECT_EQ(c->n_moe_layers(), 5) << "every layer";
  EXPECT_EQ(c->routed_scaling_factor, 1.0f);
  EXPECT_EQ(c->sliding_window, 8);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, true, true, true, false}));
  EXPECT_EQ(c->nope_layers, (std::vector<bool>{false, false, false, false, true})) << "global NoPE";
  // Without layer_types, window or expert fields: Kolibri1Config's defaults.
  nlohmann::json j = fixture_config("kolibri1");
  for (const char* key : {"layer_types", "sliding_window", "num_local_experts", "num_experts_per_tok",
                          "moe_intermediate_size", "shared_expert_intermediate_size", "norm_topk_prob"})
    j.erase(key);
  j["num_hidden_layers"] = 10;
  c = parse(j);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->sliding_window, 513);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, true, true, true, false, true, true, true, true, false}));
  EXPECT_EQ(c->n_experts, 384);
  EXPECT_EQ(c->n_experts_per_tok, 6);
  EXPECT_EQ(c->moe_intermediate_size, 512);
  EXPECT_EQ(c->shared_width(), 512);
  auto norm = parse(fixture_config("kolibri1_norm"));
  ASSERT_TRUE(norm.has_value()) << norm.status().to_string();
  EXPECT_TRUE(norm->norm_topk_prob);
  EXPECT_EQ(norm->sliding_layers, (std::vector<bool>{false, true}));
}

TEST(Kolibri1Config, RefusesWhatTransformersDoesNotRunByName) {
  for (const auto& [patch, field] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"sliding_window", nullptr}}, "sliding_window"},
           {{{"hidden_act", "gelu"}}, "hidden_act"},
           {{{"shared_expert_intermediate_size", 0}}, "shared_expert_intermediate_size"}}) {
    nlohmann::json j = fixture_config("kolibri1");
    j.update(patch);
    auto c = parse(j);
    ASSERT_FALSE(c.has_value()) << field;
    EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status().to_string();
  }
}

// Each piece moves the logits: the choice by logits + bias (by sigmoid + bias instead, or without
// the bias), the renormalisation, the shared experts, GLM-4's post norms' absence would fail the
// load, so the windows and NoPE stand for the attention.
TEST(Kolibri1, EachPieceChangesTheResult) {
  for (const auto& edit : std::vector<std::function<void(ModelConfig&)>>{
           [](ModelConfig& c) { c.moe_select_on_logits = false; },
           [](ModelConfig& c) { c.moe_score_bias = false; },
           [](ModelConfig& c) { c.norm_topk_prob = true; },
           [](ModelConfig& c) { c.shared_expert_intermediate_size = 0; },
           [](ModelConfig& c) { c.nope_layers.assign(c.nope_layers.size(), false); },
           [](ModelConfig& c) { c.sliding_window = 0; }})
    EXPECT_GT(testing::max_diff_with_rules("kolibri1", edit), 100 * kLogitTol);
  EXPECT_GT(testing::max_diff_with_rules("kolibri1_norm", [](ModelConfig& c) { c.norm_topk_prob = false; }),
            100 * kLogitTol);
}

}  // namespace
}  // namespace brigade
