// More relatives of the Llama decoder against transformers: Jais 2 and Nemotron (Minitron) and
// EXAONE 3.0 / 3.5 (models/classic_decoders_config.h), FlexOlmo (models/llama_variants_config.h),
// HyperCLOVA X SEED (read_hyperclovax, models/model_config.cpp), Flint (read_flint,
// read_flint_moe), Mellum (read_mellum, read_mellum_moe). Their fixtures (scripts/make_fixtures.py: jais2, nemotron, exaone with the Hub's
// tensor and config names, flex_olmo, hyperclovax, hyperclovax_no_post_norm, flint and
// flint_sparse with the Hub's sink name, mellum, mellum_sparse) run in HfFixture (hf_fixture_test.cpp) and their GGUF files in GgufClassicF32
// (gguf_classic_decoders_test.cpp); here, their configs as parsed, each piece moving the logits far
// outside the tolerance when changed (so the fixtures check each), config values the decoder does
// not run refused by name, and what `inspect` says of them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gguf_variants_util.h"
#include "decoder_config_checks.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::expect_inspect_names;
using testing::fixture_dir;
using testing::gguf_path;
using testing::kLogitTol;
using testing::max_diff_with_config;
using testing::max_diff_with_rules;
using testing::parse_fixture;

const auto refused = testing::expect_config_refused;  // (fixture, edit, what the refusal names)

TEST(Relu2Decoders, Jais2Config) {
  auto c = parse_fixture("jais2");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "jais2");
  EXPECT_TRUE(c->layer_norms && c->norm_bias && c->qkv_bias && c->o_bias && c->mlp_bias && c->mlp_ungated);
  EXPECT_FALSE(c->mlp_gated());
  EXPECT_EQ(c->mlp_activation, MlpActivation::relu2);
  EXPECT_EQ(c->norm_offset, 0.0f);
  EXPECT_EQ(c->rope_dims(), c->head_dim) << "whole heads rotated";
  EXPECT_FALSE(c->parallel_blocks || c->lm_head_bias || c->tie_embeddings);
  auto defaults = parse_fixture("jais2", [](nlohmann::json& j) {
    j.erase("attention_bias");
    j.erase("mlp_bias");
  });
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_TRUE(defaults->qkv_bias && defaults->o_bias && defaults->mlp_bias) << "Jais2Config's defaults: true";
}

TEST(Relu2Decoders, NemotronConfig) {
  auto c = parse_fixture("nemotron");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "nemotron");
  EXPECT_TRUE(c->layer_norms && c->norm_bias && c->mlp_ungated);
  EXPECT_FALSE(c->qkv_bias || c->o_bias || c->mlp_bias);
  EXPECT_EQ(c->norm_offset, 1.0f) << "LayerNorm1P";
  EXPECT_EQ(c->mlp_activation, MlpActivation::relu2);
  EXPECT_EQ(c->rope_dims(), 4) << "half of 8";
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  auto default_half = parse_fixture("nemotron", [](nlohmann::json& j) { j["rope_parameters"].erase("partial_rotary_factor"); });
  ASSERT_TRUE(default_half.has_value());
  EXPECT_EQ(default_half->rope_dims(), 4) << "NemotronConfig's default 0.5";
  auto biased = parse_fixture("nemotron", [](nlohmann::json& j) {
    j["attention_bias"] = true;
    j["mlp_bias"] = true;
  });
  ASSERT_TRUE(biased.has_value());
  EXPECT_TRUE(biased->qkv_bias && biased->o_bias && biased->mlp_bias);
}

// Each piece the fixtures exercise moves their logits far outside the tolerance.
TEST(Relu2Decoders, PiecesMoveTheLogits) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_rules("jais2", [](ModelConfig& c) { c.norm_bias = false; }), far) << "norms without bias";
  EXPECT_GT(max_diff_with_rules("jais2", [](ModelConfig& c) { c.layer_norms = false; }), far) << "RMSNorms";
  EXPECT_GT(max_diff_with_rules("jais2", [](ModelConfig& c) { c.mlp_bias = false; }), far) << "MLP without bias";
  EXPECT_GT(max_diff_with_rules("jais2", [](ModelConfig& c) { c.o_bias = false; }), far) << "no o bias";
  EXPECT_GT(max_diff_with_rules("jais2", [](ModelConfig& c) { c.mlp_activation = MlpActivation::gelu_tanh; }), far)
      << "gelu, not relu2";
  EXPECT_GT(max_diff_with_rules("nemotron", [](ModelConfig& c) { c.norm_offset = 0.0f; }), far) << "norms by w, not 1 + w";
  EXPECT_GT(max_diff_with_rules("nemotron", [](ModelConfig& c) { c.norm_bias = false; }), far) << "norms without bias";
  EXPECT_GT(max_diff_with_config("nemotron", [](nlohmann::json& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.0; }),
            far)
      << "whole heads rotated";
}

