// WeightLoader: which element type each kind of weight is asked for. With fp8 weights the linear
// layers go to the backend as f8e4m3 and the tables (embedding, lm_head) as bf16; the GPU test
// (tests/gpu/fp8_model_test.cpp) checks the bytes this leaves on a device that takes fp8.
// GGUF block types reach a backend that multiplies them as views of the file (whole blocks per
// row kept), and are dequantized for every other backend, slice and mix (the quantized fixtures
// of tests/fixtures/gguf_*); q8_0 / q4_0 are asked for the linear layers only.
#include <gtest/gtest.h>

#include <cstring>

#include "block_weight_backend.h"
#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "model_test_util.h"
#include "models/checkpoint.h"
#include "models/make_model.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using testing::BlockWeightBackend;

std::unique_ptr<Checkpoint> open_fixture(const std::string& name) {
  auto ck = Checkpoint::open(testing::fixture_dir(name) + "/model.gguf");
  EXPECT_TRUE(ck.has_value()) << ck.status().to_string();
  return ck ? std::move(*ck) : nullptr;
}

// Rows [r0, r0 + n) and columns [c0, c0 + m) of tensor t dequantized to f32 (the reference for
// what the loader staged).
std::vector<float> dequantized(const RawTensor& t, int64_t r0, int64_t n, int64_t c0, int64_t m) {
  const int64_t cols = t.shape.back();
  std::vector<float> row(static_cast<size_t>(cols)), out;
  for (int64_t r = r0; r < r0 + n; ++r) {
    t.dequantize(r * cols, cols, row.data());
    out.insert(out.end(), row.begin() + c0, row.begin() + c0 + m);
  }
  return out;
}

std::vector<float> as_floats(const BlockWeightBackend::Prepared& p) {
  EXPECT_EQ(p.host.dtype, DType::f32);
  std::vector<float> f(p.bytes.size() / 4);
  std::memcpy(f.data(), p.bytes.data(), p.bytes.size());
  return f;
}

const std::string kL0 = "model.layers.0.";

// A one-layer synthetic llama (hidden 64, intermediate 128, vocab 300, untied) stored as `dtype`.
Expected<std::unique_ptr<Checkpoint>> tiny_llama(const testing::TempDir& dir, DType dtype) {
  SyntheticModelSpec spec;
  spec.hidden_size = 64;
  spec.n_layers = 1;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.intermediate_size = 128;
  spec.vocab_size = 300;
  spec.tie_embeddings = false;
  spec.dtype = dtype;
  BRIGADE_RETURN_IF_ERROR(write_synthetic_model(spec, dir.str()));
  return Checkpoint::open(dir.str());
}

TEST(WeightLoaderBlocks, NativeTypesReachTheBackendAsViewsOfTheFile) {
  auto ck = open_fixture("gguf_llama_q4_k_m");
  ASSERT_NE(ck, nullptr);
  BlockWeightBackend backend({DType::q4_k, DType::q6_k});
  WeightLoader w(*ck, backend, std::nullopt);
  const auto& tensors = ck->tensors();

  ASSERT_TRUE(w.table("model.embed_tokens.weight", 256, 256).has_value());
  const RawTensor& embed = tensors.at("model.embed_tokens.weight");
  EXPECT_EQ(backend.prepared.back().host.dtype, DType::q4_k);
  EXPECT_EQ(backend.prepared.back().host.data, embed.bytes.data()) << "no copy: the mapping itself";
  EXPECT_EQ(backend.prepared.back().want, std::nullopt);

  // A row slice of whole rows: a view at that row.
  const RawTensor& v = tensors.at(kL0 + "self_attn.v_proj.weight");
  ASSERT_TRUE(w.matrix(kL0 + "self_attn.v_proj.weight", 128, 256, {64, 64}).has_value());
  EXPECT_EQ(backend.prepared.back().host.dtype, DType::q6_k);
  EXPECT_EQ(backend.prepared.back().host.data, v.bytes.data() + 64 * 210);
  EXPECT_EQ(backend.prepared.back().host.dim(0), 64);

  // gate|up, both Q4_K: stacked as quantized rows, byte for byte.
  ASSERT_TRUE(w.fused({kL0 + "mlp.gate_proj.weight", kL0 + "mlp.up_proj.weight"}, {256, 256}, 256).has_value());
  EXPECT_EQ(backend.prepared.back().host.dtype, DType::q4_k);
  std::vector<uint8_t> want(tensors.at(kL0 + "mlp.gate_proj.weight").bytes.begin(),
                            tensors.at(kL0 + "mlp.gate_proj.weight").bytes.end());
  want.insert(want.end(), tensors.at(kL0 + "mlp.up_proj.weight").bytes.begin(), tensors.at(kL0 + "mlp.up_proj.weight").bytes.end());
  EXPECT_EQ(backend.prepared.back().bytes, want);

  // q|k|v mixes Q4_K and Q6_K: staged f32, the dequantized values.
  ASSERT_TRUE(w.fused({kL0 + "self_attn.q_proj.weight", kL0 + "self_attn.k_proj.weight", kL0 + "self_attn.v_proj.weight"},
                      {256, 128, 128}, 256).has_value());
  std::vector<float> qkv = dequantized(tensors.at(kL0 + "self_attn.q_proj.weight"), 0, 256, 0, 256);
  for (const char* part : {"self_attn.k_proj.weight", "self_attn.v_proj.weight"}) {
    const auto p = dequantized(tensors.at(kL0 + part), 0, 128, 0, 256);
    qkv.insert(qkv.end(), p.begin(), p.end());
  }
  EXPECT_EQ(as_floats(backend.prepared.back()), qkv);
  EXPECT_EQ(backend.prepared.back().want, std::nullopt) << "f32 kept";

  // A column slice inside a 256-element block (a tensor-parallel rank's half of o_proj): dequantized.
  ASSERT_TRUE(w.matrix(kL0 + "self_attn.o_proj.weight", 256, 256, {}, {128, 128}).has_value());
  EXPECT_EQ(as_floats(backend.prepared.back()), dequantized(tensors.at(kL0 + "self_attn.o_proj.weight"), 0, 256, 128, 128));
}

