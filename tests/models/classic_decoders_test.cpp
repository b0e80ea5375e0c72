// The four older dense decoders against transformers (models/classic_decoders_config.h): the gemma,
// starcoder2, phi, stablelm and stablelm_parallel fixtures (scripts/make_fixtures.py) run in
// HfFixture (hf_fixture_test.cpp); here, their configs as parsed, each piece moving the logits far
// outside the tolerance when changed (so the fixtures check each), config values the decoder does
// not run refused by name, and what `inspect` says of them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "decoder_config_checks.h"
#include "hf_fixture.h"
#include "models/inspect.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::expect_inspect_names;
using testing::fixture_dir;
using testing::kLogitTol;
using testing::max_diff_with_config;
using testing::max_diff_with_rules;
using testing::parse_fixture;

const auto refused = testing::expect_config_refused;  // (fixture, edit, what the refusal names)

TEST(ClassicDecoders, GemmaConfig) {
  auto c = parse_fixture("gemma");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "gemma");
  EXPECT_EQ(c->head_dim, 16) << "head_dim from config.json, not hidden / heads";
  EXPECT_EQ(c->n_kv_heads, 1);
  EXPECT_EQ(c->norm_offset, 1.0f);
  EXPECT_FLOAT_EQ(c->embed_scale, std::sqrt(32.0f));
  EXPECT_EQ(c->mlp_activation, MlpActivation::gelu_tanh);
  EXPECT_TRUE(c->mlp_gated());
  EXPECT_EQ(c->attn_softcap, 0.0f);
  EXPECT_EQ(c->final_softcap, 0.0f);
  EXPECT_FALSE(c->sandwich_norms);
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_TRUE(c->tie_embeddings);
  auto no_head_dim = parse_fixture("gemma", [](nlohmann::json& j) { j.erase("head_dim"); });
  ASSERT_TRUE(no_head_dim.has_value()) << no_head_dim.status().to_string();
  EXPECT_EQ(no_head_dim->head_dim, 256) << "GemmaConfig's default";
  auto untied = parse_fixture("gemma", [](nlohmann::json& j) { j.erase("tie_word_embeddings"); });
  ASSERT_TRUE(untied.has_value());
  EXPECT_TRUE(untied->tie_embeddings) << "GemmaConfig ties by default";
}

TEST(ClassicDecoders, Starcoder2Phi2AndStableLmConfigs) {
  auto s = parse_fixture("starcoder2");
  ASSERT_TRUE(s.has_value()) << s.status().to_string();
  EXPECT_EQ(s->arch, "starcoder2");
  EXPECT_TRUE(s->layer_norms && s->norm_bias && s->qkv_bias && s->o_bias && s->mlp_bias && s->mlp_ungated);
  EXPECT_FALSE(s->mlp_gated());
  EXPECT_EQ(s->mlp_activation, MlpActivation::gelu_tanh);
  EXPECT_EQ(s->sliding_window, 8);
  EXPECT_TRUE(s->sliding_layers.empty()) << "every layer slides";
  auto unbiased = parse_fixture("starcoder2", [](nlohmann::json& j) { j["use_bias"] = false; });
  ASSERT_TRUE(unbiased.has_value());
  EXPECT_FALSE(unbiased->qkv_bias || unbiased->o_bias || unbiased->mlp_bias);

  auto p = parse_fixture("phi");
  ASSERT_TRUE(p.has_value()) << p.status().to_string();
  EXPECT_EQ(p->arch, "phi");
  EXPECT_TRUE(p->layer_norms && p->norm_bias && p->parallel_blocks && p->lm_head_bias && p->mlp_ungated);
  EXPECT_TRUE(p->qkv_bias && p->o_bias && p->mlp_bias);
  EXPECT_EQ(p->head_dim, 20);
  EXPECT_EQ(p->rope_dims(), 8) << "int(20 * 0.4)";
  EXPECT_FALSE(p->tie_embeddings);
  auto default_partial = parse_fixture("phi", [](nlohmann::json& j) { j["rope_parameters"].erase("partial_rotary_factor"); });
  ASSERT_TRUE(default_partial.has_value());
  EXPECT_EQ(default_partial->rope_dims(), 10) << "PhiConfig's default 0.5";

  auto l = parse_fixture("stablelm");
  ASSERT_TRUE(l.has_value()) << l.status().to_string();
  EXPECT_EQ(l->arch, "stablelm");
  EXPECT_TRUE(l->layer_norms && l->norm_bias && l->qkv_bias);
  EXPECT_FALSE(l->o_bias || l->mlp_bias || l->parallel_blocks || l->qk_norm || l->lm_head_bias);
  EXPECT_TRUE(l->mlp_gated());
  EXPECT_EQ(l->rope_dims(), 4) << "a quarter of 16";
  auto lp = parse_fixture("stablelm_parallel");
  ASSERT_TRUE(lp.has_value()) << lp.status().to_string();
  EXPECT_TRUE(lp->qk_norm && lp->parallel_blocks);
  EXPECT_FALSE(lp->qkv_bias);
  EXPECT_EQ(lp->rope_dims(), 4) << "half of 8";
  auto default_quarter = parse_fixture("stablelm", [](nlohmann::json& j) { j["rope_parameters"].erase("partial_rotary_factor"); });
  ASSERT_TRUE(default_quarter.has_value());
  EXPECT_EQ(default_quarter->rope_dims(), 4) << "StableLmConfig's default 0.25";
}

