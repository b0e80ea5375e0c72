// Gemma 4's language model (Gemma4ForCausalLM; Gemma4ForConditionalGeneration's, text only)
// against transformers beyond one prefill (hf_fixture_test.cpp covers that for the gemma4_dense,
// gemma4_e2b, gemma4_moe and gemma4_mm fixtures, scripts/make_gemma4_fixtures.py): every cached
// decode step, prompts split over steps, two sequences in one step, a cached prefix (the
// K/V-reusing layers read what their source layer wrote earlier), the config rules read (both
// config.json forms of the full layers' geometry), the KV pool's per-layer shapes, what is
// refused, and that each rule the fixtures pin moves the logits far past the tolerance when changed.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/gemma4.h"
#include "models/inspect.h"
#include "models/model_config.h"
#include "tests/memory_only_backend.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::kLogitTol;
using testing::load_or_fail;
using testing::make_step;
using testing::read_fixture_cases;

constexpr const char* kFixtures[] = {"gemma4_dense", "gemma4_e2b", "gemma4_moe", "gemma4_mm"};

ModelConfig config_of(const std::string& fixture) {
  auto ck = Checkpoint::open(fixture_dir(fixture));
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  return ck ? (*ck)->config() : ModelConfig{};
}

TEST(Gemma4, ConfigRules) {
  const ModelConfig c = config_of("gemma4_dense");
  EXPECT_EQ(c.arch, "gemma4_text");
  EXPECT_EQ(c.norm_offset, 0.0f);  // Gemma4RMSNorm scales by w
  EXPECT_EQ(c.attn_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.embed_scale, std::sqrt(32.0f));
  EXPECT_EQ(c.final_softcap, 10.0f);
  EXPECT_EQ(c.sliding_window, 8);
  EXPECT_EQ(c.rope_local_theta, 10000.0f);
  EXPECT_EQ(c.rope_theta, 1000000.0f);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  const auto& g = c.gemma4;
  EXPECT_EQ(g.full_head_dim, 32);
  EXPECT_EQ(g.full_kv_heads, 1);
  EXPECT_TRUE(g.k_eq_v);
  EXPECT_EQ(g.full_rope_partial, 0.25f);
  EXPECT_EQ(g.per_layer_dim, 0);
  EXPECT_EQ(g.kv_layer, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(g.moe);
  EXPECT_TRUE(g.tower_tokens.empty());
  const ModelConfig e = config_of("gemma4_e2b");
  EXPECT_FALSE(e.gemma4.k_eq_v);
  EXPECT_EQ(e.gemma4.full_kv_heads, 2) << "num_global_key_value_heads applies under attention_k_eq_v only";
  EXPECT_EQ(e.gemma4.per_layer_dim, 8);
  EXPECT_EQ(e.gemma4.per_layer_vocab, 128);
  // Layers 4 (sliding) and 5 (full) reuse layers 3 and 2, with double-wide MLPs.
  EXPECT_EQ(e.gemma4.kv_layer, (std::vector<int>{0, 1, 2, 3, 3, 2}));
  EXPECT_EQ(e.gemma4.intermediate, (std::vector<int>{48, 48, 48, 48, 96, 96}));
  EXPECT_EQ(e.intermediate_size, 96);
  const ModelConfig m = config_of("gemma4_moe");
  EXPECT_TRUE(m.gemma4.moe);
  EXPECT_EQ(m.n_experts, 8);
  EXPECT_EQ(m.n_experts_per_tok, 2);
  EXPECT_EQ(m.moe_intermediate_size, 16);
  auto info = inspect_model(fixture_dir("gemma4_moe"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  EXPECT_NE(format_model_info(*info).find("gemma4:        full layers 4 q, 1 kv, head_dim 32 (K = V), RoPE on 25% of "
                                          "their pairs; K/V in 3 of 3 layers, 8 experts (top 2) beside the MLP"),
            std::string::npos)
      << format_model_info(*info);
}

// Model::step_cost: each token reads its embedding row and its row of the per-layer table beside
// the weights; the K/V-reusing layers read their source's K/V again.
TEST(Gemma4, StepCostCountsThePerLayerRowsAndTheSharedReads) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir("gemma4_e2b"), *backend);
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  const double row_bytes = 4.0 * (c.hidden_size + c.n_layers * c.gemma4.per_layer_dim);  // f32 tables
  const StepBatch one = make_step({{0, {5}, 0, false}}, 4, 4), two = make_step({{0, {5, 6}, 0, false}}, 4, 4);
  const StepCost a = model->step_cost(one, 0.0), b = model->step_cost(two, 0.0);
  EXPECT_DOUBLE_EQ(b.bytes - a.bytes, row_bytes);
  // kv bytes per token 1 spread over the 4 cache layers by row width (sliding 0, 1, 3; full 2, its
  // rows twice as wide): the step reads its 1 visible position in each of the 6 layers (4 and 5
  // read 3's and 2's again) and writes 1 token: (4 s + 2 f) / (3 s + f) + 1.
  const double s = c.n_kv_heads * c.head_dim, f = c.gemma4.full_kv_heads * c.gemma4.full_head_dim;
  ASSERT_EQ(f, 2 * s);
  EXPECT_NEAR(model->step_cost(one, 1.0).bytes - a.bytes, (4 * s + 2 * f) / (3 * s + f) + 1.0, 1e-9);
  EXPECT_LT(model->weight_bytes(), model->n_params() * 4) << "the per-layer table stays in the mapping";
}

// The full layers' K/V rows are wider than the sliding layers' (KvLayout::layer_shapes): a layer's
// reads count at its own row width, not the pool's average. A decode token at position 20 sees 8
// positions in the 4 sliding layers (window 8) and 21 in the 2 full layers.
TEST(Gemma4, StepCostWeighsEachLayersReadsByItsRowWidth) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir("gemma4_e2b"), *backend);
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.sliding_window, 8);
  const double s = c.n_kv_heads * c.head_dim, f = c.gemma4.full_kv_heads * c.gemma4.full_head_dim;
  const StepBatch step = make_step({{0, {5}, 20, false}}, 4, 8);
  const double read = model->step_cost(step, 1.0).bytes - model->step_cost(step, 0.0).bytes - 1.0;  // less the write
  EXPECT_NEAR(read, (4 * s * 8 + 2 * f * 21) / (3 * s + f), 1e-9);
}

