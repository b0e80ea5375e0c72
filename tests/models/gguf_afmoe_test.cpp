// llama.cpp's Arcee GGUF files (models/gguf_arcee.h): gguf_afmoe and gguf_arcee, written by
// llama.cpp's own converter (scripts/make_gguf_arcee_fixtures.py) from tiny AfmoeForCausalLM and
// ArceeForCausalLM checkpoints of the Hugging Face fixtures' shapes (tests/fixtures/afmoe, arcee).
// Their logits, decode steps and greedy tokens against transformers' (which llama.cpp's match
// within 2.1e-6: the script's --llamacpp pass), their configs as the Hugging Face fixtures', what
// the files exercise, and afmoe's keys as llama.cpp's loader reads them, with their refusals.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "chat_test_util.h"
#include "cpu/cpu_backend.h"
#include "gguf_variants_util.h"
#include "gguf_writer.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::expect_refused;
using testing::fixture_dir;
using testing::gguf_path;
using testing::kLogitTol;

class GgufArceeF32 : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufArceeF32, LogitsDecodeAndGreedyTokensMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = testing::load_or_fail(gguf_path(GetParam()), *backend);
  ASSERT_NE(model, nullptr);
  testing::expect_fixture_cases_match(*model, *backend, GetParam(), 5e-4f);
  for (const auto& fc : testing::read_fixture_cases(GetParam()))
    RecordProperty("max_abs_diff_" + std::to_string(fc.prompt.size()),
                   std::to_string(testing::run_fixture_case(*model, *backend, fc).max_abs_diff));
  // The reference is what llama.cpp computes from the file too (the script's --llamacpp pass).
  const auto ref = testing::load_fixture_json(GetParam() + "/llamacpp.json");
  ASSERT_FALSE(ref.is_discarded());
  ASSERT_EQ(ref["logits_max_diff"].size(), 3u);
  for (const auto& d : ref["logits_max_diff"]) EXPECT_LE(d.get<double>(), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufArceeF32, ::testing::Values("gguf_afmoe", "gguf_arcee"),
                         [](const auto& p) { return p.param; });

