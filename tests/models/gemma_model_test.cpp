// Gemma 2 and Gemma 3 text (Gemma2ForCausalLM, Gemma3ForCausalLM) against transformers beyond one
// prefill (hf_fixture_test.cpp covers that for the gemma2 and gemma3 fixtures): every cached
// decode step's logits, the config rules read, and that each Gemma-specific rule the fixtures pin
// moves the logits far past the tolerance when dropped.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/llama.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::max_diff_with_config;
using testing::max_diff_with_rules;
using testing::read_fixture_cases;

TEST(Gemma, ConfigRules) {
  auto g2 = Checkpoint::open(fixture_dir("gemma2"));
  ASSERT_TRUE(g2.has_value()) << g2.status().to_string();
  const ModelConfig& a = (*g2)->config();
  EXPECT_EQ(a.arch, "gemma2");
  EXPECT_EQ(a.norm_offset, 1.0f);
  EXPECT_TRUE(a.sandwich_norms);
  EXPECT_EQ(a.mlp_activation, MlpActivation::gelu_tanh);
  EXPECT_FLOAT_EQ(a.embed_scale, 8.0f);  // sqrt(64)
  EXPECT_FLOAT_EQ(a.attn_scale, 1.0f / std::sqrt(24.0f));
  EXPECT_EQ(a.attn_softcap, 2.0f);
  EXPECT_EQ(a.final_softcap, 3.0f);
  EXPECT_TRUE(a.tie_embeddings);
  EXPECT_FALSE(a.qk_norm);
  EXPECT_EQ(std::vector<int>({a.layer_window(0), a.layer_window(1), a.layer_window(2)}), std::vector<int>({8, 0, 8}));
  EXPECT_EQ(a.rope_local_theta, 0.0f);

  auto g3 = Checkpoint::open(fixture_dir("gemma3"));
  ASSERT_TRUE(g3.has_value()) << g3.status().to_string();
  const ModelConfig& b = (*g3)->config();
  EXPECT_EQ(b.arch, "gemma3_text");
  EXPECT_TRUE(b.qk_norm);
  EXPECT_EQ(b.attn_softcap, 0.0f);
  EXPECT_EQ(b.final_softcap, 0.0f);
  EXPECT_EQ(std::vector<int>({b.layer_window(0), b.layer_window(1), b.layer_window(2)}), std::vector<int>({8, 8, 0}));
  EXPECT_EQ(b.rope_theta, 1000000.0f);
  EXPECT_EQ(b.rope_local_theta, 10000.0f);
  EXPECT_EQ(b.rope_scaling.type, RopeScalingType::linear);
  EXPECT_EQ(b.rope_scaling.factor, 4.0f);
}

// transformers 4's flat fields (rope_theta, rope_local_base_freq, rope_scaling) and the default
// layer rules when layer_types is absent; what the decoder does not run is refused by name.
TEST(Gemma, OlderConfigFormsAndRefusals) {
  auto base = [] {
    return nlohmann::json{{"architectures", nlohmann::json::array({"Gemma3ForCausalLM"})}, {"model_type", "gemma3_text"},
                          {"hidden_size", 64}, {"num_hidden_layers", 7}, {"num_attention_heads", 4},
                          {"num_key_value_heads", 1}, {"head_dim", 16}, {"intermediate_size", 128},
                          {"vocab_size", 256}, {"query_pre_attn_scalar", 16}};
  };
  auto j = base();
  j["rope_theta"] = 1000000.0;
  j["rope_local_base_freq"] = 5000.0;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->rope_local_theta, 5000.0f);
  EXPECT_EQ(c->rope_scaling.factor, 8.0f);
  EXPECT_EQ(c->sliding_window, 4096);  // Gemma3TextConfig's default
  for (int l = 0; l < 7; ++l) EXPECT_EQ(c->layer_window(l) == 0, l == 5) << l;  // every 6th global
  EXPECT_TRUE(c->tie_embeddings);                                                 // absent: tied

  j = base();
  j["architectures"] = nlohmann::json::array({"Gemma2ForCausalLM"});
  j["model_type"] = "gemma2";
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->attn_softcap, 50.0f);  // Gemma2Config's defaults when absent
  EXPECT_EQ(c->final_softcap, 30.0f);
  for (int l = 0; l < 7; ++l) EXPECT_EQ(c->layer_window(l) > 0, l % 2 == 0) << l;

  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& names) {
    auto k = base();
    edit(k);
    auto r = parse_hf_config(k.dump());
    ASSERT_FALSE(r.has_value()) << names;
    EXPECT_NE(r.status().to_string().find(names), std::string::npos) << r.status().to_string();
  };
  refused([](auto& k) { k["hidden_activation"] = "gelu"; }, "hidden_activation");
  refused([](auto& k) { k["use_bidirectional_attention"] = true; }, "use_bidirectional_attention");
  refused([](auto& k) { k["layer_types"] = nlohmann::json::array({"full_attention"}); }, "layer_types");
  refused([](auto& k) { k["attn_logit_softcapping"] = -1.0; }, "attn_logit_softcapping");
  refused([](auto& k) { k["architectures"] = nlohmann::json::array({"Gemma3ForConditionalGeneration"}); }, "text_config");
}

