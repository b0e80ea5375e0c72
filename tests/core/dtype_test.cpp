// Element types: names, parsing, and the host FP8 E4M3 conversions the fp8 GEMM's reference uses
// (tests/gpu/fp8_test.cpp checks the GPU rounds the same way).
#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"

namespace brigade {
namespace {

TEST(Dtype, Fp8NameSizeAndParse) {
  EXPECT_EQ(dtype_size(DType::f8e4m3), 1u);
  EXPECT_STREQ(dtype_name(DType::f8e4m3), "f8e4m3");
  EXPECT_TRUE(parse_dtype("f8e4m3") == DType::f8e4m3);
  EXPECT_TRUE(parse_dtype("fp8") == DType::f8e4m3);
  EXPECT_FALSE(parse_dtype("f8").has_value());
}

// ggml's MXFP4 block: 32 elements in 17 bytes, named as brigade and GGUF name it.
TEST(Dtype, Mxfp4BlockNameAndParse) {
  EXPECT_EQ(dtype_size(DType::mxfp4), 0u);
  EXPECT_EQ(dtype_block_elems(DType::mxfp4), 32);
  EXPECT_EQ(dtype_block_bytes(DType::mxfp4), 17u);
  EXPECT_EQ(dtype_bytes(DType::mxfp4, 2880), 90u * 17u);  // a gpt-oss row: 90 blocks
  EXPECT_TRUE(is_block_quantized(DType::mxfp4));
  EXPECT_STREQ(dtype_name(DType::mxfp4), "mxfp4");
  EXPECT_TRUE(parse_dtype("mxfp4") == DType::mxfp4);
  EXPECT_TRUE(parse_dtype("MXFP4") == DType::mxfp4);
}

// Every code decodes to the E4M3 value its bits spell (bias 7, subnormals m * 2^-9, no
// infinities, S.1111.111 NaN), and encoding that value gives the code back.
TEST(Dtype, E4m3DecodesEveryCodeAndRoundTrips) {
  EXPECT_EQ(e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x3c), 1.5f);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
  float prev = -1.0f;
  for (int c = 0; c < 0x7f; ++c) {
    const float v = e4m3_to_f32(static_cast<uint8_t>(c));
    EXPECT_GT(v, prev) << c;  // positive codes are ordered like their values
    prev = v;
    EXPECT_EQ(f32_to_e4m3(v), c) << c;
    EXPECT_EQ(f32_to_e4m3(-v), c == 0 ? 0x80 : (c | 0x80)) << c;
    EXPECT_EQ(e4m3_to_f32(static_cast<uint8_t>(c | 0x80)), -v) << c;
  }
}

TEST(Dtype, E4m3RoundsToNearestEvenAndSaturates) {
  // 1 + 1/16 lies halfway between 1 (mantissa 0, even) and 1.125 (mantissa 1): to 1.
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);
  // 1.1875 lies halfway between 1.125 (odd) and 1.25 (even): to 1.25.
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3a);
  EXPECT_EQ(f32_to_e4m3(1.07f), 0x39);  // past halfway: up
  // Halfway between the two smallest subnormals (1.5 * 2^-9): to the even one, 2 * 2^-9.
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.5f, -9)), 0x02);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -11)), 0x00);  // below half the smallest: zero
  // Rounding up out of a binade carries into the exponent (mantissa 8 becomes the next power of 2).
  EXPECT_EQ(f32_to_e4m3(1.97f), 0x40);  // rounds to 2.0
  EXPECT_EQ(f32_to_e4m3(447.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(448.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(1e6f), 0x7e);  // saturates, no infinity in E4M3
  EXPECT_EQ(f32_to_e4m3(-1e6f), 0xfe);
  EXPECT_EQ(f32_to_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(f32_to_e4m3(std::nanf("")) & 0x7f, 0x7f);
}

}  // namespace
}  // namespace brigade