TEST(WeightLoaderBlocks, ColumnSlicesOnBlockBoundariesStayQuantized) {
  auto ck = open_fixture("gguf_qwen2_q4_0");
  ASSERT_NE(ck, nullptr);
  BlockWeightBackend backend({DType::q4_0, DType::q8_0});
  WeightLoader w(*ck, backend, std::nullopt);
  const RawTensor& gate = ck->tensors().at(kL0 + "mlp.gate_proj.weight");  // Q4_0
  ASSERT_TRUE(w.matrix(kL0 + "mlp.gate_proj.weight", 256, 256, {}, {128, 96}).has_value());
  const auto& p = backend.prepared.back();
  EXPECT_EQ(p.host.dtype, DType::q4_0);
  ASSERT_EQ(p.bytes.size(), 256u * 3 * 18);
  for (int64_t r = 0; r < 256; ++r)  // blocks 4, 5, 6 of every row
    EXPECT_EQ(std::memcmp(p.bytes.data() + r * 54, gate.bytes.data() + r * 8 * 18 + 4 * 18, 54), 0) << "row " << r;
  // Q5_0 (o_proj) has no DType: staged dequantized, and requantized to q8_0 by a backend that
  // multiplies q8_0 (8.5 bits per weight rather than f32's 32).
  ASSERT_TRUE(w.matrix(kL0 + "self_attn.o_proj.weight", 256, 256).has_value());
  EXPECT_EQ(as_floats(backend.prepared.back()), dequantized(ck->tensors().at(kL0 + "self_attn.o_proj.weight"), 0, 256, 0, 256));
  EXPECT_EQ(backend.prepared.back().want, DType::q8_0);
  // Asked for f32 explicitly, it stays f32.
  WeightLoader exact(*ck, backend, DType::f32);
  ASSERT_TRUE(exact.matrix(kL0 + "self_attn.o_proj.weight", 256, 256).has_value());
  EXPECT_EQ(backend.prepared.back().want, DType::f32);
}

TEST(WeightLoaderBlocks, MixedFusedTypesAreRequantizedToQ8_0WhereTheBackendHasIt) {
  auto ck = open_fixture("gguf_llama_q4_k_m");
  ASSERT_NE(ck, nullptr);
  const std::vector<std::string> qkv = {kL0 + "self_attn.q_proj.weight", kL0 + "self_attn.k_proj.weight",
                                        kL0 + "self_attn.v_proj.weight"};  // Q4_K, Q4_K, Q6_K
  BlockWeightBackend with_q8({DType::q4_k, DType::q6_k, DType::q8_0});
  WeightLoader w(*ck, with_q8, std::nullopt);
  ASSERT_TRUE(w.fused(qkv, {256, 128, 128}, 256).has_value());
  EXPECT_EQ(with_q8.prepared.back().host.dtype, DType::f32) << "staged as the dequantized values";
  EXPECT_EQ(with_q8.prepared.back().want, DType::q8_0);
  BlockWeightBackend without({DType::q4_k, DType::q6_k});
  WeightLoader f(*ck, without, std::nullopt);
  ASSERT_TRUE(f.fused(qkv, {256, 128, 128}, 256).has_value());
  EXPECT_EQ(without.prepared.back().want, std::nullopt) << "no q8_0 kernels: kept f32";
}

