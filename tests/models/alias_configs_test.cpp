// Architectures read as another's config (models/alias_configs.h): IQuest-Coder as Llama, Solar Open,
// MiniCPM 5 MoE and Param2 MoE as GLM-4.5's MoE, with their defaults and refusals; and CWM's,
// Ministral's and Youtu-LLM's defaults. The logits against
// transformers are HfFixture's iquestcoder, solar_open, minicpm5_moe, param2moe, cwm, ministral and youtu
// (tests/models/hf_fixture_test.cpp).
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "models/inspect.h"
#include "models/model_config.h"
#include "split_test_util.h"

namespace brigade {
namespace {

using testing::fixture_config;

TEST(AliasConfigs, IQuestCoderIsLlama) {
  auto c = parse_hf_config(fixture_config("iquestcoder").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->sliding_window, 0);
  auto d = parse_hf_config(nlohmann::json{{"model_type", "iquestcoder"}}.dump());  // IQuestCoderConfig's defaults
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->n_layers, 80);
  EXPECT_EQ(d->hidden_size, 5120);
  EXPECT_EQ(d->n_kv_heads, 8);
  EXPECT_EQ(d->vocab_size, 76800);
  testing::expect_config_refused(fixture_config("iquestcoder"), {{[](nlohmann::json& j) { j["clip_qkv"] = 8; }, "clip_qkv"},
                                                 {[](nlohmann::json& j) { j["use_sliding_window"] = true; }, "use_sliding_window"}});
}

TEST(AliasConfigs, SolarOpenIsGlm45sExpertsBehindLlamasAttention) {
  auto c = parse_hf_config(fixture_config("solar_open").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "glm4_moe");
  EXPECT_EQ(c->first_k_dense_replace, 0) << "every layer sparse";
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->rope_dims(), c->head_dim) << "whole heads rotated";
  EXPECT_EQ(c->n_experts, 8);
  EXPECT_EQ(c->n_group, 2);
  EXPECT_FLOAT_EQ(c->routed_scaling_factor, 2.5f);
  EXPECT_EQ(c->n_mtp_layers, 0);
  nlohmann::json aliased = fixture_config("solar_open");
  aliased.erase("n_routed_experts");
  aliased["num_local_experts"] = 8;
  auto a = parse_hf_config(aliased.dump());
  ASSERT_TRUE(a.has_value()) << a.status().to_string();
  EXPECT_EQ(a->n_experts, 8) << "num_local_experts is n_routed_experts' other name";
  testing::expect_config_refused(fixture_config("solar_open"),
                 {{[](nlohmann::json& j) { j["first_k_dense_replace"] = 1; }, "first_k_dense_replace"},
                  {[](nlohmann::json& j) { j["use_qk_norm"] = true; }, "use_qk_norm"},
                  {[](nlohmann::json& j) { j["num_nextn_predict_layers"] = 1; }, "num_nextn_predict_layers"}});
}

// Param2 MoE: the fixture's config.json is written as the bharatgenai checkpoints' (their class and
// names, without use_qk_norm, partial_rotary_factor and rope_theta), so Param2MoeConfig's defaults
// apply; Glm4MoeForCausalLM over model_type param2moe reads the same (transformers' own saves).
TEST(AliasConfigs, Param2MoeIsGlm45WithItsOwnDefaultsAndNames) {
  const nlohmann::json fixture = fixture_config("param2moe");
  ASSERT_FALSE(fixture.contains("use_qk_norm"));
  for (const char* cls : {"Param2MoEForCausalLM", "Glm4MoeForCausalLM"}) {
    nlohmann::json j = fixture;
    j["architectures"] = {cls};
    auto c = parse_hf_config(j.dump());
    ASSERT_TRUE(c.has_value()) << cls << ": " << c.status().to_string();
    EXPECT_EQ(c->arch, "glm4_moe") << cls;
    EXPECT_TRUE(c->qk_norm) << cls;
    EXPECT_EQ(c->rope_dims(), c->head_dim) << cls << ": whole heads rotated";
    EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f) << cls;
    EXPECT_EQ(c->n_experts, 8) << cls << ": num_experts";
    EXPECT_EQ(c->n_shared_experts, 1) << cls << ": num_shared_experts";
    EXPECT_TRUE(c->qkv_bias) << cls << ": use_qkv_bias";
    EXPECT_EQ(c->first_k_dense_replace, 1) << cls;
  }
  auto d = parse_hf_config(nlohmann::json{{"model_type", "param2moe"}}.dump());  // Param2MoeConfig's shape
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->n_layers, 21);
  EXPECT_EQ(d->hidden_size, 2048);
  EXPECT_EQ(d->n_experts, 64);
  EXPECT_EQ(d->n_shared_experts, 2);
  EXPECT_EQ(d->n_experts_per_tok, 6);
  EXPECT_TRUE(d->tie_embeddings);
}

