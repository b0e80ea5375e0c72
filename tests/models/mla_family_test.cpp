// DeepSeek-V3's descendants from safetensors, beside the matches against transformers that
// hf_fixture_test.cpp (every prompt position, greedy) and deepseek_model_test.cpp (every cached
// decode step, chunked prefill) run on tests/fixtures/mistral4 and glm4_moe_lite
// (scripts/make_fixtures.py): the config each reads into, the pieces that make them match (each
// changed moves the logits far past the tolerance, so the fixtures check it), and what is refused.
//   mistral4: Mistral Small 4 as the Hub ships it, Mistral3ForConditionalGeneration around a
//     Mistral4Config (transformers' modular_mistral4.py): DeepSeek-V3's MLA, softmax routing
//     grouped by each group's two best, and the query temperature of llama_4_scaling_beta on all
//     of q (nope and rope parts) after RoPE;
//   glm4_moe_lite: GLM-4.7-Flash (modular_glm4_moe_lite.py): DeepSeek-V3's MLA with GLM-4.5's
//     sigmoid routing and mlp_layer_types;
//   axk1 / axk1_hub: SK Telecom A.X K1 (modular_axk1.py): DeepSeek-V3 with an RMSNorm on each sparse
//     layer's MoE output; axk1_hub as the released checkpoints store it (no selection bias, the
//     norm on the dense layers too, unread).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::max_diff_with_config;
using testing::max_diff_with_rules;

ModelConfig fixture_config(const std::string& name) {
  auto ck = Checkpoint::open(fixture_dir(name));
  EXPECT_TRUE(ck.has_value()) << name << ": " << ck.status().to_string();
  return ck ? (*ck)->config() : ModelConfig{};
}

nlohmann::json fixture_json(const std::string& name) {
  auto text = read_text_file(fixture_dir(name) + "/config.json");
  EXPECT_TRUE(text.has_value());
  return text ? nlohmann::json::parse(*text) : nlohmann::json::object();
}

// parse_hf_config's error for `j`: its code and that its message names `word`.
void expect_refused(const nlohmann::json& j, StatusCode code, const std::string& word) {
  const Status s = parse_hf_config(j.dump()).status();
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(word), std::string::npos) << s.message();
}