// Where the backend multiplies row groups of different types as one projection, a fused
// projection of mixed types keeps each part as stored (consecutive parts of one type together),
// and a part of a type without kernels alone goes to q8_0.
TEST(WeightLoaderBlocks, MixedFusedTypesStayAsStoredInRowGroupsWhereTheBackendStacksThem) {
  auto ck = open_fixture("gguf_llama_q4_k_m");
  ASSERT_NE(ck, nullptr);
  const auto& tensors = ck->tensors();
  const std::vector<std::string> qkv = {kL0 + "self_attn.q_proj.weight", kL0 + "self_attn.k_proj.weight",
                                        kL0 + "self_attn.v_proj.weight"};  // Q4_K, Q4_K, Q6_K
  BlockWeightBackend stacking({DType::q4_k, DType::q6_k, DType::q8_0}, /*stacked=*/true);
  WeightLoader w(*ck, stacking, std::nullopt);
  auto whole = w.fused_linear(qkv, {256, 128, 128}, 256);
  ASSERT_TRUE(whole.has_value()) << whole.status().to_string();
  ASSERT_EQ(whole->groups.size(), 2u);
  ASSERT_EQ(whole->views.size(), 2u);
  EXPECT_EQ(whole->groups[0].tensor.dtype, DType::q4_k);
  EXPECT_EQ(whole->groups[0].tensor.dim(0), 256 + 128);
  EXPECT_EQ(whole->groups[1].tensor.dtype, DType::q6_k);
  EXPECT_EQ(whole->nbytes(), tensors.at(qkv[0]).bytes.size() + tensors.at(qkv[1]).bytes.size() + tensors.at(qkv[2]).bytes.size());
  const auto& prepared = stacking.prepared;
  std::vector<uint8_t> qk(tensors.at(qkv[0]).bytes.begin(), tensors.at(qkv[0]).bytes.end());
  qk.insert(qk.end(), tensors.at(qkv[1]).bytes.begin(), tensors.at(qkv[1]).bytes.end());
  EXPECT_EQ(prepared[prepared.size() - 2].bytes, qk) << "q|k byte for byte";
  EXPECT_EQ(prepared.back().bytes, std::vector<uint8_t>(tensors.at(qkv[2]).bytes.begin(), tensors.at(qkv[2]).bytes.end()));
  EXPECT_EQ(prepared.back().want, std::nullopt);
  // A tensor-parallel rank's rows of each part.
  auto half = w.fused_linear(qkv, {256, 128, 128}, 256, {{128, 128}, {64, 64}, {64, 64}});
  ASSERT_TRUE(half.has_value());
  ASSERT_EQ(half->groups.size(), 2u);
  EXPECT_EQ(half->groups[0].tensor.dim(0), 128 + 64);
  EXPECT_EQ(prepared.back().bytes, std::vector<uint8_t>(tensors.at(qkv[2]).bytes.begin() + 64 * 210,
                                                        tensors.at(qkv[2]).bytes.begin() + 128 * 210));

  // Without stacking, or with a type asked for, one weight as fused() makes it.
  BlockWeightBackend plain({DType::q4_k, DType::q6_k, DType::q8_0});
  WeightLoader p(*ck, plain, std::nullopt);
  auto one = p.fused_linear(qkv, {256, 128, 128}, 256);
  ASSERT_TRUE(one.has_value());
  ASSERT_EQ(one->groups.size(), 1u);
  EXPECT_EQ(plain.prepared.back().want, DType::q8_0);
  WeightLoader f32(*ck, stacking, DType::f32);
  auto floats = f32.fused_linear(qkv, {256, 128, 128}, 256);
  ASSERT_TRUE(floats.has_value());
  EXPECT_EQ(floats->groups.size(), 1u);

  // qwen2_q4_0's q|k|v: Q4_0, Q4_1 (which this backend does not multiply: alone, to q8_0), Q8_0.
  auto qwen = open_fixture("gguf_qwen2_q4_0");
  ASSERT_NE(qwen, nullptr);
  BlockWeightBackend q40({DType::q4_0, DType::q8_0}, /*stacked=*/true);
  WeightLoader q(*qwen, q40, std::nullopt);
  auto three = q.fused_linear(qkv, {256, 128, 128}, 256);
  ASSERT_TRUE(three.has_value());
  ASSERT_EQ(three->groups.size(), 3u);
  EXPECT_EQ(three->groups[0].tensor.dtype, DType::q4_0);
  EXPECT_EQ(q40.prepared[q40.prepared.size() - 2].host.dtype, DType::f32) << "Q4_1 staged dequantized";
  EXPECT_EQ(q40.prepared[q40.prepared.size() - 2].want, DType::q8_0);
  EXPECT_EQ(three->groups[2].tensor.dtype, DType::q8_0);
}