TEST(Relu2Decoders, UnsupportedConfigValuesAreRefusedByName) {
  refused("jais2", [](nlohmann::json& j) { j["hidden_act"] = "silu"; },
          "hidden_act 'silu' is not supported for jais2; supported: relu2");
  refused("nemotron", [](nlohmann::json& j) { j["hidden_act"] = "gelu"; },
          "hidden_act 'gelu' is not supported for nemotron; supported: relu2");
  refused("nemotron", [](nlohmann::json& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.5; },
          "partial_rotary_factor must be in (0, 1]");
}

TEST(Relu2Decoders, InspectNamesThem) {
  expect_inspect_names({
      {"jais2", {"jais2", "LayerNorms with biases (eps 1e-05)", "ungated relu2 MLP", "qkv bias, o bias", "MLP biases"}},
      {"nemotron", {"nemotron", "norms scale by 1 + w", "ungated relu2 MLP", "rotary dims 4 of 8"}}});
}

TEST(Exaone3, ConfigThroughTheHubsNames) {
  auto c = parse_fixture("exaone");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "exaone");
  EXPECT_EQ(c->n_layers, 2) << "num_layers";
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f) << "layer_norm_epsilon";
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::llama3);
  EXPECT_EQ(c->rope_theta, 10000.0f);
  EXPECT_TRUE(c->mlp_gated());
  EXPECT_FALSE(c->layer_norms || c->qkv_bias || c->o_bias || c->mlp_bias);
  EXPECT_TRUE(c->tie_embeddings);
  auto eps = parse_fixture("exaone", [](nlohmann::json& j) { j["layer_norm_epsilon"] = 1e-3; });
  ASSERT_TRUE(eps.has_value());
  EXPECT_FLOAT_EQ(eps->rms_eps, 1e-3f);
  auto no_theta = parse_fixture("exaone", [](nlohmann::json& j) { j.erase("rope_theta"); });
  ASSERT_TRUE(no_theta.has_value()) << no_theta.status().to_string();
  EXPECT_EQ(no_theta->rope_theta, 500000.0f) << "ExaoneConfig's default_theta";
  auto biased = parse_fixture("exaone", [](nlohmann::json& j) { j["attention_bias"] = true; });
  ASSERT_TRUE(biased.has_value());
  EXPECT_TRUE(biased->qkv_bias && biased->o_bias);
  auto refused = parse_fixture("exaone", [](nlohmann::json& j) { j["activation_function"] = "gelu"; });
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("hidden_act 'gelu' is not supported for exaone; supported: silu"),
            std::string::npos)
      << refused.status().message();
}

