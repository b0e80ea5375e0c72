// Quantized GGUF models against transformers: tests/fixtures/gguf_* (scripts/make_gguf_fixtures.py)
// are tiny llama / qwen2 / qwen3 / gemma2 / gemma3 / qwen3moe / gpt-oss files whose matrices are Q4_K and Q6_K (as Q4_K_M lays them
// out), Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q5_K and MXFP4, with the logits transformers computes
// after dequantizing them with gguf-py.
//   - weights f32: every tensor dequantized at load, so the logits match within fp32 noise.
//   - weights auto: the block types the backend multiplies stay as stored (the CPU backend once it
//     has quantized kernels); those quantize activations to int8 per block of 32, so the bound
//     comes from how far the fixture's logits move when the reference does the same
//     (act_q8_max_diff, recorded by the script).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "models/checkpoint.h"
#include "models/ggml_quant.h"
#include "models/inspect.h"
#include "models/load_progress.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::read_fixture_cases;
using testing::run_fixture_case;

const std::vector<std::string> kFixtures = {"gguf_llama_q4_k_m", "gguf_qwen2_q4_0",    "gguf_qwen3_k",
                                           "gguf_gemma2",       "gguf_gemma3",        "gguf_qwen3moe_q4_k_m",
                                           "gguf_mixtral_q8_0", "gguf_llama_mxfp4",   "gguf_gpt_oss"};

std::string gguf_path(const std::string& fixture) { return fixture_dir(fixture) + "/model.gguf"; }

std::unique_ptr<Model> load(const std::string& path, Backend& backend, std::optional<DType> weights) {
  return testing::load_or_fail(path, backend, weights);
}

// What the fixture's script measured of transformers with Q8_0 activations, per case.
struct ActQ8 {
  double max_diff = 0;          // how far that moves the logits
  std::vector<int32_t> greedy;  // that run's greedy tokens
};
std::vector<ActQ8> act_q8(const std::string& fixture) {
  auto text = read_text_file(fixture_dir(fixture) + "/expected.json");
  EXPECT_TRUE(text.has_value());
  std::vector<ActQ8> out;
  if (!text) return out;
  const nlohmann::json j = nlohmann::json::parse(*text);
  for (const auto& c : j.at("cases"))
    out.push_back({c.at("act_q8_max_diff").get<double>(), c.at("act_q8_greedy").get<std::vector<int32_t>>()});
  return out;
}

// Same as hf_fixture_test.cpp: fp32 summation order plus 7 printed digits; these fixtures have
// rows of 256 (hf's: 64), so a little more summation noise.
constexpr float kDequantizedTol = 5e-4f;

class GgufQuant : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufQuant, DequantizedToF32MatchesTransformers) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(gguf_path(GetParam()), *backend, DType::f32);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->weight_bytes(), model->n_params() * 4) << "every weight f32";
  const auto cases = read_fixture_cases(GetParam());
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& fc : cases) {
    const auto run = run_fixture_case(*model, *backend, fc);
    EXPECT_LE(run.max_abs_diff, kDequantizedTol) << GetParam() << ", prompt of " << fc.prompt.size();
    EXPECT_EQ(run.greedy, fc.greedy) << GetParam();
    ::testing::Test::RecordProperty("f32_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
  }
}

// Auto keeps the types the backend multiplies (else dequantizes them to f32). Native kernels
// add the error of int8 activations: within twice what it costs the reference (the CPU's
// decode kernels quantize as ggml does; its prefill multiplies dequantized panels, adding less),
// and greedy decoding follows the reference, or its run with Q8_0 activations (greedy_follows:
// for half the tokens, or a first-token near tie within the bound).
TEST_P(GgufQuant, AutoMatchesTransformersWithinTheActivationQuantizationError) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load(gguf_path(GetParam()), *backend, std::nullopt);
  ASSERT_NE(model, nullptr);
  const auto cases = read_fixture_cases(GetParam());
  const auto act = act_q8(GetParam());
  ASSERT_EQ(cases.size(), act.size());
  const bool native = backend->supports_weight_dtype(DType::q4_0);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& fc = cases[i];
    const auto run = run_fixture_case(*model, *backend, fc);
    const double bound = native ? 2.0 * act[i].max_diff + kDequantizedTol : kDequantizedTol;
    EXPECT_LE(run.max_abs_diff, bound) << GetParam() << ", prompt of " << fc.prompt.size()
                                       << (native ? " (native quantized kernels)" : " (dequantized)");
    if (native) EXPECT_TRUE(testing::greedy_follows(run, fc, {fc.greedy, act[i].greedy}, bound)) << GetParam();
    else EXPECT_EQ(run.greedy, fc.greedy) << GetParam();
    ::testing::Test::RecordProperty("auto_max_abs_diff_" + std::to_string(fc.prompt.size()), std::to_string(run.max_abs_diff));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufQuant, ::testing::ValuesIn(kFixtures),
                         [](const auto& p) { return p.param; });

