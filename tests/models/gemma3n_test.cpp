// Gemma 3n's language model (Gemma3nForCausalLM; Gemma3nForConditionalGeneration's, text only)
// against transformers beyond one prefill (hf_fixture_test.cpp covers that for the gemma3n and
// gemma3n_mm fixtures, scripts/make_fixtures.py): every cached decode step, prompts split over
// steps and over a cached prefix (the K/V-reusing layers read the K/V their source layer wrote in
// earlier steps), two sequences in one step, the config rules read, what is refused, and that each
// Gemma 3n rule the fixture pins moves the logits far past the tolerance when changed.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/gemma3n.h"
#include "models/inspect.h"
#include "models/model_config.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::make_step;
using testing::read_fixture_cases;

TEST(Gemma3n, ConfigRules) {
  auto ck = Checkpoint::open(fixture_dir("gemma3n"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "gemma3n_text");
  EXPECT_EQ(c.norm_offset, 0.0f);  // Gemma3nRMSNorm scales by w
  EXPECT_EQ(c.attn_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.embed_scale, std::sqrt(32.0f));
  EXPECT_EQ(c.final_softcap, 10.0f);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.rope_local_theta, 10000.0f);
  EXPECT_EQ(c.rope_theta, 1000000.0f);
  const auto& g = c.gemma3n;
  EXPECT_EQ(g.altup_inputs, 4);
  EXPECT_EQ(g.laurel_rank, 8);
  EXPECT_EQ(g.per_layer_dim, 8);
  EXPECT_EQ(g.per_layer_vocab, 100);
  EXPECT_EQ(g.intermediate, (std::vector<int>{64, 48, 64, 64, 32, 64}));
  EXPECT_EQ(c.intermediate_size, 64);
  EXPECT_EQ(g.sparsity, (std::vector<float>{0.95f, 0.0f, 0.0f, 0.0f, 0.95f, 0.0f}));
  // Layers 4 (sliding) and 5 (full) reuse the last earlier layer of their type: 3 and 2.
  EXPECT_EQ(g.kv_layer, (std::vector<int>{0, 1, 2, 3, 3, 2}));
  EXPECT_EQ(g.n_kv_layers(), 4);
  EXPECT_EQ(g.text_vocab_end, 0);
  EXPECT_TRUE(c.vision_off.empty());
  auto info = inspect_model(fixture_dir("gemma3n"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  EXPECT_NE(format_model_info(*info).find("gemma3n:       AltUp 4 streams (active 0), LAuReL rank 8, per-layer inputs "
                                          "of 8 from a table of 100 rows (read from the file per token), K/V in 4 of 6 "
                                          "layers (the last 2 reuse them), activation sparsity in 2 layers"),
            std::string::npos)
      << format_model_info(*info);
  // torch's Normal(0, 1).icdf(0.95) in f32 (1.6448533535003662, the value llama.cpp's converter
  // writes): erfinv in f32 of 2 * 0.95f - 1, within its rounding; other quantiles exactly.
  EXPECT_NEAR(normal_quantile(0.95), 1.6448533535003662, 5e-7);
  EXPECT_NEAR(normal_quantile(0.5), 0.0, 1e-15);
  EXPECT_NEAR(normal_quantile(0.01), -2.3263478740408408, 1e-12);
  EXPECT_NEAR(normal_quantile(0.999), 3.090232306167813, 1e-12);
}

TEST(Gemma3n, DecodeStepsMatchTransformers) {
  for (const char* fixture : {"gemma3n", "gemma3n_mm"}) testing::expect_decode_steps_match(fixture);
}

// The long prompt (40 tokens, the window 8) in chunks of 7 and 5 (pages of 4, so chunks cross
// pages), every row's logits against transformers' prefill; then two sequences in one step, one
// continuing its chunked prompt and one starting afresh.
TEST(Gemma3n, ChunkedPrefillAndMixedStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir("gemma3n"), *backend);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases("gemma3n");
  const auto& fc = cases.back();
  ASSERT_EQ(fc.prompt.size(), 40u);
  for (int chunk : {7, 5}) {
    const float worst = testing::chunked_max_diff(*model, *backend, fc, chunk);
    EXPECT_LE(worst, kLogitTol) << "chunks of " << chunk;
    RecordProperty("chunked_max_abs_diff_" + std::to_string(chunk), std::to_string(worst));
  }
  // Sequence 0: rows 0..19 in one step, then rows 20..39 beside sequence 1's whole first prompt.
  EXPECT_LE(testing::mixed_step_max_diff(*model, *backend, fc, cases.front(), 20), kLogitTol);
}

// A prompt whose first 16 positions (4 pages) another sequence computed: the second sequence's
// block table starts with those pages and it runs only its last 24 tokens, as the prefix cache
// serves it. The K/V-reusing layers read their source layers' cached K/V.
TEST(Gemma3n, CachedPrefixMatchesTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_or_fail(fixture_dir("gemma3n"), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_LE(testing::cached_prefix_max_diff(*model, *backend, read_fixture_cases("gemma3n").back(), 16), kLogitTol);
}

// gemma3n_mm: a Gemma3nForConditionalGeneration checkpoint serves its language model; its towers
// are off (vision_off says why), and ids of the towers' embedders are refused by name.
TEST(Gemma3n, MultimodalCheckpointServesItsLanguageModel) {
  auto ck = Checkpoint::open(fixture_dir("gemma3n_mm"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const ModelConfig& c = (*ck)->config();
  EXPECT_EQ(c.arch, "gemma3n_text");
  EXPECT_TRUE(c.multimodal_text);
  EXPECT_FALSE(c.vision.present());
  EXPECT_NE(c.vision_off.find("vision"), std::string::npos) << c.vision_off;
  EXPECT_EQ(c.gemma3n.text_vocab_end, 128);
  EXPECT_EQ(c.gemma3n.kv_layer, (std::vector<int>{0, 1, 2, 1}));
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir("gemma3n_mm"), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->kv_layout(4, 4, DType::f32).n_layers, 3);
  auto kv = KvCache::allocate(*backend, model->kv_layout(4, 4, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const StepBatch step = make_step({{0, {1, 17, 130}, 0, false}}, 4, 4);
  auto buf = backend->allocate(sizeof(float) * 144);
  ASSERT_TRUE(buf.has_value());
  const Status st = model->forward(step, *kv, buf->view(DType::f32, {1, 144}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("token id 130 is a Gemma 3n vision or audio token"), std::string::npos) << st.message();
}

// Each rule changed in the parsed config moves the logits of the long prompt far past the
// tolerance: the K/V source of a reusing layer, the sparsity, the correct_output_scale, the
// windows, the active stream.
TEST(Gemma3n, RulesChangeTheResult) {
  auto diff_with = [](const std::function<void(ModelConfig&)>& edit) {
    return testing::max_diff_with_loader("gemma3n", edit, load_gemma3n);
  };
  EXPECT_LE(diff_with([](ModelConfig&) {}), kLogitTol);
  const float floor = 100 * kLogitTol;
  EXPECT_GT(diff_with([](ModelConfig& c) { c.gemma3n.kv_layer[5] = 3; }), floor) << "layer 5 reads layer 3's K/V";
  EXPECT_GT(diff_with([](ModelConfig& c) { c.gemma3n.sparsity.assign(6, 0.0f); }), floor) << "dense MLPs";
  EXPECT_GT(diff_with([](ModelConfig& c) { c.gemma3n.altup_correct_scale = false; }), floor) << "no correct_output_scale";
  EXPECT_GT(diff_with([](ModelConfig& c) { c.sliding_layers.assign(6, false); }), floor) << "no window";
  EXPECT_GT(diff_with([](ModelConfig& c) { c.gemma3n.altup_active = 1; }), floor) << "active stream 1";
}

// What the config may not say is refused naming the field.
TEST(Gemma3n, BadConfigsAreRefusedByName) {
  auto text = read_text_file(fixture_dir("gemma3n") + "/config.json");
  ASSERT_TRUE(text.has_value());
  const auto base = nlohmann::json::parse(*text);
  auto error = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = base;
    edit(j);
    auto c = parse_hf_config(j.dump());
    return c ? std::string() : c.status().message();
  };
  EXPECT_EQ(error([](nlohmann::json&) {}), "");
  EXPECT_NE(error([](auto& j) { j["num_kv_shared_layers"] = 6; }).find("num_kv_shared_layers"), std::string::npos);
  EXPECT_NE(error([](auto& j) { j["activation_sparsity_pattern"] = {0.5}; }).find("activation_sparsity_pattern"),
            std::string::npos);
  EXPECT_NE(error([](auto& j) { j["intermediate_size"] = {64, 64}; }).find("intermediate_size"), std::string::npos);
  EXPECT_NE(error([](auto& j) { j["altup_active_idx"] = 4; }).find("altup_active_idx"), std::string::npos);
  EXPECT_NE(error([](auto& j) { j["hidden_activation"] = "silu"; }).find("hidden_activation 'silu' is not supported for gemma3n"),
            std::string::npos);
  EXPECT_NE(error([](auto& j) {
              j["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention",
                                  "sliding_attention", "full_attention"};
            }).find("no layer before the shared ones has that type"),
            std::string::npos);
  EXPECT_NE(error([](auto& j) { j["rope_parameters"]["sliding_attention"]["rope_type"] = "linear";
                                j["rope_parameters"]["sliding_attention"]["factor"] = 2.0; })
                .find("sliding"),
            std::string::npos);
}

// Model::step_cost: each token of a step reads its embedding row and its row of the per-layer
// table beside the weights, and a layer that reuses K/V reads its source's K/V again.
TEST(Gemma3n, StepCostCountsThePerLayerRowsAndTheSharedReads) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir("gemma3n"), *backend);
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  const double row_bytes = 4.0 * (c.hidden_size + c.n_layers * c.gemma3n.per_layer_dim);  // f32 tables
  const StepBatch one = make_step({{0, {5}, 0, false}}, 4, 4), two = make_step({{0, {5, 6}, 0, false}}, 4, 4);
  const StepCost a = model->step_cost(one, 0.0), b = model->step_cost(two, 0.0);
  EXPECT_DOUBLE_EQ(b.bytes - a.bytes, row_bytes);
  // kv bytes per token K = 1: the step reads its 1 visible position in each of the 6 layers and
  // writes 1 token of the 4 cache layers: 6 / 4 + 1.
  const StepCost k = model->step_cost(one, 1.0);
  EXPECT_DOUBLE_EQ(k.bytes - a.bytes, 6.0 / 4.0 + 1.0);
  EXPECT_GT(model->n_params(), 0);
  EXPECT_LT(model->weight_bytes(), model->n_params() * 4) << "the per-layer table stays in the mapping";
}

}  // namespace
}  // namespace brigade
