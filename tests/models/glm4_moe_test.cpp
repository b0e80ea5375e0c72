// GLM-4.5 / 4.6 (Glm4MoeForCausalLM, model_type glm4_moe) against transformers beyond one prefill
// (hf_fixture_test.cpp covers that for both fixtures): the config as brigade reads it, every
// cached decode step, each of the architecture's parts moving the logits, the defaults the Hub's
// configs rely on, the MTP layer the checkpoints carry, and refusals.
//
// glm4_moe (scripts/make_fixtures.py): q/k/v biases, q/k norms, head_dim 32 over hidden 64, RoPE
// on half of each head, layer 0 dense, 8 experts in 2 groups (top-1 group), top-2 renormalised
// times 2.5, one shared expert. glm4_moe_step: GLM-4.5-Air's other rules (no norms or biases, no
// groups, not renormalised, every layer sparse, two shared experts) and an MTP layer stored as
// model.layers.2.*.
#include <gtest/gtest.h>

#include <filesystem>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/inspect.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::decode_max_diff;
using testing::fixture_dir;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::max_diff_with_config;
using testing::max_diff_with_rules;
using testing::read_fixture_cases;
using testing::run_fixture_case;

// The fixture's config.json edited by `edit`, opened as a checkpoint in a temporary directory.
Expected<std::unique_ptr<Checkpoint>> open_edited(const testing::TempDir& dir, const std::string& fixture,
                                                  const std::function<void(nlohmann::json&)>& edit) {
  std::filesystem::copy_file(fixture_dir(fixture) + "/model.safetensors", dir.file("model.safetensors"));
  auto j = nlohmann::json::parse(read_text_file(fixture_dir(fixture) + "/config.json").value());
  edit(j);
  testing::write_text(dir.file("config.json"), j.dump());
  return Checkpoint::open(dir.str());
}

