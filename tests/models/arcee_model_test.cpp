// Arcee's models against transformers (models/arcee_config.h): the afmoe and arcee fixtures
// (scripts/make_fixtures.py) run in HfFixture (hf_fixture_test.cpp); here, each of their pieces
// moves the logits far outside the tolerance when changed, so the fixtures check each, and
// config values the decoder does not run are refused by name.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/inspect.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::max_diff_with_config;
using testing::max_diff_with_rules;

// AFMoE's config as parsed: the window on layers 0-2 with RoPE, layer 3 full without it, the gate
// and norms, the muP scale, one dense layer then sigmoid routing with the bias and route_scale.
TEST(Afmoe, ConfigReadsTrinityFields) {
  auto text = read_text_file(fixture_dir("afmoe") + "/config.json");
  ASSERT_TRUE(text.has_value());
  auto c = parse_hf_config(*text);
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "afmoe");
  EXPECT_EQ(c->sliding_window, 8);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(c->nope_layers, (std::vector<bool>{false, false, false, true}));
  EXPECT_TRUE(c->attn_gate && c->qk_norm && c->sandwich_norms);
  EXPECT_FLOAT_EQ(c->embedding_multiplier, std::sqrt(32.0f));
  EXPECT_EQ(c->n_moe_layers(), 3);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_EQ(c->moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(c->moe_score_bias && c->norm_topk_prob);
  EXPECT_FLOAT_EQ(c->routed_scaling_factor, 2.5f);
  EXPECT_EQ(c->shared_width(), 32);
}

TEST(Afmoe, PiecesMoveTheLogits) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_rules("afmoe", [](ModelConfig& c) { c.attn_gate = false; }), far) << "no output gate";
  EXPECT_GT(max_diff_with_rules("afmoe", [](ModelConfig& c) { c.nope_layers.assign(c.nope_layers.size(), false); }), far)
      << "RoPE on the full layer";
  EXPECT_GT(max_diff_with_config("afmoe", [](nlohmann::json& j) { j["sliding_window"] = 64; }), far) << "no window";
  EXPECT_GT(max_diff_with_config("afmoe", [](nlohmann::json& j) { j["mup_enabled"] = false; }), far) << "no muP scale";
  EXPECT_GT(max_diff_with_config("afmoe", [](nlohmann::json& j) { j["route_scale"] = 1.0; }), far);
  EXPECT_GT(max_diff_with_config("afmoe", [](nlohmann::json& j) { j["num_experts_per_tok"] = 1; }), far);
  EXPECT_GT(max_diff_with_rules("afmoe", [](ModelConfig& c) { c.moe_score_bias = false; }), far) << "bias ignored";
  EXPECT_GT(max_diff_with_rules("afmoe", [](ModelConfig& c) { c.norm_topk_prob = false; }), far) << "not renormalised";
  EXPECT_GT(max_diff_with_rules("afmoe", [](ModelConfig& c) { c.n_shared_experts = 0; }), far) << "no shared experts";
}

TEST(Afmoe, UnsupportedConfigValuesAreRefusedByName) {
  auto text = read_text_file(fixture_dir("afmoe") + "/config.json");
  ASSERT_TRUE(text.has_value());
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& field) {
    auto j = nlohmann::json::parse(*text);
    edit(j);
    auto c = parse_hf_config(j.dump());
    ASSERT_FALSE(c.has_value()) << field;
    EXPECT_NE(c.status().message().find(field), std::string::npos) << c.status().message();
  };
  refused([](nlohmann::json& j) { j["hidden_act"] = "gelu"; }, "hidden_act 'gelu'");
  refused([](nlohmann::json& j) { j["attention_bias"] = true; }, "attention_bias");
  refused([](nlohmann::json& j) { j["sliding_window"] = nullptr; }, "sliding_window");
  refused([](nlohmann::json& j) { j["route_scale"] = -1.0; }, "route_scale");
  refused([](nlohmann::json& j) { j["layer_types"][1] = "chunked_attention"; }, "layer_types[1]");
  refused([](nlohmann::json& j) { j["num_experts_per_tok"] = 9; }, "num_experts_per_tok");
}

// Without layer_types, AfmoeConfig's rule: every global_attn_every_n_layers-th layer full.
TEST(Afmoe, LayerTypesDefaultToEveryNthLayerFull) {
  auto j = nlohmann::json::parse(read_text_file(fixture_dir("afmoe") + "/config.json").value());
  j.erase("layer_types");
  j["global_attn_every_n_layers"] = 2;
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(c->nope_layers, (std::vector<bool>{false, true, false, true}));
}

// `inspect` names AFMoE's and Arcee AFM's pieces.
TEST(Afmoe, InspectNamesItsPieces) {
  auto afmoe = inspect_model(fixture_dir("afmoe"));
  ASSERT_TRUE(afmoe.has_value()) << afmoe.status().to_string();
  const std::string a = format_model_info(*afmoe);
  for (const char* piece : {"output gate sigmoid(gate_proj x)", "sliding window 8 on 3 of 4 layers", "no RoPE in layers 3",
                            "routing:       sigmoid + expert_bias (selection only), renormalised, routed_scaling_factor "
                            "2.5, shared experts 2",
                            "sparse layers: 3 of 4", "post-attention and post-MLP norms",
                            "embeddings x 5.65685 (muP)"})
    EXPECT_NE(a.find(piece), std::string::npos) << piece << "\n" << a;
  auto arcee = inspect_model(fixture_dir("arcee"));
  ASSERT_TRUE(arcee.has_value()) << arcee.status().to_string();
  const std::string r = format_model_info(*arcee);
  EXPECT_NE(r.find("ungated relu2 MLP"), std::string::npos) << r;
}

// Arcee AFM: the relu2 MLP (SwiGLU-less: silu instead moves the logits) and YaRN.
TEST(Arcee, PiecesMoveTheLogitsAndOtherActivationsAreRefused) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_config("arcee", [](nlohmann::json& j) {
              j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
            }),
            far)
      << "no YaRN";
  auto j = nlohmann::json::parse(read_text_file(fixture_dir("arcee") + "/config.json").value());
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "arcee");
  EXPECT_EQ(c->mlp_activation, MlpActivation::relu2);
  j["hidden_act"] = "silu";
  auto silu = parse_hf_config(j.dump());
  ASSERT_FALSE(silu.has_value());
  EXPECT_NE(silu.status().message().find("hidden_act 'silu' is not supported for arcee; supported: relu2"),
            std::string::npos)
      << silu.status().message();
}

}  // namespace
}  // namespace brigade