// The stored types reach RawTensor as they are (no conversion at open); inspect and the load bar
// name them.
TEST(GgufQuantTensors, BlockTypesAreViewsOfTheFileAndInspectNamesThem) {
  auto ck = Checkpoint::open(gguf_path("gguf_llama_q4_k_m"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const RawTensor& embed = (*ck)->tensors().at("model.embed_tokens.weight");
  EXPECT_EQ(embed.type_name(), "Q4_K");
  EXPECT_EQ(embed.dtype, DType::q4_k);
  EXPECT_EQ(embed.bytes.size(), 256u * 256 / 256 * 144);
  EXPECT_EQ((*ck)->tensors().at("model.layers.0.self_attn.v_proj.weight").type_name(), "Q6_K");
  EXPECT_EQ((*ck)->config().dtype, DType::f32) << "the float type a quantized model runs in (KV auto)";
  auto qwen3 = Checkpoint::open(gguf_path("gguf_qwen3_k"));
  ASSERT_TRUE(qwen3.has_value());
  const RawTensor& q5 = (*qwen3)->tensors().at("model.layers.0.self_attn.v_proj.weight");
  EXPECT_EQ(q5.type_name(), "Q5_K");
  EXPECT_EQ(q5.dtype, DType::q5_k);
  const RawTensor& q2 = (*qwen3)->tensors().at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q2.type_name(), "Q2_K");
  EXPECT_EQ(q2.dtype, DType::u8) << "no DType: only ever dequantized";
  EXPECT_TRUE((*qwen3)->config().tie_embeddings);
  EXPECT_EQ(load_progress_name(**ck), gguf_path("gguf_llama_q4_k_m") + " (Q4_K, Q6_K)") << "most bytes first";

  auto info = inspect_model(gguf_path("gguf_llama_q4_k_m"));
  ASSERT_TRUE(info.has_value()) << info.status().to_string();
  EXPECT_EQ(info->n_tensors_by_dtype.at("Q4_K"), 1 + 2 * 5);  // token_embd, q/k/o/gate/up per layer
  EXPECT_EQ(info->n_tensors_by_dtype.at("Q6_K"), 1 + 2 * 2);  // output, v/down per layer
  EXPECT_EQ(info->n_bytes_by_dtype.at("Q6_K"), (256 * 256 + 2 * (128 * 256 + 256 * 256)) / 256 * 210);
  const std::string text = format_model_info(*info);
  EXPECT_NE(text.find("Q4_K"), std::string::npos) << text;
  EXPECT_NE(text.find("Q6_K"), std::string::npos) << text;
}

// Weight bytes as loaded. Auto keeps each block type the backend multiplies as stored, also in a
// fused projection of mixed types (q|k Q4_K with v Q6_K: row groups of matmul_stacked; a backend
// without it would requantize the projection to q8_0), and keeps the norms f32; f32 is 32 bits
// for everything, bf16 16.
TEST(GgufQuantTensors, WeightBytesFollowTheLoadedTypes) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto f32 = load(gguf_path("gguf_llama_q4_k_m"), *backend, DType::f32);
  auto bf16 = load(gguf_path("gguf_llama_q4_k_m"), *backend, DType::bf16);
  auto automatic = load(gguf_path("gguf_llama_q4_k_m"), *backend, std::nullopt);
  ASSERT_TRUE(f32 && bf16 && automatic);
  EXPECT_EQ(f32->n_params(), automatic->n_params());
  EXPECT_EQ(f32->weight_bytes(), 4 * f32->n_params());
  auto ck = Checkpoint::open(gguf_path("gguf_llama_q4_k_m"));
  ASSERT_TRUE(ck.has_value());
  ASSERT_TRUE(backend->supports_stacked_matmul());
  int64_t kept = 0, requantized = 0, widened = 0;  // bytes as stored / elements to q8_0 / elements f32
  for (const auto& [name, t] : (*ck)->tensors()) {
    if (t.block_quantized() && backend->supports_weight_dtype(t.dtype)) kept += static_cast<int64_t>(t.bytes.size());
    else if (t.block_quantized()) requantized += t.numel();
    else widened += t.numel();
  }
  EXPECT_EQ(requantized, 0);
  EXPECT_EQ(automatic->weight_bytes(), kept + 4 * widened);
  EXPECT_GT(kept, 0) << "the CPU backend multiplies Q4_K and Q6_K";
  EXPECT_LT(bf16->weight_bytes(), f32->weight_bytes() * 6 / 10);
}