// The Hub's transformer.h.N.attn.attention.* / ln_1 / c_fc_0 names load as the Llama decoder's.
TEST(Exaone3, TensorsRenamedAsTransformersDoes) {
  auto ck = Checkpoint::open(fixture_dir("exaone"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const auto& t = (*ck)->tensors();
  for (const char* name : {"model.embed_tokens.weight", "model.norm.weight", "model.layers.1.self_attn.q_proj.weight",
                           "model.layers.1.self_attn.o_proj.weight", "model.layers.0.input_layernorm.weight",
                           "model.layers.0.post_attention_layernorm.weight", "model.layers.0.mlp.gate_proj.weight",
                           "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight"})
    EXPECT_EQ(t.count(name), 1u) << name;
  for (const auto& [name, tensor] : t) EXPECT_FALSE(name.starts_with("transformer.")) << name;
}

// The llama3 scaling the fixture exercises moves its logits far outside the tolerance.
TEST(Exaone3, RopeScalingMovesTheLogits) {
  EXPECT_GT(max_diff_with_config("exaone", [](nlohmann::json& j) { j.erase("rope_scaling"); }), 100 * kLogitTol);
}

// llama.cpp's file (gguf_exaone: GgufClassicF32, GgufClassic.*) carries the llama3 scaling as the
// converter's rope_freqs divisors [head_dim / 2].
TEST(Exaone3, GgufCarriesTheScalingAsRopeFreqs) {
  auto file = Checkpoint::open(gguf_path("gguf_exaone"));
  ASSERT_TRUE(file.has_value()) << file.status().to_string();
  EXPECT_EQ((*file)->config().rope_scaling.freq_factors.size(), 8u);
}

TEST(FlexOlmo, Config) {
  auto c = parse_fixture("flex_olmo");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "flex_olmo");
  EXPECT_TRUE(c->post_norms && c->qk_norm && c->qk_norm_whole);
  EXPECT_EQ(c->n_experts, 4);
  EXPECT_EQ(c->n_experts_per_tok, 2);
  EXPECT_EQ(c->moe_intermediate_size, 16) << "intermediate_size: FlexOlmoConfig has no moe_intermediate_size";
  EXPECT_EQ(c->n_moe_layers(), 2) << "every layer sparse";
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_EQ(c->sliding_window, 0);
  auto defaults = parse_fixture("flex_olmo", [](nlohmann::json& j) {
    j.erase("num_experts");
    j.erase("num_experts_per_tok");
  });
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_EQ(defaults->n_experts, 7) << "FlexOlmoConfig's defaults";
  EXPECT_EQ(defaults->n_experts_per_tok, 5);
  auto too_many = parse_fixture("flex_olmo", [](nlohmann::json& j) { j["num_experts_per_tok"] = 5; });
  ASSERT_FALSE(too_many.has_value());
  EXPECT_NE(too_many.status().message().find("num_experts_per_tok"), std::string::npos) << too_many.status().message();
}

// (norm_topk_prob moves nothing here: a token's renormalised top k scales its MoE output by one
// number, which post_feedforward_layernorm, an RMSNorm, divides out; 2e-5 measured.)
TEST(FlexOlmo, PiecesMoveTheLogits) {
  EXPECT_GT(max_diff_with_rules("flex_olmo", [](ModelConfig& c) { c.n_experts_per_tok = 1; }), 100 * kLogitTol)
      << "top 1";
}

TEST(HyperClovax, Config) {
  auto c = parse_fixture("hyperclovax");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "hyperclovax");
  EXPECT_TRUE(c->sandwich_norms) << "use_post_norm: Peri-LN";
  EXPECT_EQ(c->head_dim, 24);
  EXPECT_FLOAT_EQ(c->embedding_multiplier, 3.0f);
  EXPECT_FLOAT_EQ(c->residual_multiplier, 0.5f);
  EXPECT_FLOAT_EQ(c->logits_multiplier(), 2.0f) << "logits_scaling multiplies (Granite's divides)";
  EXPECT_FLOAT_EQ(c->attn_scale, 1.0f / std::sqrt(24.0f));
  auto plain = parse_fixture("hyperclovax_no_post_norm");
  ASSERT_TRUE(plain.has_value()) << plain.status().to_string();
  EXPECT_FALSE(plain->sandwich_norms);
  EXPECT_FLOAT_EQ(plain->attn_scale, 0.2f);
  auto defaults = parse_fixture("hyperclovax", [](nlohmann::json& j) {
    j.erase("use_post_norm");
    j["attention_multiplier"] = nullptr;
  });
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_TRUE(defaults->sandwich_norms) << "HyperCLOVAXConfig's default: on";
  EXPECT_FLOAT_EQ(defaults->attn_scale, 1.0f / std::sqrt(24.0f)) << "null: head_dim^-0.5";
}

// The post norms, their order before residual_multiplier, the logits' multiplier and the default
// attention_multiplier each checked by the fixtures.
TEST(HyperClovax, PiecesMoveTheLogits) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_rules("hyperclovax", [](ModelConfig& c) {
              c.logits_scaling = c.logit_scale;
              c.logit_scale = 0.0f;
            }),
            far)
      << "logits divided";
  EXPECT_GT(max_diff_with_rules("hyperclovax", [](ModelConfig& c) { c.residual_multiplier = 1.0f; }), far);
  EXPECT_GT(max_diff_with_config("hyperclovax", [](nlohmann::json& j) { j["attention_multiplier"] = 1.0; }), far)
      << "Granite's default 1";
  EXPECT_LT(max_diff_with_config("hyperclovax", [](nlohmann::json& j) { j.erase("attention_multiplier"); }), kLogitTol)
      << "absent: head_dim^-0.5, as saved";
  EXPECT_GT(max_diff_with_rules("hyperclovax_no_post_norm", [](ModelConfig& c) { c.embedding_multiplier = 1.0f; }), far);
}