TEST(WeightLoaderBlocks, OtherBackendsAndExplicitTypesGetDequantizedWeights) {
  auto ck = open_fixture("gguf_llama_q4_k_m");
  ASSERT_NE(ck, nullptr);
  const RawTensor& down = ck->tensors().at(kL0 + "mlp.down_proj.weight");  // Q6_K
  {
    BlockWeightBackend floats_only({});
    WeightLoader w(*ck, floats_only, std::nullopt);
    ASSERT_TRUE(w.matrix(kL0 + "mlp.down_proj.weight", 256, 256).has_value());
    EXPECT_EQ(as_floats(floats_only.prepared.back()), dequantized(down, 0, 256, 0, 256));
    EXPECT_EQ(floats_only.prepared.back().want, std::nullopt);
  }
  BlockWeightBackend backend({DType::q4_k, DType::q6_k});
  WeightLoader bf16(*ck, backend, DType::bf16);
  ASSERT_TRUE(bf16.table("model.embed_tokens.weight", 256, 256).has_value());
  EXPECT_EQ(backend.prepared.back().host.dtype, DType::bf16) << "staged in the type asked for";
  ASSERT_TRUE(bf16.matrix(kL0 + "mlp.down_proj.weight", 256, 256).has_value());
  EXPECT_EQ(backend.prepared.back().host.dtype, DType::bf16);
  // Asking for the stored type keeps it.
  WeightLoader q6(*ck, backend, DType::q6_k);
  ASSERT_TRUE(q6.matrix(kL0 + "mlp.down_proj.weight", 256, 256).has_value());
  EXPECT_EQ(backend.prepared.back().host.data, down.bytes.data());
}

TEST(WeightLoaderBlocks, Q8_0QuantizesLinearLayersOnly) {
  testing::TempDir dir("loader_q8_0");
  auto ck = tiny_llama(dir, DType::bf16);
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  BlockWeightBackend backend({DType::q8_0});
  WeightLoader w(**ck, backend, DType::q8_0);
  ASSERT_TRUE(w.matrix(kL0 + "mlp.down_proj.weight", 64, 128).has_value());
  EXPECT_EQ(backend.prepared.back().want, DType::q8_0);
  EXPECT_EQ(backend.prepared.back().host.dtype, DType::bf16) << "the stored rows, quantized by prepare_weight";
  ASSERT_TRUE(w.fused({kL0 + "mlp.gate_proj.weight", kL0 + "mlp.up_proj.weight"}, {128, 128}, 64).has_value());
  EXPECT_EQ(backend.prepared.back().want, DType::q8_0);
  for (const char* table : {"model.embed_tokens.weight", "lm_head.weight"}) {
    ASSERT_TRUE(w.table(table, 300, 64).has_value());
    EXPECT_EQ(backend.prepared.back().want, std::nullopt) << table << " stays as stored";
  }
  w.quantize_linear(false);  // a MoE block's router and experts
  ASSERT_TRUE(w.matrix(kL0 + "mlp.down_proj.weight", 64, 128).has_value());
  EXPECT_EQ(backend.prepared.back().want, std::nullopt);
}

TEST(WeightLoader, Fp8AsksForFp8MatricesAndBf16Tables) {
  testing::TempDir dir("loader_fp8");
  auto ck = tiny_llama(dir, DType::f32);
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  auto backend = make_cpu_backend({.n_threads = 1});

  WeightLoader fp8(**ck, *backend, DType::f8e4m3);
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"}) {
    auto t = fp8.table(name, 300, 64);
    ASSERT_TRUE(t.has_value()) << name << ": " << t.status().to_string();
    EXPECT_EQ(t->tensor.dtype, DType::bf16) << name;
  }
  // The CPU backend has no fp8: the request reaches it as f8e4m3 and is refused there.
  auto down = fp8.matrix("model.layers.0.mlp.down_proj.weight", 64, 128);
  ASSERT_FALSE(down.has_value());
  EXPECT_NE(down.status().message().find("to f8e4m3"), std::string::npos) << down.status().message();
  auto gate_up = fp8.fused({"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"}, {128, 128}, 64);
  ASSERT_FALSE(gate_up.has_value());
  EXPECT_NE(gate_up.status().message().find("to f8e4m3"), std::string::npos) << gate_up.status().message();

  // Any other type reaches tables and matrices alike.
  WeightLoader half(**ck, *backend, DType::f16);
  EXPECT_EQ(half.table("model.embed_tokens.weight", 300, 64)->tensor.dtype, DType::f16);
  EXPECT_EQ(half.matrix("model.layers.0.mlp.down_proj.weight", 64, 128)->tensor.dtype, DType::f16);
  WeightLoader kept(**ck, *backend, std::nullopt);
  EXPECT_EQ(kept.table("model.embed_tokens.weight", 300, 64)->tensor.dtype, DType::f32);
}

}  // namespace
}  // namespace brigade