// gguf_afmoe reads as tests/fixtures/afmoe: the gate, per-head q/k norms, windows of 8 on layers
// 0-2 with RoPE and layer 3 full without, the four norms, the muP scale, the dense layer 0, then
// sigmoid routing with the selection bias, renormalised, times 2.5, beside 2 shared experts; the
// tensors under the names load_llama and load_moe_block's GGUF branch read.
TEST(GgufAfmoe, ReadsAsItsHuggingFaceConfig) {
  auto hf = Checkpoint::open(fixture_dir("afmoe"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  auto file = Checkpoint::open(gguf_path("gguf_afmoe"));
  ASSERT_TRUE(file.has_value()) << file.status().to_string();
  const ModelConfig& g = (*file)->config();
  testing::expect_same_attention(g, h);
  EXPECT_EQ(g.n_kv_heads, h.n_kv_heads);
  EXPECT_TRUE(g.attn_gate);
  EXPECT_TRUE(g.sandwich_norms);
  EXPECT_EQ(g.sliding_window, h.sliding_window);
  EXPECT_EQ(g.sliding_layers, h.sliding_layers);
  EXPECT_EQ(g.nope_layers, h.nope_layers);
  EXPECT_EQ(g.embedding_multiplier, h.embedding_multiplier);
  testing::expect_same_experts(g, h);
  EXPECT_EQ(g.first_k_dense_replace, h.first_k_dense_replace);
  EXPECT_EQ(g.n_group, 1);
  EXPECT_EQ(g.tie_embeddings, h.tie_embeddings);
  const auto& gt = (*file)->tensors();
  for (const auto& [name, t] : (*hf)->tensors()) {
    if (name.find(".mlp.experts.") != std::string::npos || name.find(".mlp.router.") != std::string::npos ||
        name.ends_with(".mlp.expert_bias"))
      continue;  // (the Hub's experts one by one, AfmoeTokenChoiceRouter's names)
    EXPECT_EQ(gt.count(name), 1u) << name;
  }
  const int64_t hidden = g.hidden_size, e = g.n_experts, inter = g.moe_intermediate_size;
  for (int l = g.first_k_dense_replace; l < g.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.";
    ASSERT_EQ(gt.count(p + "experts.gate_proj"), 1u) << p;
    EXPECT_EQ(gt.at(p + "experts.gate_proj").shape, (std::vector<int64_t>{e, inter, hidden}));
    EXPECT_EQ(gt.at(p + "gate.weight").shape, (std::vector<int64_t>{e, hidden}));
    EXPECT_EQ(gt.at(p + "gate.e_score_correction_bias").shape, (std::vector<int64_t>{e}));
    EXPECT_EQ(gt.at(p + "shared_experts.gate_proj.weight").shape, (std::vector<int64_t>{g.shared_width(), hidden}));
  }
}

// What gguf_afmoe exercises: the gate, the full layer's missing RoPE, the windows, the muP scale,
// the selection bias, the renormalisation, route_scale and the shared experts each move the logits.
TEST(GgufAfmoe, EachPieceChangesTheResult) {
  const std::string path = gguf_path("gguf_afmoe");
  for (const auto& edit : std::vector<std::function<void(ModelConfig&)>>{
           [](ModelConfig& c) { c.attn_gate = false; },
           [](ModelConfig& c) { c.nope_layers.assign(c.nope_layers.size(), false); },
           [](ModelConfig& c) { c.sliding_window = 0; },
           [](ModelConfig& c) { c.embedding_multiplier = 0.0f; },
           [](ModelConfig& c) { c.moe_score_bias = false; },
           [](ModelConfig& c) { c.norm_topk_prob = false; },
           [](ModelConfig& c) { c.routed_scaling_factor = 1.0f; },
           [](ModelConfig& c) { c.n_shared_experts = 0; }})
    EXPECT_GT(testing::max_diff_with_rules("gguf_afmoe", edit, path), 100 * kLogitTol);
}

// afmoe's keys as llama.cpp's loader reads them: without attention.sliding_window no window (but
// still no RoPE on every 4th layer: n_no_rope_layer_step is fixed), without expert_gating_func
// sigmoid, no renormalisation or scale where the keys are absent, no selection bias where
// exp_probs_b is not stored; a sliding_window_pattern list marks the sliding layers. Refused,
// naming the key: softmax gating, expert_shared_count and expert_feed_forward_length missing.
TEST(GgufAfmoe, KeysAndTheirRefusals) {
  const testing::TempDir dir("gguf_afmoe");
  using testing::gguf_u32;
  const std::vector<testing::GgufKv> common = testing::moe_file_keys("afmoe", 4, 3, 1);
  const testing::GgufTensorShapes tensors = testing::moe_file_tensors(4, 1);
  testing::write_gguf_zeros(dir.file("plain.gguf"), common, tensors);
  auto ck = Checkpoint::open(dir.file("plain.gguf"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "afmoe");
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.nope_layers, (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(c.moe_scoring, MoeScoring::sigmoid);
  EXPECT_FALSE(c.moe_score_bias);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_EQ(c.routed_scaling_factor, 1.0f);
  EXPECT_EQ(c.n_moe_layers(), 1);
  EXPECT_EQ(c.shared_width(), 16);
  EXPECT_FLOAT_EQ(c.embedding_multiplier, 8.0f);

  std::vector<testing::GgufKv> pattern = common;
  pattern.push_back(gguf_u32("afmoe.attention.sliding_window", 16));
  pattern.push_back(gguf_u32("afmoe.attention.sliding_window_pattern", 2));
  testing::write_gguf_zeros(dir.file("pattern.gguf"), pattern, tensors);
  auto pk = Checkpoint::open(dir.file("pattern.gguf"));
  ASSERT_TRUE(pk.has_value()) << pk.status().to_string();
  EXPECT_EQ((*pk)->config().sliding_window, 16);
  EXPECT_EQ((*pk)->config().sliding_layers, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ((*pk)->config().nope_layers, (std::vector<bool>{false, false, false, true})) << "RoPE's period stays 4";

  std::vector<testing::GgufKv> softmax = common;
  softmax.push_back(gguf_u32("afmoe.expert_gating_func", 1));
  expect_refused(dir.file("refused.gguf"), softmax, tensors, StatusCode::unsupported, "expert_gating_func");
  for (const std::string key : {"afmoe.expert_shared_count", "afmoe.expert_feed_forward_length"}) {
    std::vector<testing::GgufKv> kv;
    for (const testing::GgufKv& e : common)
      if (e.key != key) kv.push_back(e);
    expect_refused(dir.file("missing.gguf"), kv, tensors, StatusCode::corrupt, key);
  }
}

// gguf_arcee reads as tests/fixtures/arcee with its q/k rows permuted (ArceeModel is a LlamaModel):
// the relu2 MLP, YaRN's factor and original context; dropping YaRN moves the logits.
TEST(GgufArcee, ReadsAsItsHuggingFaceConfigWithPermutedRows) {
  auto hf = Checkpoint::open(fixture_dir("arcee"));
  ASSERT_TRUE(hf.has_value()) << hf.status().to_string();
  const ModelConfig& h = (*hf)->config();
  const ModelConfig g = testing::open_config("gguf_arcee");
  testing::expect_same_attention(g, h, testing::RopeRows::permuted);
  EXPECT_EQ(g.mlp_activation, MlpActivation::relu2);
  EXPECT_EQ(g.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_EQ(g.rope_scaling.factor, h.rope_scaling.factor);
  EXPECT_EQ(g.rope_scaling.original_max_position, h.rope_scaling.original_max_position);
  EXPECT_GT(testing::max_diff_with_rules("gguf_arcee", [](ModelConfig& c) { c.rope_scaling = RopeScaling{}; },
                                         gguf_path("gguf_arcee")),
            100 * kLogitTol);
}

}  // namespace
}  // namespace brigade
