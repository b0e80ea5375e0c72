// A Backend for tests of loading and memory: host allocations, copies for upload/download, and
// ops that fail the test if called. Tests derive from it to say yes to other KV or weight types
// or to record what reaches prepare_weight.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/backend.h"

namespace brigade::testing {

class MemoryOnlyBackend : public Backend {
 public:
  DType activation_dtype() const override { return DType::f32; }
  Expected<Buffer> allocate(size_t bytes) override {
    return Buffer(std::malloc(std::max<size_t>(bytes, 1)), bytes, [](void* p) { std::free(p); });
  }
  void upload(const Tensor& dst, const void* src) override { std::memcpy(dst.data, src, dst.nbytes()); }
  void download(void* dst, const Tensor& src) override { std::memcpy(dst, src.data, src.nbytes()); }
  Expected<OwnedTensor> prepare_weight(const Tensor&, std::optional<DType>) override { return unsupported("no ops"); }
  void synchronize() override {}
  void embedding(const Tensor&, const Tensor&, const Tensor&) override { FAIL(); }
  void matmul(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override { FAIL(); }
  void rms_norm(const Tensor&, const Tensor&, float, const Tensor&) override { FAIL(); }
  void add_rms_norm(const Tensor&, const Tensor&, const Tensor&, float, const Tensor&) override { FAIL(); }
  void add(const Tensor&, const Tensor&) override { FAIL(); }
  void silu_mul(const Tensor&, const Tensor&) override { FAIL(); }
  void gelu_tanh_mul(const Tensor&, const Tensor&) override { FAIL(); }
  void scale(const Tensor&, float) override { FAIL(); }
  void softcap(const Tensor&, float) override { FAIL(); }
  void qk_head_norm(const Tensor&, const QkvLayout&, const Tensor&, const Tensor&, float) override { FAIL(); }
  void rope(const Tensor&, const QkvLayout&, const Tensor&, const RopeConfig&) override { FAIL(); }
  void write_kv(const KvLayer&, const Tensor&, const QkvLayout&, const Tensor&) override { FAIL(); }
  void attention(const Tensor&, const QkvLayout&, const KvLayer&, const AttentionMeta&, float, const Tensor&) override {
    FAIL();
  }
  void gather_rows(const Tensor&, const Tensor&, const Tensor&) override { FAIL(); }
  void argmax(const Tensor&, const Tensor&) override { FAIL(); }
  void sample(const Tensor&, const Tensor&, const Tensor&) override { FAIL(); }
  void gather_tokens(const Tensor&, const Tensor&, const Tensor&) override { FAIL(); }
  void scatter_tokens(const Tensor&, const Tensor&, const Tensor&) override { FAIL(); }
};

}  // namespace brigade::testing