// Each piece the fixtures exercise moves their logits far outside the tolerance.
TEST(ClassicDecoders, PiecesMoveTheLogits) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_rules("gemma", [](ModelConfig& c) { c.norm_offset = 0.0f; }), far) << "norms by w, not 1 + w";
  EXPECT_GT(max_diff_with_rules("gemma", [](ModelConfig& c) { c.embed_scale = 0.0f; }), far) << "unscaled embeddings";
  EXPECT_GT(max_diff_with_rules("gemma", [](ModelConfig& c) { c.mlp_activation = MlpActivation::silu; }), far);
  EXPECT_GT(max_diff_with_config("starcoder2", [](nlohmann::json& j) { j["sliding_window"] = nullptr; }), far) << "no window";
  EXPECT_GT(max_diff_with_rules("starcoder2", [](ModelConfig& c) { c.norm_bias = false; }), far) << "norms without bias";
  EXPECT_GT(max_diff_with_rules("starcoder2", [](ModelConfig& c) { c.mlp_bias = false; }), far) << "MLP without bias";
  EXPECT_GT(max_diff_with_config("phi", [](nlohmann::json& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.0; }),
            far)
      << "whole heads rotated";
  EXPECT_GT(max_diff_with_rules("phi", [](ModelConfig& c) { c.lm_head_bias = false; }), far) << "no lm_head bias";
  EXPECT_GT(max_diff_with_rules("phi", [](ModelConfig& c) { c.o_bias = false; }), far) << "no dense bias";
  EXPECT_GT(max_diff_with_rules("stablelm", [](ModelConfig& c) { c.qkv_bias = false; }), far) << "no q/k/v biases";
  EXPECT_GT(max_diff_with_config("stablelm", [](nlohmann::json& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.0; }),
            far)
      << "whole heads rotated";
  EXPECT_GT(max_diff_with_rules("stablelm_parallel", [](ModelConfig& c) { c.qk_norm = false; }), far) << "no q/k norms";
}

TEST(ClassicDecoders, UnsupportedConfigValuesAreRefusedByName) {
  refused("gemma", [](nlohmann::json& j) { j["hidden_act"] = "silu"; },
          "hidden_act 'silu' is not supported for gemma; supported: gelu_pytorch_tanh, gelu");
  refused("gemma", [](nlohmann::json& j) { j["use_bidirectional_attention"] = true; }, "use_bidirectional_attention");
  refused("starcoder2", [](nlohmann::json& j) { j["hidden_act"] = "relu"; }, "hidden_act 'relu' is not supported for starcoder2");
  refused("starcoder2", [](nlohmann::json& j) { j["sliding_window"] = -4; }, "sliding_window");
  refused("phi", [](nlohmann::json& j) { j["qk_layernorm"] = true; }, "qk_layernorm = true is not supported for phi");
  refused("phi", [](nlohmann::json& j) { j["hidden_act"] = "gelu"; }, "hidden_act 'gelu' is not supported for phi");
  refused("stablelm", [](nlohmann::json& j) { j["head_dim"] = 8; }, "head_dim 8 is not supported for stablelm");
  refused("stablelm", [](nlohmann::json& j) { j["hidden_act"] = "gelu"; }, "hidden_act 'gelu' is not supported for stablelm");
}

// `inspect` names the pieces.
TEST(ClassicDecoders, InspectNamesThem) {
  expect_inspect_names({
      {"gemma", {"arch", "gemma", "norms scale by 1 + w", "embeddings x 5.65685", "gelu_tanh MLP"}},
      {"starcoder2", {"starcoder2", "LayerNorms with biases (eps 1e-05)", "ungated gelu_tanh MLP", "sliding window 8",
                      "qkv bias, o bias", "MLP biases"}},
      {"phi", {"phi", "attention and MLP side by side on one norm", "rotary dims 8 of 20", "lm_head bias",
               "ungated gelu_tanh MLP"}},
      {"stablelm_parallel", {"stablelm", "q/k LayerNorm per head (its own weights)", "rotary dims 4 of 8",
                             "attention and MLP side by side on one norm"}}});
}

}  // namespace
}  // namespace brigade
