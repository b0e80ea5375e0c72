// Shared helpers for the CPU backend tests: one backend per SIMD level runnable here, tensors
// in backend memory, random fills and element access in double for the references.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/quant.h"
#include "cpu/cpu_backend.h"
#include "cpu/kernels.h"

namespace brigade::test {

// The BRIGADE_SIMD values this CPU can run, lowest first ("scalar" always).
inline std::vector<std::string> simd_levels() {
  std::vector<std::string> out;
  for (int l = 0; l <= static_cast<int>(cpu::detect_simd_level()); ++l)
    out.emplace_back(cpu::simd_level_name(static_cast<cpu::SimdLevel>(l)));
  return out;
}

// A backend forced to `level` (through BRIGADE_SIMD, as users do).
inline std::unique_ptr<Backend> backend_at(const std::string& level, int n_threads = 2) {
  setenv("BRIGADE_SIMD", level.c_str(), 1);
  auto b = make_cpu_backend({n_threads});
  unsetenv("BRIGADE_SIMD");
  EXPECT_NE(b->name().find(level), std::string::npos) << b->name();
  return b;
}

inline OwnedTensor make(Backend& b, DType t, std::initializer_list<int64_t> dims) {
  Tensor shape(nullptr, t, dims);
  auto buf = b.allocate(shape.nbytes());
  EXPECT_TRUE(buf.has_value());
  OwnedTensor o{std::move(*buf), shape};
  o.tensor.data = o.buffer.data();
  return o;
}

inline double get(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::f32: return t.as<float>()[i];
    case DType::bf16: return bf16_to_f32(t.as<uint16_t>()[i]);
    case DType::f16: return f16_to_f32(t.as<uint16_t>()[i]);
    case DType::i32: return t.as<int32_t>()[i];
    default: ADD_FAILURE() << "unexpected dtype"; return 0;
  }
}

inline void set(const Tensor& t, int64_t i, float v) {
  switch (t.dtype) {
    case DType::f32: t.as<float>()[i] = v; return;
    case DType::bf16: t.as<uint16_t>()[i] = f32_to_bf16(v); return;
    case DType::f16: t.as<uint16_t>()[i] = f32_to_f16(v); return;
    case DType::i32: t.as<int32_t>()[i] = static_cast<int32_t>(v); return;
    default: ADD_FAILURE() << "unexpected dtype";
  }
}

inline void fill_uniform(const Tensor& t, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) set(t, i, d(rng));
}

inline std::vector<float> to_vector(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<float>(get(t, i));
  return v;
}

// Random valid blocks of `t` for an [m, k] weight: codes uniform, f16 scales small and positive
// (q4_1's m = -z d with z in [2, 13]: asymmetric blocks; q4_k's and q5_k's 6-bit scales and mins,
// q6_k's int8 scales random; mxfp4's E8M0 scales 2^-11..2^-3), as a quantizer would leave them.
inline std::vector<uint8_t> random_weight(DType t, int64_t m, int64_t k, std::mt19937& rng) {
  std::vector<uint8_t> bytes(dtype_bytes(t, m * k));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(0.002f, 0.02f), zero(2.0f, 13.0f);
  const size_t bb = dtype_block_bytes(t);
  for (size_t off = 0; off < bytes.size(); off += bb) {
    uint8_t* blk = bytes.data() + off;
    auto put_f16 = [&](size_t at, float v) {
      const uint16_t h = f32_to_f16(v);
      std::memcpy(blk + at, &h, 2);
    };
    switch (t) {
      case DType::q8_0: case DType::q4_0: put_f16(0, scale(rng)); break;
      case DType::q4_1: {
        const float d = scale(rng);
        put_f16(0, d);
        put_f16(2, -zero(rng) * d);
        break;
      }
      case DType::q4_k: case DType::q5_k: put_f16(0, scale(rng)); put_f16(2, scale(rng) * 0.5f); break;
      case DType::q6_k: put_f16(208, scale(rng) * 0.05f); break;
      case DType::mxfp4: blk[0] = static_cast<uint8_t>(std::uniform_int_distribution<int>(116, 124)(rng)); break;
      default: ADD_FAILURE();
    }
  }
  return bytes;
}

inline std::vector<float> dequantized(const std::vector<uint8_t>& w, DType t, int64_t m, int64_t k) {
  std::vector<float> out(static_cast<size_t>(m * k));
  quant::dequantize_row(w.data(), t, out.data(), m * k);
  return out;
}

}  // namespace brigade::test