// Matrix `name` [128, 256] of `ck`, stored as ggml type `type` (DType t), loads as stored on the
// CPU, a view of the file's bytes, and so does a column slice on block boundaries; a slice inside
// a block (a tensor-parallel rank's) requantizes to q8_0 as for the other block types.
void expect_kept_as_stored(const Checkpoint& ck, Backend& backend, const std::string& name, const std::string& type,
                           DType t) {
  ASSERT_TRUE(backend.supports_weight_dtype(t));
  const RawTensor& stored = ck.tensors().at(name);
  EXPECT_EQ(stored.type_name(), type);
  EXPECT_EQ(stored.dtype, t);
  WeightLoader w(ck, backend, std::nullopt);
  auto whole = w.matrix(name, 128, 256);
  ASSERT_TRUE(whole.has_value()) << whole.status().to_string();
  EXPECT_EQ(whole->tensor.dtype, t);
  ASSERT_EQ(whole->tensor.nbytes(), stored.bytes.size());
  EXPECT_EQ(std::memcmp(whole->tensor.data, stored.bytes.data(), stored.bytes.size()), 0);
  auto mid_block = w.matrix(name, 128, 256, {}, {16, 128});
  ASSERT_TRUE(mid_block.has_value());
  EXPECT_EQ(mid_block->tensor.dtype, DType::q8_0);
  auto on_blocks = w.matrix(name, 128, 256, {}, {128, 128});
  ASSERT_TRUE(on_blocks.has_value());
  EXPECT_EQ(on_blocks->tensor.dtype, t);
}

// gguf_qwen2_q4_0's Q4_1 tensors (attn_k) stay Q4_1 on the CPU (expect_kept_as_stored). The whole
// model's bytes: Q4_0, Q4_1 and Q8_0 as stored, Q5_0 and Q5_1 (no kernels) at q8_0's 34 bytes per
// 32, the norms and biases f32.
TEST(GgufQuantTensors, Q4_1TensorsStayQ4_1) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto ck = Checkpoint::open(gguf_path("gguf_qwen2_q4_0"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  expect_kept_as_stored(**ck, *backend, "model.layers.0.self_attn.k_proj.weight", "Q4_1", DType::q4_1);

  auto automatic = load(gguf_path("gguf_qwen2_q4_0"), *backend, std::nullopt);
  ASSERT_NE(automatic, nullptr);
  int64_t kept = 0, requantized = 0, widened = 0, q4_1 = 0;
  for (const auto& [name, t] : (*ck)->tensors()) {
    if (t.block_quantized() && backend->supports_weight_dtype(t.dtype)) kept += static_cast<int64_t>(t.bytes.size());
    else if (t.block_quantized()) requantized += t.numel();
    else widened += t.numel();
    q4_1 += t.type_name() == "Q4_1";
  }
  EXPECT_EQ(q4_1, 3) << "attn_k of both layers, layer 1's attn_output";
  EXPECT_GT(requantized, 0);
  EXPECT_EQ(automatic->weight_bytes(), kept + requantized / 32 * 34 + 4 * widened);
}

// gguf_llama_mxfp4's MXFP4 tensors stay mxfp4 on the CPU (expect_kept_as_stored); layer 0's
// q|k|v (MXFP4 q and k, Q8_0 v) is two row groups. The whole model's bytes: every block type as
// stored, the norms f32.
TEST(GgufQuantTensors, Mxfp4TensorsStayMxfp4) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto ck = Checkpoint::open(gguf_path("gguf_llama_mxfp4"));
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  expect_kept_as_stored(**ck, *backend, "model.layers.1.self_attn.k_proj.weight", "MXFP4", DType::mxfp4);
  WeightLoader w(**ck, *backend, std::nullopt);
  auto qkv = w.fused_linear({"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                             "model.layers.0.self_attn.v_proj.weight"}, {256, 128, 128}, 256);
  ASSERT_TRUE(qkv.has_value()) << qkv.status().to_string();
  ASSERT_EQ(qkv->groups.size(), 2u);
  EXPECT_EQ(qkv->views[0].dtype, DType::mxfp4);
  EXPECT_EQ(qkv->views[0].dim(0), 256 + 128);
  EXPECT_EQ(qkv->views[1].dtype, DType::q8_0);

  auto automatic = load(gguf_path("gguf_llama_mxfp4"), *backend, std::nullopt);
  ASSERT_NE(automatic, nullptr);
  int64_t kept = 0, widened = 0, mxfp4 = 0;
  for (const auto& [name, t] : (*ck)->tensors()) {
    ASSERT_TRUE(!t.block_quantized() || backend->supports_weight_dtype(t.dtype)) << name;
    if (t.block_quantized()) kept += static_cast<int64_t>(t.bytes.size());
    else widened += t.numel();
    mxfp4 += t.type_name() == "MXFP4";
  }
  EXPECT_EQ(mxfp4, 2 * 7 - 1 + 1) << "every linear layer but layer 0's v, and the output";
  EXPECT_EQ(automatic->weight_bytes(), kept + 4 * widened);
}

}  // namespace
}  // namespace brigade