// Sarvam MoE: Param2's layout and names under SarvamMoEConfig's defaults (theta 8e6); Sarvam MLA:
// DeepSeek-V3 from its original format (head_dim and q_head_dim dropped, deepseek_yarn read as
// yarn) under SarvamMLAConfig's defaults (one group, layer 0 dense, no q_lora_rank).
TEST(AliasConfigs, SarvamMoeAndMlaReadTheirOriginalConfigs) {
  auto m = parse_hf_config(fixture_config("sarvam_moe").dump());
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  EXPECT_EQ(m->arch, "glm4_moe");
  EXPECT_TRUE(m->qk_norm);
  EXPECT_FLOAT_EQ(m->rope_theta, 8000000.0f);
  EXPECT_EQ(m->rope_dims(), m->head_dim);
  EXPECT_EQ(m->n_experts, 8);
  auto bare = parse_hf_config(nlohmann::json{{"model_type", "sarvam_moe"}, {"hidden_size", 4096}}.dump());
  ASSERT_TRUE(bare.has_value()) << bare.status().to_string();
  EXPECT_EQ(bare->n_layers, 19);
  EXPECT_EQ(bare->n_kv_heads, 4);
  EXPECT_EQ(bare->n_experts_per_tok, 6);
  const nlohmann::json mla = fixture_config("sarvam_mla");
  ASSERT_EQ(mla.at("head_dim"), 40) << "the original format's kv_lora_rank + qk_rope_head_dim";
  auto d = parse_hf_config(mla.dump());
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->arch, "deepseek_v3");
  EXPECT_EQ(d->n_experts, 8);
  EXPECT_EQ(d->n_shared_experts, 1);
  EXPECT_EQ(d->n_group, 1);
  EXPECT_EQ(d->topk_group, 1);
  EXPECT_EQ(d->first_k_dense_replace, 1);
  nlohmann::json yarn = mla;
  yarn.erase("rope_parameters");
  yarn["rope_scaling"] = {{"type", "deepseek_yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64},
                          {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}};
  auto y = parse_hf_config(yarn.dump());
  ASSERT_TRUE(y.has_value()) << y.status().to_string();
  EXPECT_EQ(y->rope_scaling.type, RopeScalingType::yarn) << "deepseek_yarn is YaRN";
}

// Hy3: GLM-4.5's MoE with q/k norms always, whole heads rotated, HYV3Config's defaults (theta
// 11158840, a dense first layer, router_scaling_factor); biases refused by name.
TEST(AliasConfigs, Hy3IsGlm45sExpertsBehindQkNorms) {
  auto c = parse_hf_config(fixture_config("hy_v3").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "glm4_moe");
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->rope_dims(), c->head_dim);
  EXPECT_FLOAT_EQ(c->routed_scaling_factor, 2.826f);
  EXPECT_EQ(c->first_k_dense_replace, 1);
  EXPECT_EQ(c->n_shared_experts, 1);
  auto d = parse_hf_config(nlohmann::json{{"model_type", "hy_v3"}}.dump());
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->n_layers, 80);
  EXPECT_EQ(d->n_experts, 192);
  EXPECT_EQ(d->n_experts_per_tok, 8);
  EXPECT_EQ(d->first_k_dense_replace, 1);
  EXPECT_FLOAT_EQ(d->rope_theta, 11158840.0f);
  testing::expect_config_refused(fixture_config("hy_v3"), {{[](nlohmann::json& j) { j["attention_bias"] = true; }, "attention_bias"},
                                                          {[](nlohmann::json& j) { j["mlp_bias"] = true; }, "mlp_bias"}});
}