TEST(HyperClovaxAndFlint, InspectNamesThem) {
  expect_inspect_names({{"hyperclovax", {"hyperclovax", "post-attention and post-MLP norms", "logits x 2"}},
                        {"flint", {"flint", "a sink logit per head", "routing:       sigmoid\n", "an ungated shared SwiGLU of 24",
                                   "no RoPE in layers 0,1,4"}}});
}

TEST(Flint, Config) {
  auto c = parse_fixture("flint");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "flint");
  EXPECT_TRUE(c->qk_norm && c->attn_sinks && c->norm_topk_prob);
  EXPECT_FALSE(c->qk_norm_whole || c->sinks_sliding_only || c->shared_gate || c->moe_score_bias);
  EXPECT_EQ(c->moe_scoring, MoeScoring::sigmoid);
  EXPECT_EQ(c->shared_width(), 24);
  EXPECT_EQ(c->sliding_window, 8);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{false, false, true, true, false}));
  EXPECT_EQ(c->nope_layers, (std::vector<bool>{true, true, false, false, true})) << "only the sliding layers rotate";
  EXPECT_EQ(c->n_moe_layers(), 3) << "mlp_only_layers [0, 1]";
  auto defaults = parse_fixture("flint", [](nlohmann::json& j) {
    for (const char* key : {"layer_types", "mlp_only_layers", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
                            "shared_expert_intermediate_size", "norm_topk_prob", "sliding_window"})
      j.erase(key);
    j["num_hidden_layers"] = 10;
  });
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_EQ(defaults->sliding_layers,
            (std::vector<bool>{false, false, true, true, true, false, true, true, true, false})) << "FlintConfig's rule";
  EXPECT_EQ(defaults->n_moe_layers(), 8);
  EXPECT_EQ(defaults->n_experts, 256);
  EXPECT_EQ(defaults->n_experts_per_tok, 6);
  EXPECT_EQ(defaults->moe_intermediate_size, 512);
  EXPECT_EQ(defaults->shared_width(), 1024);
  EXPECT_TRUE(defaults->norm_topk_prob);
  EXPECT_EQ(defaults->sliding_window, 513);
  auto sparse = parse_fixture("flint_sparse");
  ASSERT_TRUE(sparse.has_value()) << sparse.status().to_string();
  EXPECT_EQ(sparse->n_moe_layers(), 2);
  EXPECT_FALSE(sparse->norm_topk_prob);
  EXPECT_TRUE(sparse->qkv_bias && sparse->o_bias);
  refused("flint", [](nlohmann::json& j) { j["sliding_window"] = nullptr; }, "sliding_window must be > 0 for flint");
  refused("flint", [](nlohmann::json& j) { j["hidden_act"] = "gelu"; }, "hidden_act 'gelu' is not supported for flint");
}

// The sinks, NoPE on the full layers, the windows, the renormalisation and the shared expert each
// move the logits (so the fixtures check them).
TEST(Flint, PiecesMoveTheLogits) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_rules("flint", [](ModelConfig& c) { c.attn_sinks = false; }), far) << "no sinks";
  EXPECT_GT(max_diff_with_rules("flint", [](ModelConfig& c) { c.nope_layers.assign(c.nope_layers.size(), false); }), far)
      << "RoPE on the full layers";
  EXPECT_GT(max_diff_with_rules("flint", [](ModelConfig& c) { c.sliding_window = 0; }), far) << "no windows";
  EXPECT_GT(max_diff_with_rules("flint", [](ModelConfig& c) { c.norm_topk_prob = false; }), far) << "not renormalised";
  EXPECT_GT(max_diff_with_rules("flint", [](ModelConfig& c) { c.shared_expert_intermediate_size = 0; }), far)
      << "no shared expert";
  EXPECT_GT(max_diff_with_rules("flint_sparse", [](ModelConfig& c) { c.norm_topk_prob = true; }), far) << "renormalised";
}