// The Hub's config.json names the full layers' geometry by global_head_dim and
// num_global_key_value_heads (Gemma4TextConfig derives per_layer_config from them, which
// save_pretrained then writes): both forms read the same.
TEST(Gemma4, HubGeometryFieldsReadAsPerLayerConfig) {
  auto text = read_text_file(fixture_dir("gemma4_dense") + "/config.json");
  ASSERT_TRUE(text.has_value());
  auto j = nlohmann::json::parse(*text);
  j.erase("per_layer_config");
  j["global_head_dim"] = 32;
  j["num_global_key_value_heads"] = 1;
  auto c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_EQ(c->gemma4.full_head_dim, 32);
  EXPECT_EQ(c->gemma4.full_kv_heads, 1);
  j.erase("global_head_dim");  // Gemma4TextConfig's default: 512
  c = parse_hf_config(j.dump());
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->gemma4.full_head_dim, 512);
}

// The pool holds each cache layer's own shape: sliding [.., 2, 16], full [.., 1, 32].
TEST(Gemma4, KvLayoutHoldsBothGeometries) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir("gemma4_dense"), *backend);
  ASSERT_NE(model, nullptr);
  const KvLayout layout = model->kv_layout(4, 4, DType::f32);
  ASSERT_EQ(layout.layer_shapes.size(), 6u);
  EXPECT_EQ(layout.layer_shapes[0], (KvLayerShape{2, 16}));
  EXPECT_EQ(layout.layer_shapes[2], (KvLayerShape{1, 32}));
  EXPECT_EQ(layout.page_bytes(), 2u * 4 * 4 * (4 * 32 + 2 * 32));
  auto kv = KvCache::allocate(*backend, layout);
  ASSERT_TRUE(kv.has_value());
  EXPECT_EQ(kv->layer(5).k.dim(3), 32);
  // A uniform pool of the same page size does not fit the model.
  KvLayout uniform = layout;
  uniform.layer_shapes.clear();
  auto wrong = KvCache::allocate(*backend, uniform);
  ASSERT_TRUE(wrong.has_value());
  auto buf = backend->allocate(sizeof(float) * 128);
  ASSERT_TRUE(buf.has_value());
  const Status st = model->forward(make_step({{0, {1, 5}, 0, true}}, 4, 4), *wrong, buf->view(DType::f32, {1, 128}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  // The E2B-like model's cache holds the 4 layers before the K/V-reusing ones.
  auto e2b = load_or_fail(fixture_dir("gemma4_e2b"), *backend);
  ASSERT_NE(e2b, nullptr);
  EXPECT_EQ(e2b->kv_layout(4, 4, DType::f32).n_layers, 4);
}

TEST(Gemma4, DecodeStepsMatchTransformers) {
  for (const char* fixture : kFixtures) testing::expect_decode_steps_match(fixture);
}

// The long prompt (40 tokens, the window 8) in chunks of 7 and 5 (pages of 4), every row against
// transformers' prefill; two sequences in one step; a prefix of 16 positions another sequence
// computed.
TEST(Gemma4, ChunkedMixedAndCachedStepsMatchTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  for (const char* fixture : kFixtures) {
    auto model = load_or_fail(fixture_dir(fixture), *backend);
    ASSERT_NE(model, nullptr);
    const auto cases = read_fixture_cases(fixture);
    const auto& fc = cases.back();
    ASSERT_EQ(fc.prompt.size(), 40u);
    for (int chunk : {7, 5}) {
      const float d = testing::chunked_max_diff(*model, *backend, fc, chunk);
      EXPECT_LE(d, kLogitTol) << fixture << ", chunks of " << chunk;
      RecordProperty(std::string(fixture) + "_chunked_max_abs_diff_" + std::to_string(chunk), std::to_string(d));
    }
    const float mixed = testing::mixed_step_max_diff(*model, *backend, fc, cases.front(), 20);
    EXPECT_LE(mixed, kLogitTol) << fixture;
    RecordProperty(std::string(fixture) + "_mixed_max_abs_diff", std::to_string(mixed));
    EXPECT_LE(testing::cached_prefix_max_diff(*model, *backend, fc, 16), kLogitTol) << fixture;
  }
}

// gemma4_mm: a Gemma4ForConditionalGeneration checkpoint serves its language model; its towers
// are off (vision_off says why), and its image / video / audio placeholder ids are refused.
TEST(Gemma4, MultimodalCheckpointServesItsLanguageModel) {
  const ModelConfig c = config_of("gemma4_mm");
  EXPECT_EQ(c.arch, "gemma4_text");
  EXPECT_TRUE(c.multimodal_text);
  EXPECT_NE(c.vision_off.find("vision"), std::string::npos) << c.vision_off;
  EXPECT_EQ(c.gemma4.tower_tokens, (std::vector<int>{120, 121, 122}));
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_or_fail(fixture_dir("gemma4_mm"), *backend);
  ASSERT_NE(model, nullptr);
  auto kv = KvCache::allocate(*backend, model->kv_layout(4, 4, DType::f32));
  ASSERT_TRUE(kv.has_value());
  auto buf = backend->allocate(sizeof(float) * 128);
  ASSERT_TRUE(buf.has_value());
  const Status st = model->forward(make_step({{0, {1, 17, 121}, 0, false}}, 4, 4), *kv, buf->view(DType::f32, {1, 128}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("token id 121 is a Gemma 4 image, video or audio placeholder"), std::string::npos)
      << st.message();
}

// Each rule changed in the parsed config moves the logits of the long prompt far past the
// tolerance: the full layers' partial RoPE, the windows, the K/V source of a reusing layer.
TEST(Gemma4, RulesChangeTheResult) {
  auto diff_with = [](const char* fixture, const std::function<void(ModelConfig&)>& edit) {
    return testing::max_diff_with_loader(fixture, edit, load_gemma4);
  };
  EXPECT_LE(diff_with("gemma4_dense", [](ModelConfig&) {}), kLogitTol);
  const float floor = 100 * kLogitTol;
  EXPECT_GT(diff_with("gemma4_dense", [](ModelConfig& c) { c.gemma4.full_rope_partial = 1.0f; }), floor)
      << "the full layers rotate every pair";
  EXPECT_GT(diff_with("gemma4_dense", [](ModelConfig& c) { c.sliding_window = 64; }), floor) << "no window";
  EXPECT_GT(diff_with("gemma4_e2b", [](ModelConfig& c) { c.gemma4.kv_layer[4] = 1; }), floor)
      << "layer 4 reads layer 1's K/V";
  EXPECT_GT(diff_with("gemma4_moe", [](ModelConfig& c) { c.n_experts_per_tok = 1; }), floor) << "top-1 experts";
}

// What the config may not say is refused naming the field.
TEST(Gemma4, BadConfigsAreRefusedByName) {
  for (const char* fixture : {"gemma4_dense", "gemma4_moe"}) {
    auto text = read_text_file(fixture_dir(fixture) + "/config.json");
    ASSERT_TRUE(text.has_value());
    const auto base = nlohmann::json::parse(*text);
    auto error = [&](const std::function<void(nlohmann::json&)>& edit) {
      nlohmann::json j = base;
      edit(j);
      auto c = parse_hf_config(j.dump());
      return c ? std::string() : c.status().message();
    };
    EXPECT_EQ(error([](nlohmann::json&) {}), "");
    auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& says) {
      const std::string e = error(edit);
      EXPECT_NE(e.find(says), std::string::npos) << fixture << ": " << e;
    };
    refused([](auto& j) { j["use_bidirectional_attention"] = "all"; }, "use_bidirectional_attention");
    refused([](auto& j) { j["attention_bias"] = true; }, "attention_bias");
    refused([](auto& j) { j["hidden_activation"] = "silu"; }, "hidden_activation 'silu' is not supported for gemma4");
    refused([](auto& j) { j["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; }, "rope_type 'yarn'");
    refused([](auto& j) { j["rope_parameters"]["sliding_attention"]["rope_type"] = "proportional"; },
            "rope_type 'proportional'");
    refused([](auto& j) { j["per_layer_config"]["2"]["intermediate_size"] = 8; }, "per_layer_config.2.intermediate_size");
    refused([](auto& j) { j["per_layer_config"]["0"]["head_dim"] = 64; }, "per_layer_config.0 gives a sliding_attention");
    refused([](auto& j) { j["num_kv_shared_layers"] = j["num_hidden_layers"]; }, "num_kv_shared_layers");
    refused([](auto& j) { j["layer_types"] = {"sliding_attention"}; }, "layer_types");
    if (base.value("enable_moe_block", false)) refused([](auto& j) { j["top_k_experts"] = 9; }, "top_k_experts");
  }
}

// A backend whose attention takes narrower heads than the full layers' (Backend::
// max_attention_head_dim; the fixture's are 32 wide) refuses Gemma 4 at load, saying why, before
// any weight is read; one that takes exactly that width passes the check (CUDA's kernel takes
// 512, every released Gemma 4's full width: tests/gpu/model_test.cpp runs them there) and this
// op-less backend then fails at its first weight instead.
TEST(Gemma4, NarrowAttentionBackendRefusesAtLoad) {
  class Narrow : public testing::MemoryOnlyBackend {
   public:
    explicit Narrow(int most) : most_(most) {}
    std::string name() const override { return "narrow"; }
    bool supports_altup() const override { return true; }
    int max_attention_head_dim() const override { return most_; }

   private:
    int most_;
  };
  for (const int most : {16, 31, 32}) {
    SCOPED_TRACE(most);
    Narrow backend(most);
    auto ck = Checkpoint::open(fixture_dir("gemma4_dense"));
    ASSERT_TRUE(ck.has_value());
    auto model = load_gemma4(std::move(*ck), backend, testing::test_load_options());
    ASSERT_FALSE(model.has_value());
    const bool refused = model.status().message().find("global_head_dim 32") != std::string::npos;
    EXPECT_EQ(refused, most < 32) << model.status().message();
    if (refused) {
      EXPECT_EQ(model.status().code(), StatusCode::unsupported);
    }
  }
}

// Tensor parallelism-free refusals: LoRA and MTP at load.
TEST(Gemma4, LoraAndMtpAreRefusedAtLoad) {
  auto backend = make_cpu_backend({.n_threads = 1});
  for (int which = 0; which < 2; ++which) {
    auto ck = Checkpoint::open(fixture_dir("gemma4_dense"));
    ASSERT_TRUE(ck.has_value());
    LoadOptions o = testing::test_load_options();
    if (which == 0) o.max_loras = 1;
    else o.mtp = true;
    auto model = load_gemma4(std::move(*ck), *backend, o);
    ASSERT_FALSE(model.has_value());
    EXPECT_EQ(model.status().code(), StatusCode::unsupported);
  }
}

}  // namespace
}  // namespace brigade