// Ministral: MistralConfig's window on every layer without layer_types, none when null.
TEST(AliasConfigs, MinistralWindowsAndDefaults) {
  auto c = parse_hf_config(fixture_config("ministral").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "ministral");
  EXPECT_EQ(c->sliding_window, 8);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_FALSE(c->qkv_bias);
  nlohmann::json all = fixture_config("ministral");
  all.erase("layer_types");
  all.erase("sliding_window");
  auto d = parse_hf_config(all.dump());
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->sliding_window, 4096) << "MistralConfig's default";
  for (int l = 0; l < d->n_layers; ++l) EXPECT_EQ(d->layer_window(l), 4096) << "layer " << l;
  all["sliding_window"] = nullptr;
  d = parse_hf_config(all.dump());
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->layer_window(0), 0);
  testing::expect_config_refused(fixture_config("ministral"), {{[](nlohmann::json& j) { j["hidden_act"] = "gelu"; }, "hidden_act"}});
}

// GraniteSWA's layer_rope_theta: 0 is NoPE; one base for the full layers and one for the sliding
// ones, else refused by name (and a sliding base of its own under a scaled RoPE).
TEST(AliasConfigs, GraniteSwaRopeBasesPerLayer) {
  auto c = parse_hf_config(fixture_config("granite_swa").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "granite");
  EXPECT_TRUE(c->attn_sinks);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(c->nope_layers, (std::vector<bool>{false, true, false, false}));
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_FLOAT_EQ(c->rope_local_theta, 500000.0f);
  testing::expect_config_refused(fixture_config("granite_swa"), {
      {[](nlohmann::json& j) { j["layer_rope_theta"] = {10000.0, 0, 500000.0, 20000.0}; }, "layer_rope_theta"},
      {[](nlohmann::json& j) { j["layer_rope_theta"] = {10000.0, 0}; }, "layer_rope_theta"},
      {[](nlohmann::json& j) { j["layer_rope_theta"] = {10000.0, -1, 500000.0, 500000.0}; }, "layer_rope_theta"},
      {[](nlohmann::json& j) {
         j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 10000.0}};
       }, "layer_rope_theta"}});
}

// inspect names the class a config.json holds beside the architecture an alias runs it as; a model
// read as its own architecture gets no such note.
TEST(AliasConfigs, InspectNamesTheConfigsOwnClass) {
  for (const auto& [fixture, line] : {std::pair{"param2moe", "architecture:  glm4_moe (config.json: Param2MoEForCausalLM, model_type param2moe)\n"},
                                      {"hy_v3", "architecture:  glm4_moe (config.json: HYV3ForCausalLM, model_type hy_v3)\n"},
                                      {"sarvam_mla", "architecture:  deepseek_v3 (config.json: SarvamMLAForCausalLM, model_type sarvam_mla)\n"},
                                      {"granite_swa", "architecture:  granite (config.json: GraniteSWAForCausalLM, model_type granite_swa)\n"},
                                      {"ministral", "architecture:  ministral\n"},
                                      {"glm4_moe", "architecture:  glm4_moe\n"}}) {
    auto info = inspect_model(testing::fixture_dir(fixture));
    ASSERT_TRUE(info.has_value()) << fixture << ": " << info.status().to_string();
    const std::string text = format_model_info(*info);
    EXPECT_NE(text.find(line), std::string::npos) << fixture << ":\n" << text;
  }
}

