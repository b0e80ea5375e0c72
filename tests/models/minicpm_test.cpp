// MiniCPM (MiniCPMForCausalLM, models/llama_variants_config.cpp read_minicpm): its muP scalings as
// Granite's multipliers, longrope, and the refusals; MiniCPM 3 (MiniCPM3ForCausalLM, the DeepSeek
// model's MLA with the same scalings: models/deepseek_config.cpp). The logits against transformers are HfFixture's
// minicpm and minicpm_longrope (tests/models/hf_fixture_test.cpp); llama.cpp's minicpm GGUF is
// gguf_llama_variants_test.cpp's gguf_minicpm.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "models/model_config.h"
#include "split_test_util.h"

namespace brigade {
namespace {

using testing::fixture_config;

TEST(MiniCPM, ReadsItsScalingsAsGranitesMultipliers) {
  auto c = parse_hf_config(fixture_config("minicpm").dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "minicpm");
  EXPECT_FLOAT_EQ(c->embedding_multiplier, 12.0f) << "scale_emb";
  EXPECT_FLOAT_EQ(c->residual_multiplier, 1.4f / std::sqrt(2.0f)) << "scale_depth / sqrt(layers)";
  EXPECT_FLOAT_EQ(c->logits_scaling, 4.0f) << "hidden_size / dim_model_base";
  EXPECT_TRUE(c->tie_embeddings);
  EXPECT_FALSE(c->qkv_bias || c->o_bias);

  auto l = parse_hf_config(fixture_config("minicpm_longrope").dump());
  ASSERT_TRUE(l.has_value()) << l.status().to_string();
  EXPECT_EQ(l->rope_scaling.type, RopeScalingType::longrope);
  EXPECT_FALSE(l->rope_scaling.longrope_long) << "max_position_embeddings = original: the short factors";
  EXPECT_EQ(l->rope_scaling.short_factor.size(), 8u);

  nlohmann::json bare = {{"architectures", {"MiniCPMForCausalLM"}}, {"hidden_size", 64}, {"num_hidden_layers", 4},
                         {"num_attention_heads", 4}, {"intermediate_size", 128}, {"vocab_size", 256}};
  c = parse_hf_config(bare.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_FLOAT_EQ(c->embedding_multiplier, 1.0f) << "MiniCPMConfig's defaults: no scaling";
  EXPECT_FLOAT_EQ(c->residual_multiplier, 0.5f);
  EXPECT_FLOAT_EQ(c->logits_scaling, 64.0f);

  for (const auto& [key, value] : {std::pair<const char*, nlohmann::json>{"use_mup", false}, {"scale_emb", 0},
                                   {"dim_model_base", -1}, {"scale_depth", "x"}}) {
    nlohmann::json j = fixture_config("minicpm");
    j[key] = value;
    const Status st = parse_hf_config(j.dump()).status();
    EXPECT_FALSE(st.is_ok()) << key;
    EXPECT_NE(st.message().find(key), std::string::npos) << st.message();
  }
}

// MiniCPM 3: DeepSeek-V2's MLA rotating halves, its muP scalings (null scale_depth / dim_model_base:
// none), head_dim = qk_rope_head_dim where the Hub's config.json leaves it out (longrope's factors
// count the rotary dims).
TEST(MiniCPM, MiniCPM3ReadsMlaAndItsScalings) {
  nlohmann::json j = fixture_config("minicpm3");
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "minicpm3");
  EXPECT_EQ(c->rope_style, RopeStyle::neox);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->n_moe_layers(), 0);
  EXPECT_TRUE(c->tie_embeddings);
  EXPECT_FLOAT_EQ(c->embedding_multiplier, 12.0f);
  EXPECT_FLOAT_EQ(c->residual_multiplier, 1.4f / std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(c->logits_scaling, 4.0f);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::longrope);
  j.erase("head_dim");
  j.erase("qk_head_dim");
  auto hub = parse_hf_config(j.dump());
  ASSERT_TRUE(hub.has_value()) << hub.status().to_string();
  EXPECT_EQ(hub->rope_scaling.short_factor, c->rope_scaling.short_factor);
  j["scale_depth"] = nullptr;
  j["dim_model_base"] = nullptr;
  auto plain = parse_hf_config(j.dump());
  ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
  EXPECT_FLOAT_EQ(plain->residual_multiplier, 1.0f);
  EXPECT_FLOAT_EQ(plain->logits_scaling, 1.0f);
  j["scale_emb"] = -1;
  const Status st = parse_hf_config(j.dump()).status();
  EXPECT_NE(st.message().find("scale_emb"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace brigade