// Gemma 3 4B+'s form (Gemma3ForConditionalGeneration, model_type gemma3): the language model's
// config from text_config, with Gemma3TextConfig's defaults for what the Hub's configs leave out
// (gemma-3-4b-it's text_config has six fields), and its language_model.* tensors.
TEST(Gemma, MultimodalCheckpointLoadsItsLanguageModel) {
  auto ck = Checkpoint::open(fixture_dir("gemma3_mm"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "gemma3_text");
  EXPECT_TRUE(c.multimodal_text);
  EXPECT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_TRUE((*ck)->tensors().count("model.embed_tokens.weight"));
  for (const auto& [name, t] : (*ck)->tensors())
    EXPECT_TRUE(name.starts_with("model.") || name.starts_with("vision_tower.") || name.starts_with("multi_modal_projector."))
        << name;
  EXPECT_TRUE((*ck)->tensors().count("vision_tower.encoder.layers.0.self_attn.q_proj.weight"));
  EXPECT_EQ(c.vision.image_size, 28);
  EXPECT_EQ(c.vision.tokens_per_image, 4);
  auto info = inspect_model(fixture_dir("gemma3_mm"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  EXPECT_NE(format_model_info(*info).find("language model of Gemma3ForConditionalGeneration"), std::string::npos);

  const nlohmann::json hub = {{"architectures", nlohmann::json::array({"Gemma3ForConditionalGeneration"})},
                              {"model_type", "gemma3"},
                              {"torch_dtype", "bfloat16"},
                              {"eos_token_id", nlohmann::json::array({1, 106})},
                              {"text_config",
                               {{"hidden_size", 2560},
                                {"intermediate_size", 10240},
                                {"model_type", "gemma3_text"},
                                {"num_hidden_layers", 34},
                                {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}},
                                {"sliding_window", 1024}}},
                              {"vision_config",
                               {{"hidden_size", 1152},
                                {"image_size", 896},
                                {"intermediate_size", 4304},
                                {"model_type", "siglip_vision_model"},
                                {"num_attention_heads", 16},
                                {"num_hidden_layers", 27},
                                {"patch_size", 14},
                                {"vision_use_head", false}}}};
  auto h = parse_hf_config(hub.dump());
  ASSERT_TRUE(h.has_value()) << h.status().to_string();
  EXPECT_EQ(h->n_heads, 8);
  EXPECT_EQ(h->n_kv_heads, 4);
  EXPECT_EQ(h->head_dim, 256);
  EXPECT_EQ(h->vocab_size, 262208);
  EXPECT_EQ(h->max_position, 131072);
  EXPECT_EQ(h->dtype, DType::bf16);
  EXPECT_EQ(h->eos_ids, std::vector<int>({1, 106}));
  EXPECT_EQ(h->bos_id, 2);
  EXPECT_EQ(h->rope_theta, 1000000.0f);
  EXPECT_EQ(h->rope_local_theta, 10000.0f);
  EXPECT_FLOAT_EQ(h->attn_scale, 1.0f / 16.0f);
  EXPECT_EQ(h->layer_window(4), 1024);
  EXPECT_EQ(h->layer_window(5), 0);
  EXPECT_TRUE(h->tie_embeddings);
  // The tower's facts, with Gemma3Config's defaults for the projector and the token indices.
  EXPECT_EQ(h->vision.n_patches(), 4096);
  EXPECT_EQ(h->vision.tokens_per_image, 256);
  EXPECT_EQ(h->vision.pool_kernel(), 4);
  EXPECT_EQ(h->vision.head_dim(), 72);
  EXPECT_EQ(h->vision.image_token, 262144);
  EXPECT_EQ(h->vision.boi_token, 255999);
  EXPECT_EQ(h->vision.eoi_token, 256000);
}

TEST(Gemma, DecodeStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  for (const char* name : {"gemma2", "gemma3", "gemma3_mm"}) {
    auto model = load_or_fail(fixture_dir(name), *backend);
    ASSERT_NE(model, nullptr) << name;
    for (const auto& fc : read_fixture_cases(name)) {
      const float d = testing::decode_max_diff(*model, *backend, fc);
      EXPECT_LE(d, kLogitTol) << name << ", prompt of " << fc.prompt.size() << " tokens";
      RecordProperty(std::string(name) + "_decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(d));
    }
  }
}

// Each rule moves the long prompt's logits far past the tolerance when dropped.
TEST(Gemma, RulesChangeTheResult) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_config("gemma2", [](nlohmann::json& j) { j["attn_logit_softcapping"] = nullptr; }), far);
  EXPECT_GT(max_diff_with_config("gemma2", [](nlohmann::json& j) { j["final_logit_softcapping"] = nullptr; }), far);
  EXPECT_GT(max_diff_with_config("gemma2", [](nlohmann::json& j) { j["query_pre_attn_scalar"] = 16; }), far);
  for (const char* name : {"gemma2", "gemma3"}) {
    // The window pattern: every layer global, or the sliding and global layers swapped.
    EXPECT_GT(max_diff_with_config(name, [](nlohmann::json& j) {
                for (auto& t : j["layer_types"]) t = "full_attention";
              }),
              far) << name;
    EXPECT_GT(max_diff_with_config(name, [](nlohmann::json& j) {
                for (auto& t : j["layer_types"]) t = t == "full_attention" ? "sliding_attention" : "full_attention";
              }),
              far) << name;
    EXPECT_GT(max_diff_with_rules(name, [](ModelConfig& c) { c.norm_offset = 0.0f; }), far) << name;
    EXPECT_GT(max_diff_with_rules(name, [](ModelConfig& c) { c.embed_scale = 0.0f; }), far) << name;
    EXPECT_GT(max_diff_with_rules(name, [](ModelConfig& c) { c.mlp_activation = MlpActivation::silu; }), far) << name;
  }
  // Gemma 3's local RoPE base, and the global layers' linear scaling.
  EXPECT_GT(max_diff_with_rules("gemma3", [](ModelConfig& c) { c.rope_local_theta = 0.0f; }), far);
  EXPECT_GT(max_diff_with_rules("gemma3", [](ModelConfig& c) { c.rope_scaling = RopeScaling{}; }), far);
}

TEST(Gemma, InspectNamesTheArchitectureAndItsRules) {
  auto info = inspect_model(fixture_dir("gemma2"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  std::string text = format_model_info(*info);
  EXPECT_NE(text.find("architecture:  gemma2"), std::string::npos) << text;
  EXPECT_NE(text.find("sliding window 8 on 2 of 3 layers, score softcap 2"), std::string::npos) << text;
  EXPECT_NE(text.find("gelu_tanh MLP, logit softcap 3"), std::string::npos) << text;
  info = inspect_model(fixture_dir("gemma3"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  text = format_model_info(*info);
  EXPECT_NE(text.find("architecture:  gemma3_text"), std::string::npos) << text;
  EXPECT_NE(text.find("sliding layers theta 10000 unscaled"), std::string::npos) << text;
}

}  // namespace
}  // namespace brigade