TEST(Mellum, Config) {
  auto c = parse_fixture("mellum");
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->arch, "mellum");
  EXPECT_TRUE(c->qk_norm && c->norm_topk_prob);
  EXPECT_FALSE(c->qkv_bias || c->o_bias || c->shared_gate || c->moe_score_bias);
  EXPECT_EQ(c->moe_scoring, MoeScoring::softmax);
  EXPECT_EQ(c->shared_width(), 0);
  EXPECT_EQ(c->n_experts, 8);
  EXPECT_EQ(c->sliding_window, 8);
  EXPECT_EQ(c->sliding_layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f) << "MellumConfig's full_attention base";
  EXPECT_FLOAT_EQ(c->rope_local_theta, 10000.0f) << "and sliding_attention's";
  EXPECT_EQ(c->n_moe_layers(), 3) << "mlp_layer_types: layer 0 dense";
  EXPECT_FALSE(c->is_moe_layer(0));
  auto defaults = parse_fixture("mellum", [](nlohmann::json& j) {
    for (const char* key : {"layer_types", "mlp_layer_types", "num_local_experts", "num_experts_per_tok",
                            "moe_intermediate_size", "norm_topk_prob", "sliding_window", "rope_parameters", "head_dim",
                            "max_position_embeddings"})
      j.erase(key);
  });
  ASSERT_TRUE(defaults.has_value()) << defaults.status().to_string();
  EXPECT_EQ(defaults->sliding_layers, (std::vector<bool>(4, false))) << "MellumConfig: every layer full";
  EXPECT_EQ(defaults->n_moe_layers(), 4) << "and sparse";
  EXPECT_EQ(defaults->n_experts, 64);
  EXPECT_EQ(defaults->n_experts_per_tok, 8);
  EXPECT_EQ(defaults->moe_intermediate_size, 896);
  EXPECT_TRUE(defaults->norm_topk_prob);
  EXPECT_EQ(defaults->sliding_window, 1024);
  EXPECT_EQ(defaults->head_dim, 128);
  EXPECT_EQ(defaults->max_position, 131072);
  EXPECT_FLOAT_EQ(defaults->rope_theta, 500000.0f);
  auto sparse = parse_fixture("mellum_sparse");
  ASSERT_TRUE(sparse.has_value()) << sparse.status().to_string();
  EXPECT_EQ(sparse->n_moe_layers(), 4);
  EXPECT_FALSE(sparse->norm_topk_prob);
  EXPECT_TRUE(sparse->qkv_bias && sparse->o_bias);
  EXPECT_FLOAT_EQ(sparse->rope_theta, 20000.0f);
  EXPECT_FLOAT_EQ(sparse->rope_local_theta, 5000.0f);
  // What transformers' MellumForCausalLM cannot run either, refused by name.
  refused("mellum", [](nlohmann::json& j) { j["sliding_window"] = nullptr; },
          "sliding_window must be > 0 for mellum's sliding layers");
  refused("mellum", [](nlohmann::json& j) { j["rope_parameters"]["sliding_attention"]["partial_rotary_factor"] = 0.5; },
          "partial_rotary_factor 0.500000 is not supported for mellum: MellumAttention rotates whole heads");
  refused("mellum", [](nlohmann::json& j) { j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}}; },
          "rope_parameters must hold full_attention and sliding_attention for mellum");
  refused("mellum", [](nlohmann::json& j) { j["mlp_layer_types"] = {"dense", "sparse"}; },
          "mlp_layer_types must list one of");
}

// Every cached decode step (the sliding layers' pages at their own base) against transformers' generate.
TEST(Mellum, DecodeStepsMatchTransformers) {
  for (const char* fixture : {"mellum", "mellum_sparse"}) testing::expect_decode_steps_match(fixture);
}

// The per-type RoPE bases, the windows, the dense layer and the renormalisation each move the
// logits (so the fixtures check them).
TEST(Mellum, PiecesMoveTheLogits) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_rules("mellum", [](ModelConfig& c) { c.rope_local_theta = c.rope_theta; }), far)
      << "one base for every layer";
  EXPECT_GT(max_diff_with_rules("mellum", [](ModelConfig& c) { c.sliding_window = 0; }), far) << "no windows";
  EXPECT_GT(max_diff_with_rules("mellum", [](ModelConfig& c) { c.norm_topk_prob = false; }), far) << "not renormalised";
  EXPECT_GT(max_diff_with_rules("mellum_sparse", [](ModelConfig& c) { c.norm_topk_prob = true; }), far) << "renormalised";
  EXPECT_GT(max_diff_with_rules("mellum_sparse", [](ModelConfig& c) { c.rope_theta = 500000.0f; }), far)
      << "the full layers' base";
}

}  // namespace
}  // namespace brigade
