// Helpers for the GPU tests: the shared CUDA backend (or a skip), tensors filled from host values
// on either backend, and the error measure the tolerances are stated in.
//
// Inputs are made once on the host as f32 values already rounded to bf16, so the CPU backend (f32
// activations) and the GPU backend (bf16 activations) start from identical numbers; the
// difference left is the GPU's bf16 storage of intermediates and outputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "core/backend.h"
#include "cpu/cpu_backend.h"
#include "gpu/cuda_backend.h"
#include "models/make_model.h"

namespace brigade::gpu_test {

// The process-wide CUDA backend, or null when this machine has no usable GPU.
inline CudaBackend* gpu() {
  static std::unique_ptr<CudaBackend> backend = [] {
    std::unique_ptr<CudaBackend> b;
    if (cuda_device_count() == 0) return b;
    auto made = make_cuda_backend();
    if (made) b = std::move(*made);
    else ADD_FAILURE() << "a CUDA device exists but the backend did not start: " << made.status().to_string();
    return b;
  }();
  return backend.get();
}

// The synthetic Llama the whole-model GPU tests share: big enough for real tiles and splits
// (hidden 256, 4 layers, 8 query heads over 2 KV heads, MLP 512, vocabulary 1000), small enough
// to compare against the CPU in milliseconds.
inline SyntheticModelSpec small_gpu_model(uint64_t seed) {
  SyntheticModelSpec spec;
  spec.hidden_size = 256;
  spec.n_layers = 4;
  spec.n_heads = 8;
  spec.n_kv_heads = 2;
  spec.intermediate_size = 512;
  spec.vocab_size = 1000;
  spec.seed = seed;
  return spec;
}

// small_gpu_model's shape as qwen3_moe: 16 experts of width 128, top-4 renormalised, layer 2
// keeping a dense MLP.
inline SyntheticModelSpec small_gpu_moe_model(uint64_t seed) {
  SyntheticModelSpec spec = small_gpu_model(seed);
  spec.arch = "qwen3_moe";
  spec.n_experts = 16;
  spec.n_experts_per_tok = 4;
  spec.moe_intermediate_size = 128;
  spec.mlp_only_layers = {2};
  return spec;
}

inline Backend& cpu() {
  static std::unique_ptr<Backend> backend = make_cpu_backend({2});
  return *backend;
}

#define BRIGADE_REQUIRE_GPU()                                                        \
  do {                                                                               \
    if (::brigade::gpu_test::gpu() == nullptr)                                       \
      GTEST_SKIP() << "no CUDA device (cuda_device_count() == 0): GPU test skipped"; \
  } while (0)

// n values uniform in [lo, hi), rounded to bf16.
inline std::vector<float> random_values(std::mt19937& rng, int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(u(rng)));
  return v;
}

// A tensor of `dtype` on `b` holding `values` (converted from f32; i32 values are truncated).
inline OwnedTensor put(Backend& b, DType dtype, std::initializer_list<int64_t> dims, const std::vector<float>& values) {
  Tensor shape(nullptr, dtype, dims);
  auto buf = b.allocate(shape.nbytes());
  EXPECT_TRUE(buf.has_value());
  OwnedTensor o{std::move(*buf), shape};
  o.tensor.data = o.buffer.data();
  EXPECT_EQ(static_cast<int64_t>(values.size()), shape.numel());
  std::vector<uint8_t> host(shape.nbytes());
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::f32: std::memcpy(host.data() + 4 * i, &values[i], 4); break;
      case DType::bf16: { const uint16_t h = f32_to_bf16(values[i]); std::memcpy(host.data() + 2 * i, &h, 2); break; }
      case DType::i32: { const int32_t x = static_cast<int32_t>(values[i]); std::memcpy(host.data() + 4 * i, &x, 4); break; }
      default: ADD_FAILURE() << "unsupported dtype in put()";
    }
  }
  b.upload(o.tensor, host.data());
  return o;
}

inline OwnedTensor put_i32(Backend& b, std::initializer_list<int64_t> dims, const std::vector<int32_t>& values) {
  std::vector<float> f(values.begin(), values.end());
  return put(b, DType::i32, dims, f);
}

// A weight [rows, cols] prepared by `b` from host f32 values as bf16 on both backends (the GPU
// converts to bf16 itself), so the CPU and the GPU multiply the same numbers.
inline OwnedTensor weight(Backend& b, int64_t rows, int64_t cols, const std::vector<float>& values) {
  Tensor host(const_cast<float*>(values.data()), DType::f32, {rows, cols});
  auto w = b.prepare_weight(host, b.activation_dtype() == DType::f32 ? std::optional<DType>(DType::bf16) : std::nullopt);
  EXPECT_TRUE(w.has_value()) << w.status().to_string();
  return std::move(*w);
}

