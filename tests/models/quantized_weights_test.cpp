// `weights: q8_0 / q4_0 / q4_1` (LoadOptions::weight_dtype) on float checkpoints: the linear layers are
// quantized at load where the backend multiplies those types (the CPU), and the logits stay
// within twice what the same quantization (gguf-py's, with Q8_0 activations) moves transformers'
// (tests/fixtures/quantized_weights/bounds.json, scripts/make_gguf_fixtures.py); a backend that
// cannot is refused before any weight is read. weights f32 / bf16 on a quantized GGUF is
// gguf_quant_test.cpp's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>

#include "block_weight_backend.h"
#include "core/quant.h"
#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::fixture_dir;

// bounds.json's entry for the fixture and type: per prompt, how far the quantization moves
// transformers' logits, and that model's greedy tokens.
struct Bound {
  std::vector<double> max_diff;
  std::vector<std::vector<int32_t>> greedy;
};
Bound bounds(const std::string& fixture, const std::string& type) {
  auto text = read_text_file(fixture_dir("quantized_weights") + "/bounds.json");
  EXPECT_TRUE(text.has_value()) << text.status().to_string();
  if (!text) return {};
  const nlohmann::json j = nlohmann::json::parse(*text).at("bounds").at(fixture);
  return {j.at(type).get<std::vector<double>>(), j.at(type + "_greedy").get<std::vector<std::vector<int32_t>>>()};
}

Expected<std::unique_ptr<Model>> load(const std::string& path, Backend& backend, DType weights) {
  LoadOptions opts;
  opts.max_batch_tokens = 64;
  opts.progress = false;
  opts.weight_dtype = weights;
  return Model::load(path, backend, opts);
}

class QuantizedWeights : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(QuantizedWeights, MatchTransformersWithinTheQuantizationError) {
  const auto& [fixture, type] = GetParam();
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(fixture_dir(fixture), *backend, type);
  if (!backend->supports_weight_dtype(type)) {  // refused with the reason
    ASSERT_FALSE(model.has_value());
    EXPECT_EQ(model.status().code(), StatusCode::unsupported);
    EXPECT_NE(model.status().message().find(std::string(dtype_name(type)) + " weights run on the CPU backend"),
              std::string::npos) << model.status().to_string();
    GTEST_SKIP() << "the CPU backend has no " << dtype_name(type) << " matmul yet";
  }
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  auto f32 = load(fixture_dir(fixture), *backend, DType::f32);
  ASSERT_TRUE(f32.has_value());
  EXPECT_LT((*model)->weight_bytes(), (*f32)->weight_bytes() * 6 / 10) << "linear layers quantized";
  const auto cases = testing::read_fixture_cases(fixture);
  const Bound bound = bounds(fixture, dtype_name(type));
  ASSERT_EQ(cases.size(), bound.max_diff.size());
  ASSERT_EQ(cases.size(), bound.greedy.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto run = testing::run_fixture_case(**model, *backend, cases[i]);
    EXPECT_LE(run.max_abs_diff, 2.0 * bound.max_diff[i] + 1e-3) << fixture << " prompt of " << cases[i].prompt.size();
    EXPECT_TRUE(testing::greedy_follows(run, cases[i], {cases[i].greedy, bound.greedy[i]}, 2.0 * bound.max_diff[i]))
        << fixture;
    ::testing::Test::RecordProperty("max_abs_diff_" + std::to_string(i), std::to_string(run.max_abs_diff));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantizedWeights,
                         ::testing::Combine(::testing::Values("llama", "qwen2", "qwen3", "qwen3_moe", "mixtral"),
                                            ::testing::Values(DType::q8_0, DType::q4_0, DType::q4_1, DType::mxfp4)),
                         [](const auto& p) {
                           return std::get<0>(p.param) + "_" + dtype_name(std::get<1>(p.param));
                         });

// weights: q4_1 quantizes the linear layers as ggml's quantize_row_q4_1_ref does (which
// quant_test checks byte for byte against gguf-py) and keeps the tables as stored, 2 bytes per 32
// weights more than q4_0.
TEST(QuantizedWeightsQ4_1, LinearLayersAreGgmlsQ4_1OfTheFloatWeights) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto ck = Checkpoint::open(fixture_dir("llama"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  WeightLoader q(**ck, *backend, DType::q4_1), f(**ck, *backend, DType::f32);
  for (const auto& [name, rows, cols] : std::vector<std::tuple<std::string, int64_t, int64_t>>{
           {"model.layers.0.self_attn.q_proj.weight", 64, 64}, {"model.layers.1.mlp.down_proj.weight", 64, 128}}) {
    auto w = q.matrix(name, rows, cols);
    auto ref = f.matrix(name, rows, cols);
    ASSERT_TRUE(w.has_value() && ref.has_value()) << name;
    ASSERT_EQ(w->tensor.dtype, DType::q4_1) << name;
    std::vector<uint8_t> want(dtype_bytes(DType::q4_1, rows * cols));
    quant::quantize_row_q4_1(ref->tensor.as<float>(), want.data(), rows * cols);
    ASSERT_EQ(w->tensor.nbytes(), want.size());
    EXPECT_EQ(std::memcmp(w->tensor.data, want.data(), want.size()), 0) << name;
  }
  auto table = q.table("model.embed_tokens.weight", 256, 64);
  ASSERT_TRUE(table.has_value());
  EXPECT_NE(table->tensor.dtype, DType::q4_1) << "the embedding stays as stored";

  auto model = load(fixture_dir("llama"), *backend, DType::q4_1);
  auto q4_0 = load(fixture_dir("llama"), *backend, DType::q4_0);
  ASSERT_TRUE(model.has_value() && q4_0.has_value());
  EXPECT_GT((*model)->weight_bytes(), (*q4_0)->weight_bytes());
}

// A backend without the type (the GPU) refuses it before a single weight reaches it.
TEST(QuantizedWeightsRefused, BeforeAnyWeightIsRead) {
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1}) {
    testing::BlockWeightBackend floats_only({});
    auto model = load(fixture_dir("llama"), floats_only, t);
    ASSERT_FALSE(model.has_value());
    EXPECT_EQ(model.status().code(), StatusCode::unsupported);
    EXPECT_NE(model.status().message().find("backend 'blocks' cannot multiply them"), std::string::npos)
        << model.status().to_string();
    EXPECT_TRUE(floats_only.prepared.empty());
  }
  // DeepSeek keeps its MLA projections and experts float: refused by name.
  auto cpu = make_cpu_backend({.n_threads = 1});
  auto ds = load(fixture_dir("deepseek_v2"), *cpu, DType::q8_0);
  ASSERT_FALSE(ds.has_value());
  EXPECT_NE(ds.status().message().find("weight dtype q8_0 is not supported for deepseek"), std::string::npos)
      << ds.status().to_string();
}

