// core/quant and models/ggml_quant against llama.cpp's gguf-py: tests/fixtures/quant/quant.json
// (scripts/make_quant_fixtures.py) holds random valid blocks of every ggml block type brigade
// reads with gguf.quants.dequantize's values, and rows gguf.quants.quantize made Q8_0, Q4_0, Q4_1 and
// MXFP4; tests/fixtures/quant/mxfp4_hf.json (the same script) holds MXFP4 weights in transformers'
// gpt-oss layout with the values of transformers' own dequantizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/quant.h"
#include "models/ggml_quant.h"

namespace brigade {
namespace {

nlohmann::json load_fixture(const std::string& name = "quant.json") {
  std::ifstream in(std::string(BRIGADE_FIXTURES) + "/quant/" + name);
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

// Every value within a few f32 roundings of the reference, relative to its block's largest value
// (gguf-py and ggml group the products differently; both round each to f32).
void expect_values(const std::string& what, const std::vector<float>& got, const std::vector<float>& want,
                   int64_t block) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t b = 0; b < want.size(); b += static_cast<size_t>(block)) {
    float amax = 0.0f;
    for (size_t i = b; i < b + static_cast<size_t>(block); ++i) amax = std::max(amax, std::fabs(want[i]));
    for (size_t i = b; i < b + static_cast<size_t>(block); ++i)
      ASSERT_NEAR(got[i], want[i], 4 * FLT_EPSILON * amax) << what << " element " << i;
  }
}

TEST(Quant, FixtureIsThere) {
  const nlohmann::json f = load_fixture();
  ASSERT_FALSE(f.is_discarded()) << "tests/fixtures/quant/quant.json is missing or not JSON";
  EXPECT_EQ(f["dequantize"].size(), 11u);  // every block type brigade reads
  EXPECT_EQ(f["quantize"].size(), 31u);
}

TEST(Quant, DequantizeMatchesGgufPy) {
  const nlohmann::json f = load_fixture();
  ASSERT_FALSE(f.is_discarded());
  for (const auto& c : f["dequantize"]) {
    const std::string name = c["type"];
    const GgmlTypeInfo* t = ggml_type_info(c["id"].get<uint32_t>());
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(std::string(t->name), name);
    const std::vector<uint8_t> bytes = from_hex(c["bytes"]);
    const std::vector<float> want = c["values"].get<std::vector<float>>();
    const auto n = static_cast<int64_t>(want.size());
    ASSERT_EQ(bytes.size(), static_cast<size_t>(n / t->block_elems) * t->block_bytes) << name;
    std::vector<float> got(want.size());
    dequantize_ggml(*t, bytes.data(), got.data(), n);
    expect_values(name + " (dequantize_ggml)", got, want, t->block_elems);
    if (t->dtype) {  // brigade's own DType: core/quant directly
      EXPECT_EQ(dtype_block_elems(*t->dtype), t->block_elems) << name;
      EXPECT_EQ(dtype_block_bytes(*t->dtype), t->block_bytes) << name;
      std::fill(got.begin(), got.end(), NAN);
      quant::dequantize_row(bytes.data(), *t->dtype, got.data(), n);
      expect_values(name + " (quant::dequantize_row)", got, want, t->block_elems);
      // MXFP4's values are small integers times powers of two: exact, subnormal scales included.
      if (name == "MXFP4") {
        EXPECT_EQ(got, want);
      }
    }
  }
}

TEST(Quant, QuantizeMatchesGgufPyByteForByte) {
  const nlohmann::json f = load_fixture();
  ASSERT_FALSE(f.is_discarded());
  for (const auto& c : f["quantize"]) {
    const std::string name = c["type"];
    const DType t = *parse_dtype(name);
    ASSERT_TRUE(quant::can_quantize_to(t)) << name;
    const std::vector<float> x = c["input"].get<std::vector<float>>();
    const std::vector<uint8_t> want = from_hex(c["bytes"]);
    const auto n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> got(dtype_bytes(t, n), 0xAA);
    quant::quantize_row(x.data(), t, got.data(), n);
    EXPECT_EQ(got, want) << name << " row of " << n;
  }
}

// Half an E8M0 scale is 2^(e - 128) for every byte, the f32 subnormals of e = 0 and 1 included.
TEST(Quant, E8m0HalfIsTwoToTheEMinus128) {
  for (int e = 0; e < 256; ++e) EXPECT_EQ(quant::e8m0_to_f32_half(static_cast<uint8_t>(e)), std::ldexp(1.0f, e - 128)) << e;
}

// transformers' gpt-oss layout repacked to ggml's blocks: the dequantized blocks are
// convert_moe_packed_tensors' values exactly (leading expert dim folded into the rows).
TEST(Quant, HfMxfp4RepackIsTransformersDequantizerExactly) {
  const nlohmann::json f = load_fixture("mxfp4_hf.json");
  ASSERT_FALSE(f.is_discarded()) << "tests/fixtures/quant/mxfp4_hf.json is missing or not JSON";
  const int64_t rows = f["experts"].get<int64_t>() * f["rows"].get<int64_t>(), cols = f["cols"].get<int64_t>();
  const std::vector<uint8_t> blocks = from_hex(f["blocks"]), scales = from_hex(f["scales"]);
  const std::vector<float> want = f["values"].get<std::vector<float>>();
  ASSERT_EQ(blocks.size(), static_cast<size_t>(rows * cols / 2));
  ASSERT_EQ(scales.size(), static_cast<size_t>(rows * cols / 32));
  ASSERT_EQ(want.size(), static_cast<size_t>(rows * cols));
  std::vector<uint8_t> packed(dtype_bytes(DType::mxfp4, rows * cols), 0xAA);
  quant::repack_hf_mxfp4(blocks.data(), scales.data(), rows, cols, packed.data());
  std::vector<float> got(want.size(), NAN);
  quant::dequantize_row(packed.data(), DType::mxfp4, got.data(), rows * cols);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
  // The scale bytes map 1:1; the nibbles are reordered, so the blocks differ from the input's.
  EXPECT_EQ(packed[0], scales[0]);
  EXPECT_NE(std::vector<uint8_t>(packed.begin() + 1, packed.begin() + 17),
            std::vector<uint8_t>(blocks.begin(), blocks.begin() + 16));
}

TEST(Quant, GgmlTypeTable) {
  // ggml.h's ids; every brigade DType of a block type maps to its GGUF type and back.
  for (DType d : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q4_k, DType::q5_k, DType::q6_k, DType::mxfp4, DType::f32,
                  DType::f16, DType::bf16}) {
    const GgmlTypeInfo* t = ggml_type_of(d);
    ASSERT_NE(t, nullptr) << dtype_name(d);
    EXPECT_EQ(ggml_type_info(t->id), t);
    EXPECT_EQ(t->dtype, d);
  }
  EXPECT_EQ(ggml_type_info(13)->name, std::string("Q5_K"));
  EXPECT_EQ(ggml_type_info(10)->name, std::string("Q2_K"));
  EXPECT_EQ(ggml_type_info(10)->dtype, std::nullopt) << "only ever dequantized";
  EXPECT_EQ(ggml_type_info(39)->name, std::string("MXFP4"));
  for (uint32_t refused : {9u, 15u, 16u, 20u, 23u, 24u, 28u, 34u, 40u, 41u}) {
    EXPECT_EQ(ggml_type_info(refused), nullptr) << refused;
    EXPECT_NE(ggml_type_name_of(refused).rfind("type ", 0), 0u) << "ggml's name for " << refused;
  }
  EXPECT_EQ(ggml_type_name_of(15), "Q8_K");
  EXPECT_EQ(ggml_type_name_of(1000), "type 1000");
}

}  // namespace
}  // namespace brigade
