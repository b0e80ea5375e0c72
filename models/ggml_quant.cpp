#include "models/ggml_quant.h"

#include <array>
#include <cstring>
#include <string>

#include "core/quant.h"
#include "core/status.h"

namespace brigade {
namespace {

constexpr uint32_t kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ2_K = 10,
                   kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kBF16 = 30, kMXFP4 = 39;

constexpr std::array<GgmlTypeInfo, 14> kTypes = {{
    {kF32, "F32", 1, 4, DType::f32},
    {kF16, "F16", 1, 2, DType::f16},
    {kBF16, "BF16", 1, 2, DType::bf16},
    {kQ4_0, "Q4_0", 32, 18, DType::q4_0},
    {kQ4_1, "Q4_1", 32, 20, DType::q4_1},
    {kQ5_0, "Q5_0", 32, 22, std::nullopt},
    {kQ5_1, "Q5_1", 32, 24, std::nullopt},
    {kQ8_0, "Q8_0", 32, 34, DType::q8_0},
    {kQ2_K, "Q2_K", 256, 84, std::nullopt},
    {kQ3_K, "Q3_K", 256, 110, std::nullopt},
    {kQ4_K, "Q4_K", 256, 144, DType::q4_k},
    {kQ5_K, "Q5_K", 256, 176, DType::q5_k},
    {kQ6_K, "Q6_K", 256, 210, DType::q6_k},
    {kMXFP4, "MXFP4", 32, 17, DType::mxfp4},
}};

// The types brigade has a DType for must agree with core/dtype.h's block sizes.
constexpr bool agrees_with_dtypes() {
  for (const auto& t : kTypes)
    if (t.dtype && (t.block_elems != dtype_block_elems(*t.dtype) || t.block_bytes != dtype_block_bytes(*t.dtype)))
      return false;
  return true;
}
static_assert(agrees_with_dtypes(), "the ggml type table and core/dtype.h's block sizes agree");

// ggml's names of the ids brigade refuses (ggml.h's enum ggml_type; gaps are removed types).
const char* refused_name(uint32_t id) {
  switch (id) {
    case 9: return "Q8_1";
    case 15: return "Q8_K";
    case 16: return "IQ2_XXS";
    case 17: return "IQ2_XS";
    case 18: return "IQ3_XXS";
    case 19: return "IQ1_S";
    case 20: return "IQ4_NL";
    case 21: return "IQ3_S";
    case 22: return "IQ2_S";
    case 23: return "IQ4_XS";
    case 24: return "I8";
    case 25: return "I16";
    case 26: return "I32";
    case 27: return "I64";
    case 28: return "F64";
    case 29: return "IQ1_M";
    case 34: return "TQ1_0";
    case 35: return "TQ2_0";
    case 40: return "NVFP4";
    case 41: return "Q1_0";
    default: return nullptr;
  }
}

float h(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}

// Q5_0 / Q5_1: 32 elements; element j < 16 is the low nibble of qs[j], j + 16 the high one, and
// bit 4 of element e is bit e of the little-endian u32 qh.

void dequant_q5(const uint8_t* b, float* y, bool with_min) {
  const float d = h(b), m = with_min ? h(b + 2) : 0.0f;
  const uint8_t* p = b + (with_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  const int offset = with_min ? 0 : 16;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
    y[j] = static_cast<float>(lo - offset) * d + m;
    y[j + 16] = static_cast<float>(hi - offset) * d + m;
  }
}

// Q2_K: two halves of 128; in each, four 2-bit planes (shift 0, 2, 4, 6) of qs[32 half, +32),
// each plane two runs of 16 with their own 4-bit scale and min (scales[] in that order).
void dequant_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = h(b + 80), dmin = h(b + 82);
  int is = 0;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int run = 0; run < 2; ++run) {
        const uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 15), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * run] >> shift) & 3) - ml;
      }
    }
  }
}

// Q3_K: as Q2_K's planes, the third bit from hmask (bit set: +0, clear: -4), sixteen 6-bit scales
// (offset 32) packed in scales[12]: low nibbles in bytes 0-7, top 2 bits in bytes 8-11.
void dequant_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const uint8_t* packed = b + 96;
  const float d = h(b + 108);
  int8_t sc[16];
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? packed[i] & 15 : packed[i - 8] >> 4;
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    sc[i] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
  int is = 0;
  uint8_t m = 1;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1)) {
      for (int run = 0; run < 2; ++run) {
        const float dl = d * static_cast<float>(sc[is++]);
        for (int l = 16 * run; l < 16 * run + 16; ++l)
          *y++ = dl * static_cast<float>(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
      }
    }
  }
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

std::string ggml_type_name_of(uint32_t id) {
  if (const GgmlTypeInfo* t = ggml_type_info(id)) return t->name;
  if (const char* n = refused_name(id)) return n;
  return "type " + std::to_string(id);
}

const char* ggml_supported_types() {
  static const std::string names = [] {
    std::string s;
    for (const auto& t : kTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
  }();
  return names.c_str();
}

const GgmlTypeInfo* ggml_type_of(DType d) {
  for (const auto& t : kTypes)
    if (t.dtype == d) return &t;
  return nullptr;
}

void dequantize_ggml(const GgmlTypeInfo& type, const uint8_t* src, float* dst, int64_t n) {
  if (type.dtype) {
    quant::dequantize_row(src, *type.dtype, dst, n);
    return;
  }
  const int64_t blocks = n / type.block_elems;
  for (int64_t i = 0; i < blocks; ++i, src += type.block_bytes, dst += type.block_elems) {
    switch (type.id) {
      case kQ5_0: dequant_q5(src, dst, false); break;
      case kQ5_1: dequant_q5(src, dst, true); break;
      case kQ2_K: dequant_q2_k(src, dst); break;
      case kQ3_K: dequant_q3_k(src, dst); break;
      default: BRIGADE_CHECK(false, "dequantize_ggml: a type ggml_type_info lists");
    }
  }
}

}  // namespace brigade