TEST(Mistral4, ConfigOfTheWrappedLanguageModel) {
  const ModelConfig c = fixture_config("mistral4");
  EXPECT_EQ(c.arch, "mistral4");
  EXPECT_TRUE(c.multimodal_text);
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.q_lora_rank, 24);
  EXPECT_EQ(c.kv_lora_rank, 32);
  EXPECT_EQ(c.qk_nope_head_dim, 16);
  EXPECT_EQ(c.qk_rope_head_dim, 8);
  EXPECT_EQ(c.head_dim, 8) << "RoPE over the rope part (config.json's head_dim 24 is nope + rope)";
  EXPECT_EQ(c.rope_style, RopeStyle::interleaved);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_EQ(c.moe_scoring, MoeScoring::softmax);
  EXPECT_FALSE(c.moe_score_bias) << "Mistral4TopkRouter has no e_score_correction_bias";
  EXPECT_EQ(c.moe_group_score, MoeGroupScore::top2_sum);
  EXPECT_EQ(c.first_k_dense_replace, 1);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 1.5f);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_FLOAT_EQ(c.attn_temperature_floor, 8.0f) << "original_max_position_embeddings";
  EXPECT_FLOAT_EQ(c.attn_temperature_scale, 0.5f) << "llama_4_scaling_beta";
  EXPECT_FLOAT_EQ(c.attn_temperature_offset, 0.0f);
  EXPECT_FLOAT_EQ(c.mla_norm_eps, 1e-6f);
  // Mistral4ForCausalLM alone (its text_config as a config.json) reads the same.
  nlohmann::json alone = fixture_json("mistral4")["text_config"];
  alone["architectures"] = {"Mistral4ForCausalLM"};
  auto a = parse_hf_config(alone.dump());
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  EXPECT_EQ(a->arch, "mistral4");
  EXPECT_FALSE(a->multimodal_text);
  EXPECT_FLOAT_EQ(a->attn_temperature_floor, 8.0f);
  EXPECT_EQ(a->moe_group_score, MoeGroupScore::top2_sum);
  EXPECT_FLOAT_EQ(a->attn_scale, c.attn_scale);
  auto info = inspect_model(fixture_dir("mistral4"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const std::string text = format_model_info(*info);
  for (const char* piece : {"mistral4 (the language model of Mistral3ForConditionalGeneration)",
                            "query temperature on every layer (floor_scale 8, attn_scale 0.5, positions + 0)",
                            "softmax, groups 1 of 2 by top-2 sum, routed_scaling_factor 1.5"})
    EXPECT_NE(text.find(piece), std::string::npos) << piece << "\n" << text;
}

// The query temperature is what makes the fixture match: without it (in the rules, or without
// llama_4_scaling_beta in config.json) or with Llama 4's offset of 1, the logits move. So do the
// routing's softmax (sigmoid instead) and its groups (none instead).
TEST(Mistral4, TemperatureAndRoutingMoveTheLogits) {
  EXPECT_GT(max_diff_with_rules("mistral4", [](ModelConfig& c) { c.attn_temperature_floor = 0.0f; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("mistral4", [](ModelConfig& c) { c.attn_temperature_offset = 1.0f; }), 10 * kLogitTol);
  EXPECT_GT(max_diff_with_config("mistral4",
                                 [](nlohmann::json& j) { j["text_config"]["rope_parameters"].erase("llama_4_scaling_beta"); }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("mistral4", [](ModelConfig& c) { c.moe_scoring = MoeScoring::sigmoid; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("mistral4", [](ModelConfig& c) { c.moe_group_score = MoeGroupScore::none; }),
            100 * kLogitTol);
}

TEST(Mistral4, RefusedByName) {
  const nlohmann::json wrapped = fixture_json("mistral4");
  nlohmann::json no_rope = wrapped;
  no_rope["text_config"].erase("rope_parameters");
  expect_refused(no_rope, StatusCode::unsupported, "rope_parameters");
  nlohmann::json no_unit = wrapped;
  no_unit["text_config"]["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}, {"llama_4_scaling_beta", 0.1}};
  expect_refused(no_unit, StatusCode::invalid_argument, "original_max_position_embeddings");
  nlohmann::json bias = wrapped;
  bias["text_config"]["attention_bias"] = true;
  expect_refused(bias, StatusCode::unsupported, "attention_bias");
  nlohmann::json seq_cls = wrapped["text_config"];
  seq_cls["architectures"] = {"Mistral4ForSequenceClassification"};
  expect_refused(seq_cls, StatusCode::unsupported, "Mistral4ForSequenceClassification");
  nlohmann::json groups = wrapped;
  groups["text_config"]["n_group"] = 3;  // 8 experts in 3 groups
  expect_refused(groups, StatusCode::invalid_argument, "n_group");
}

TEST(Glm4MoeLite, Config) {
  const ModelConfig c = fixture_config("glm4_moe_lite");
  EXPECT_EQ(c.arch, "glm4_moe_lite");
  EXPECT_TRUE(c.is_mla());
  EXPECT_EQ(c.q_lora_rank, 24);
  EXPECT_EQ(c.qk_nope_head_dim, 16);
  EXPECT_EQ(c.v_head_dim, 24) << "wider than qk_nope_head_dim, as GLM-4.7-Flash's 256 over 192";
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.rope_style, RopeStyle::interleaved);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::none);
  EXPECT_EQ(c.moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(c.moe_score_bias);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 1.8f);
  EXPECT_EQ(c.first_k_dense_replace, 1) << "mlp_layer_types' dense prefix";
  EXPECT_TRUE(c.mlp_only_layers.empty());
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.mla_norm_eps, 1e-6f) << "transformers' DeepseekV3RMSNorm default for q_a / kv_a";
  EXPECT_EQ(c.attn_temperature_floor, 0.0f);
  // mlp_layer_types decides, not first_k_dense_replace (which transformers ignores); absent, layer 0
  // is dense; a dense layer after a sparse one is an mlp_only_layers entry.
  nlohmann::json j = fixture_json("glm4_moe_lite");
  j["first_k_dense_replace"] = 0;
  auto same = parse_hf_config(j.dump());
  ASSERT_TRUE(same.has_value()) << same.status().to_string();
  EXPECT_EQ(same->first_k_dense_replace, 1);
  j.erase("mlp_layer_types");
  auto by_default = parse_hf_config(j.dump());
  ASSERT_TRUE(by_default.has_value()) << by_default.status().to_string();
  EXPECT_EQ(by_default->first_k_dense_replace, 1);
  j["mlp_layer_types"] = {"sparse", "dense"};
  auto later = parse_hf_config(j.dump());
  ASSERT_TRUE(later.has_value()) << later.status().to_string();
  EXPECT_EQ(later->first_k_dense_replace, 0);
  EXPECT_EQ(later->mlp_only_layers, std::vector<int>{1});
  EXPECT_FALSE(later->is_moe_layer(1));
  EXPECT_TRUE(later->is_moe_layer(0));
}

// GLM-4.7-Flash's config.json as the Hub ships it (vLLM's tests write these fields: no
// mlp_layer_types, first_k_dense_replace 1, partial_rotary_factor 1.0, rope_scaling null,
// topk_method noaux_tc, one MTP layer) reads as transformers builds the model.
TEST(Glm4MoeLite, TheHubConfig) {
  const nlohmann::json hub = {
      {"architectures", {"Glm4MoeLiteForCausalLM"}}, {"model_type", "glm4_moe_lite"}, {"vocab_size", 154880},
      {"hidden_size", 2048}, {"intermediate_size", 10240}, {"moe_intermediate_size", 1536}, {"num_hidden_layers", 47},
      {"num_attention_heads", 20}, {"num_key_value_heads", 20}, {"hidden_act", "silu"}, {"rms_norm_eps", 1e-5},
      {"attention_bias", false}, {"max_position_embeddings", 202752}, {"rope_theta", 1000000.0},
      {"rope_scaling", nullptr}, {"partial_rotary_factor", 1.0}, {"q_lora_rank", 768}, {"kv_lora_rank", 512},
      {"qk_nope_head_dim", 192}, {"qk_rope_head_dim", 64}, {"v_head_dim", 256}, {"n_routed_experts", 64},
      {"n_shared_experts", 1}, {"num_experts_per_tok", 4}, {"norm_topk_prob", true}, {"routed_scaling_factor", 1.8},
      {"n_group", 1}, {"topk_group", 1}, {"topk_method", "noaux_tc"}, {"first_k_dense_replace", 1},
      {"num_nextn_predict_layers", 1}, {"tie_word_embeddings", false}};
  auto c = parse_hf_config(hub.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "glm4_moe_lite");
  EXPECT_EQ(c->first_k_dense_replace, 1);
  EXPECT_EQ(c->n_moe_layers(), 46);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->v_head_dim, 256);
  EXPECT_EQ(c->moe_scoring, MoeScoring::sigmoid);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->n_mtp_layers, 1) << "its MTP layer, which speculative method mtp drafts with";
}

// The selection bias, the scale and the renormalisation each move the logits (so the fixture
// checks them); so does interleaved RoPE (halves instead).
TEST(Glm4MoeLite, RoutingAndRopeMoveTheLogits) {
  EXPECT_GT(max_diff_with_rules("glm4_moe_lite", [](ModelConfig& c) { c.moe_score_bias = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("glm4_moe_lite", [](nlohmann::json& j) { j["routed_scaling_factor"] = 1.0; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("glm4_moe_lite", [](nlohmann::json& j) { j["norm_topk_prob"] = false; }),
            100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("glm4_moe_lite", [](nlohmann::json& j) { j["rope_interleave"] = false; }),
            100 * kLogitTol);
}

TEST(Glm4MoeLite, RefusedByName) {
  const nlohmann::json base = fixture_json("glm4_moe_lite");
  nlohmann::json partial = base;
  partial["rope_parameters"]["partial_rotary_factor"] = 0.5;
  expect_refused(partial, StatusCode::unsupported, "partial_rotary_factor");
  nlohmann::json short_types = base;
  short_types["mlp_layer_types"] = {"dense"};
  expect_refused(short_types, StatusCode::corrupt, "mlp_layer_types");
  nlohmann::json bad_type = base;
  bad_type["mlp_layer_types"] = {"dense", "moe"};
  expect_refused(bad_type, StatusCode::corrupt, "mlp_layer_types[1]");
  nlohmann::json softmax = base;
  softmax["scoring_func"] = "softmax";
  expect_refused(softmax, StatusCode::unsupported, "scoring_func");
}

TEST(Axk1, Config) {
  const ModelConfig c = fixture_config("axk1");
  EXPECT_EQ(c.arch, "axk1");
  EXPECT_TRUE(c.is_mla());
  EXPECT_TRUE(c.moe_post_norm && c.moe_score_bias && c.norm_topk_prob);
  EXPECT_EQ(c.q_lora_rank, 24);
  EXPECT_EQ(c.n_group, 4);
  EXPECT_EQ(c.topk_group, 2);
  EXPECT_EQ(c.moe_group_score, MoeGroupScore::top2_sum);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  EXPECT_EQ(c.rope_style, RopeStyle::interleaved) << "AXK1Config's rope_interleave, true";
  EXPECT_EQ(c.n_mtp_layers, 0);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(c.is_moe_layer(l), l % 2 == 1) << "mlp_layer_types, layer " << l;
  const ModelConfig hub = fixture_config("axk1_hub");
  EXPECT_TRUE(hub.moe_post_norm);
  EXPECT_FALSE(hub.moe_score_bias) << "no e_score_correction_bias stored: routed without one";
  EXPECT_EQ(hub.first_k_dense_replace, 1) << "AXK1Config's default";
  nlohmann::json no_types = fixture_json("axk1");
  no_types.erase("mlp_layer_types");
  no_types["first_k_dense_replace"] = 2;
  auto derived = parse_hf_config(no_types.dump());
  ASSERT_TRUE(derived.has_value()) << derived.status().to_string();
  EXPECT_EQ(derived->n_moe_layers(), 2) << "layers 2 and 3, from the legacy first_k_dense_replace";
}

// The MoE output's norm, the selection bias where stored, the groups and the scale each move the
// logits (so the fixtures check them).
TEST(Axk1, PiecesMoveTheLogits) {
  EXPECT_GT(max_diff_with_rules("axk1", [](ModelConfig& c) { c.moe_post_norm = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("axk1_hub", [](ModelConfig& c) { c.moe_post_norm = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_rules("axk1", [](ModelConfig& c) { c.moe_score_bias = false; }), 100 * kLogitTol);
  EXPECT_GT(max_diff_with_config("axk1", [](nlohmann::json& j) { j["routed_scaling_factor"] = 1.0; }),
            100 * kLogitTol);
}

TEST(Axk1, RefusedByName) {
  nlohmann::json no_q_lora = fixture_json("axk1");
  no_q_lora["q_lora_rank"] = nullptr;
  expect_refused(no_q_lora, StatusCode::unsupported, "q_lora_rank");
  nlohmann::json freq = fixture_json("axk1");
  freq.erase("mlp_layer_types");
  freq["moe_layer_freq"] = 2;
  expect_refused(freq, StatusCode::unsupported, "moe_layer_freq");
  nlohmann::json softmax = fixture_json("axk1");
  softmax["scoring_func"] = "softmax";
  expect_refused(softmax, StatusCode::unsupported, "scoring_func");
}

}  // namespace
}  // namespace brigade