TEST(Glm4Moe, ConfigAsLoaded) {
  auto ck = Checkpoint::open(fixture_dir("glm4_moe"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "glm4_moe");
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.o_bias) << "o_proj has no bias whatever attention_bias says";
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rope_dims(), 16);
  EXPECT_EQ(c.rope_style, RopeStyle::neox);
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_EQ(c.shared_width(), 32);
  EXPECT_FALSE(c.shared_gate);
  EXPECT_EQ(c.first_k_dense_replace, 1);
  EXPECT_EQ(c.n_moe_layers(), 2);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_EQ(c.moe_scoring, MoeScoring::sigmoid);
  EXPECT_TRUE(c.moe_score_bias);
  EXPECT_EQ(c.moe_group_score, MoeGroupScore::top2_sum);
  EXPECT_EQ(c.n_group, 2);
  EXPECT_EQ(c.topk_group, 1);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
  EXPECT_EQ(c.n_mtp_layers, 1) << "num_nextn_predict_layers (loaded with speculative method mtp)";

  auto air = Checkpoint::open(fixture_dir("glm4_moe_step"));
  ASSERT_TRUE(air.has_value()) << air.status().to_string();
  const ModelConfig& a = (*air)->config();
  EXPECT_FALSE(a.qkv_bias || a.o_bias || a.qk_norm);
  EXPECT_EQ(a.rope_dims(), 8);
  EXPECT_EQ(a.moe_group_score, MoeGroupScore::none);
  EXPECT_FALSE(a.norm_topk_prob);
  EXPECT_EQ(a.shared_width(), 48) << "two shared experts of 24";
  EXPECT_EQ(a.n_moe_layers(), 2);

  auto info = inspect_model(fixture_dir("glm4_moe"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("rotary dims 16 of 32"), std::string::npos) << text;
  EXPECT_NE(text.find("sigmoid + e_score_correction_bias (selection only), groups 1 of 2 by top-2 sum, "
                      "routed_scaling_factor 2.5, shared experts 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("sparse layers: 2 of 3 (dense: 0)"), std::string::npos) << text;
}

TEST(Glm4Moe, DecodeStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  for (const char* name : {"glm4_moe", "glm4_moe_step"}) {
    auto model = load_or_fail(fixture_dir(name), *backend);
    ASSERT_NE(model, nullptr) << name;
    for (const auto& fc : read_fixture_cases(name)) {
      ASSERT_FALSE(fc.decode_logits.empty()) << name;
      const float d = decode_max_diff(*model, *backend, fc);
      EXPECT_LE(d, kLogitTol) << name << ", prompt of " << fc.prompt.size();
      RecordProperty(std::string(name) + "_decode_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(d));
    }
  }
}

// Each part of the architecture shows in the logits: the q/k norms, the partial rotation, the
// routed scaling, the groups, the selection bias, the shared expert, and the renormalisation.
TEST(Glm4Moe, EachPartChangesTheResult) {
  const float far = 100 * kLogitTol;
  EXPECT_GT(max_diff_with_rules("glm4_moe", [](ModelConfig& c) { c.qk_norm = false; }), far);
  EXPECT_GT(max_diff_with_config("glm4_moe", [](nlohmann::json& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.0; }),
            far);
  EXPECT_GT(max_diff_with_config("glm4_moe", [](nlohmann::json& j) { j["routed_scaling_factor"] = 1.0; }), far);
  EXPECT_GT(max_diff_with_config("glm4_moe", [](nlohmann::json& j) { j["topk_group"] = 2; }), far);
  EXPECT_GT(max_diff_with_rules("glm4_moe", [](ModelConfig& c) { c.moe_score_bias = false; }), far);
  EXPECT_GT(max_diff_with_config("glm4_moe", [](nlohmann::json& j) { j["n_shared_experts"] = 0; }), far);
  EXPECT_GT(max_diff_with_config("glm4_moe", [](nlohmann::json& j) { j["norm_topk_prob"] = false; }), far);
  EXPECT_GT(max_diff_with_config("glm4_moe_step", [](nlohmann::json& j) { j["norm_topk_prob"] = true; }), far);
}

// The Hub's configs write partial_rotary_factor at the top level, or not at all (Glm4MoeConfig's
// default, 0.5); transformers 5 writes it into rope_parameters. All three read alike.
TEST(Glm4Moe, PartialRotaryFactorWhereverWrittenAndItsDefault) {
  EXPECT_LE(max_diff_with_config("glm4_moe_step", [](nlohmann::json& j) { j["rope_parameters"].erase("partial_rotary_factor"); }),
            kLogitTol);
  EXPECT_LE(max_diff_with_config("glm4_moe", [](nlohmann::json& j) {
              j["rope_parameters"].erase("partial_rotary_factor");
              j["partial_rotary_factor"] = 0.5;
            }),
            kLogitTol);
  // The Hub's older form: rope_theta at the top level and rope_scaling null.
  EXPECT_LE(max_diff_with_config("glm4_moe", [](nlohmann::json& j) {
              j.erase("rope_parameters");
              j["rope_theta"] = 10000.0;
              j["rope_scaling"] = nullptr;
              j["partial_rotary_factor"] = 0.5;
            }),
            kLogitTol);
}

// GLM-4.5's checkpoints store the MTP layer after the last one (model.layers.{L}.*: eh_proj,
// enorm, hnorm, shared_head and a whole decoder layer). Without speculative method mtp it is not
// loaded (the logits above match transformers, which skips it too).
TEST(Glm4Moe, TheStoredMtpLayerIsLeftAlone) {
  auto ck = Checkpoint::open(fixture_dir("glm4_moe_step"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  EXPECT_TRUE((*ck)->tensors().contains("model.layers.2.eh_proj.weight"));
  EXPECT_TRUE((*ck)->tensors().contains("model.layers.2.mlp.experts.0.gate_proj.weight"));
  // Without LoadOptions::mtp the layer is neither loaded nor given K/V (tests/models/mtp_test.cpp
  // runs it).
  auto backend = make_cpu_backend({.n_threads = 1});
  auto plain = testing::load_or_fail(fixture_dir("glm4_moe_step"), *backend);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->n_mtp_layers(), 0);
  EXPECT_EQ(plain->kv_layout(4, 4, DType::f32).n_layers, 2);
}

TEST(Glm4Moe, ImpossibleConfigsAreRefusedNamingTheField) {
  auto refused = [](const std::function<void(nlohmann::json&)>& edit, const std::string& field) {
    const testing::TempDir dir("glm4_bad");
    auto ck = open_edited(dir, "glm4_moe", edit);
    ASSERT_FALSE(ck.has_value()) << field;
    EXPECT_NE(ck.status().message().find(field), std::string::npos) << ck.status().to_string();
  };
  refused([](nlohmann::json& j) { j["scoring_func"] = "softmax"; }, "scoring_func 'softmax'");
  refused([](nlohmann::json& j) { j["n_group"] = 3; }, "n_group");
  refused([](nlohmann::json& j) { j["topk_group"] = 3; }, "topk_group");
  refused([](nlohmann::json& j) { j["num_experts_per_tok"] = 5; }, "num_experts_per_tok");
  refused([](nlohmann::json& j) { j["hidden_act"] = "gelu"; }, "hidden_act 'gelu'");
  refused([](nlohmann::json& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.5; }, "partial_rotary_factor");
  refused([](nlohmann::json& j) { j["first_k_dense_replace"] = 9; }, "first_k_dense_replace");
}

}  // namespace
}  // namespace brigade