// An uninitialised tensor on `b`.
inline OwnedTensor empty(Backend& b, DType dtype, std::initializer_list<int64_t> dims) {
  Tensor shape(nullptr, dtype, dims);
  auto buf = b.allocate(shape.nbytes());
  EXPECT_TRUE(buf.has_value());
  OwnedTensor o{std::move(*buf), shape};
  o.tensor.data = o.buffer.data();
  return o;
}

// The tensor's values as f32 on the host (waits for the backend).
inline std::vector<float> get(Backend& b, const Tensor& t) {
  b.synchronize();
  std::vector<uint8_t> host(t.nbytes());
  b.download(host.data(), t);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype) {
      case DType::f32: std::memcpy(&v[i], host.data() + 4 * i, 4); break;
      case DType::bf16: { uint16_t h; std::memcpy(&h, host.data() + 2 * i, 2); v[i] = bf16_to_f32(h); break; }
      case DType::i32: { int32_t x; std::memcpy(&x, host.data() + 4 * i, 4); v[i] = static_cast<float>(x); break; }
      default: ADD_FAILURE() << "unsupported dtype in get()";
    }
  }
  return v;
}

// ||got - want||_2 / ||want||_2 (relative error of the whole output).
inline double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Cosine similarity of a [n] and b [n] (1 = same direction), in double.
inline double cosine(const float* a, const float* b, int n) {
  double ab = 0.0, aa = 0.0, bb = 0.0;
  for (int i = 0; i < n; ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(std::max(aa * bb, 1e-300));
}

// bf16 keeps 8 significant bits (relative rounding <= 2^-9 = 0.2%); an op that rounds its output
// once stays near that, a few roundings of intermediates within 1%.
constexpr double kBf16Tol = 1e-2;

// A step's sequences (query rows, context length) over shuffled pages of `page` tokens: the host
// values of AttentionMeta's tensors (as put() takes them) and the cache slot of every context
// position, sequence by sequence.
struct PagedSeqs {
  int n_rows = 0, n_ctx = 0, n_pages = 0, max_blocks = 0, max_q = 0, max_ctx = 0;
  std::vector<float> table, q_start, ctx_len, slots;
};
inline PagedSeqs paged_seqs(const std::vector<std::pair<int, int>>& seqs, int page, std::mt19937& rng) {
  PagedSeqs p;
  for (auto [n_q, ctx] : seqs) {
    p.n_rows += n_q, p.n_ctx += ctx, p.n_pages += (ctx + page - 1) / page;
    p.max_blocks = std::max(p.max_blocks, (ctx + page - 1) / page), p.max_q = std::max(p.max_q, n_q);
    p.max_ctx = std::max(p.max_ctx, ctx);
  }
  std::vector<int32_t> pages(static_cast<size_t>(p.n_pages));
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int32_t>(i);
  std::shuffle(pages.begin(), pages.end(), rng);
  p.table.assign(seqs.size() * static_cast<size_t>(p.max_blocks), 0.0f);
  int used = 0, row = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto [n_q, ctx] = seqs[s];
    p.q_start.push_back(static_cast<float>(row));
    p.ctx_len.push_back(static_cast<float>(ctx));
    for (int b = 0; b < (ctx + page - 1) / page; ++b)
      p.table[s * static_cast<size_t>(p.max_blocks) + static_cast<size_t>(b)] = static_cast<float>(pages[static_cast<size_t>(used + b)]);
    for (int pos = 0; pos < ctx; ++pos)
      p.slots.push_back(static_cast<float>(pages[static_cast<size_t>(used + pos / page)] * page + pos % page));
    used += (ctx + page - 1) / page;
    row += n_q;
  }
  p.q_start.push_back(static_cast<float>(row));
  return p;
}

// PagedSeqs' AttentionMeta on `be` with the tensors it points into.
struct PagedMeta {
  OwnedTensor q_start, ctx_len, table;
  AttentionMeta meta;
};
inline PagedMeta put_meta(Backend& be, const PagedSeqs& ps) {
  PagedMeta m;
  const auto n_seqs = static_cast<int64_t>(ps.ctx_len.size());
  m.q_start = put(be, DType::i32, {n_seqs + 1}, ps.q_start);
  m.ctx_len = put(be, DType::i32, {n_seqs}, ps.ctx_len);
  m.table = put(be, DType::i32, {n_seqs, ps.max_blocks}, ps.table);
  m.meta.q_start = m.q_start.tensor;
  m.meta.ctx_len = m.ctx_len.tensor;
  m.meta.block_table = m.table.tensor;
  m.meta.n_seqs = static_cast<int>(n_seqs);
  m.meta.max_q_len = ps.max_q;
  m.meta.max_ctx_len = ps.max_ctx;
  return m;
}

}  // namespace brigade::gpu_test