// On a backend that takes q8_0, a MoE model's experts are quantized with attention and the
// dense MLPs, and its routers stay float (qwen3_moe: 3 layers, layer 1 dense; its experts'
// down_proj rows of moe_intermediate_size 16 are not whole blocks of 32, so they stay float).
TEST(QuantizedWeightsRefused, MoeExpertsQuantizedRoutersStayFloat) {
  testing::BlockWeightBackend q8({DType::q8_0});
  auto model = load(fixture_dir("qwen3_moe"), q8, DType::q8_0);
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  int quantized = 0, kept = 0;
  for (const auto& p : q8.prepared) (p.want == DType::q8_0 ? quantized : kept) += 1;
  EXPECT_EQ(quantized, 3 * 2 + 2 + 2) << "q|k|v and o per layer, gate|up and down of the dense layer, the experts' "
                                         "gate|up per MoE layer";
  EXPECT_EQ(kept, 2 * 2 + 2) << "router and experts' down per MoE layer; embedding, lm_head";
}

// Mixtral's bytes as loaded: its attention and experts (rows of 64, so gate|up and down are all
// whole blocks) at 34 bytes per 32 weights under q8_0 and 18 under q4_0, everything else (tables,
// routers, norms) f32 as in the f32 load.
TEST(QuantizedWeights, MixtralExpertsAreStoredInTheAskedType) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto f32 = load(fixture_dir("mixtral"), *backend, DType::f32);
  ASSERT_TRUE(f32.has_value()) << f32.status().to_string();
  const ModelConfig& c = (*f32)->config();
  const int64_t h = c.hidden_size, kv = int64_t{c.n_kv_heads} * c.head_dim, q = int64_t{c.n_heads} * c.head_dim;
  const int64_t attention = (2 * h * q + 2 * h * kv) * c.n_layers;
  const int64_t experts = 3 * h * c.moe_intermediate_size * c.n_experts * c.n_layers;
  for (const auto& [type, block_bytes] : {std::pair{DType::q8_0, int64_t{34}}, std::pair{DType::q4_0, int64_t{18}}}) {
    if (!backend->supports_weight_dtype(type)) continue;
    auto quantized = load(fixture_dir("mixtral"), *backend, type);
    ASSERT_TRUE(quantized.has_value()) << quantized.status().to_string();
    const int64_t blocks = attention + experts;
    EXPECT_EQ((*quantized)->weight_bytes(), (*f32)->weight_bytes() - 4 * blocks + blocks / 32 * block_bytes)
        << dtype_name(type);
  }
}

}  // namespace
}  // namespace brigade