TEST(AliasConfigs, CwmWindowsAndDefaults) {
  auto c = parse_hf_config(fixture_config("cwm").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "cwm");
  EXPECT_EQ(c->sliding_window, 8);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::llama3);
  nlohmann::json bare = {{"architectures", {"CwmForCausalLM"}}, {"hidden_size", 64}, {"num_hidden_layers", 8},
                         {"num_attention_heads", 4}, {"intermediate_size", 128}, {"vocab_size", 128256}};
  auto d = parse_hf_config(bare.dump());
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->sliding_window, 8192) << "CwmConfig's default";
  EXPECT_EQ(d->sliding_layers, (std::vector<bool>{false, true, true, true, false, true, true, true}));
  EXPECT_EQ(d->bos_id, 128000);
  EXPECT_EQ(d->eos_ids, (std::vector<int>{128001, 128008, 128009}));
  bare["sliding_window"] = nullptr;
  d = parse_hf_config(bare.dump());
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->sliding_window, 0);
}

TEST(AliasConfigs, MiniCPM5MoeIsGlm45sExpertsBehindGatedAttention) {
  auto c = parse_hf_config(fixture_config("minicpm5_moe").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "glm4_moe");
  EXPECT_TRUE(c->attn_gate);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->first_k_dense_replace, 1);
  EXPECT_EQ(c->mlp_only_layers, std::vector<int>{2}) << "mlp_layer_types: dense, sparse, dense, sparse";
  EXPECT_EQ(c->n_moe_layers(), 2);
  EXPECT_FLOAT_EQ(c->routed_scaling_factor, 3.66f);
  EXPECT_EQ(c->rope_dims(), c->head_dim);
  auto d = parse_hf_config(nlohmann::json{{"architectures", {"MiniCPM5MoEForCausalLM"}}}.dump());  // its first spelling
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_EQ(d->n_layers, 28);
  EXPECT_EQ(d->n_experts, 160);
  EXPECT_EQ(d->n_experts_per_tok, 16);
  EXPECT_FLOAT_EQ(d->rope_theta, 5e6f);
  EXPECT_EQ(d->bos_id, 0);
  EXPECT_EQ(d->eos_ids, (std::vector<int>{1, 130073}));
  testing::expect_config_refused(fixture_config("minicpm5_moe"),
                 {{[](nlohmann::json& j) { j["use_gated_attention"] = false; }, "use_gated_attention"},
                  {[](nlohmann::json& j) { j["attention_bias"] = true; }, "attention_bias"},
                  {[](nlohmann::json& j) { j["use_qk_norm"] = true; }, "use_qk_norm"}});
}

// Youtu-LLM (YoutuForCausalLM): DeepSeek-V3's MLA with its defaults over dense layers, tied by default.
TEST(AliasConfigs, YoutuIsMlaOverDenseLayers) {
  auto c = parse_hf_config(fixture_config("youtu").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "youtu");
  EXPECT_EQ(c->n_moe_layers(), 0);
  EXPECT_EQ(c->kv_lora_rank, 16);
  EXPECT_EQ(c->rope_style, RopeStyle::interleaved) << "rope_interleave";
  EXPECT_TRUE(c->tie_embeddings);
  nlohmann::json bare = {{"architectures", {"YoutuForCausalLM"}}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                         {"num_attention_heads", 4}, {"intermediate_size", 128}, {"vocab_size", 128256}};
  auto d = parse_hf_config(bare.dump());
  ASSERT_TRUE(d.has_value()) << d.status().to_string();
  EXPECT_TRUE(d->tie_embeddings) << "YoutuConfig's default";
  EXPECT_EQ(d->q_lora_rank, 1536) << "DeepseekV3Config's MLA defaults";
  EXPECT_EQ(d->kv_lora_rank, 512);
  EXPECT_EQ(d->bos_id, 128000);
  EXPECT_EQ(d->eos_ids, std::vector<int>{128001});
}

}  // namespace
}  // namespace brigade
