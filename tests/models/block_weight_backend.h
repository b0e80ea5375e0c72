// A test backend for weight loading: memory only (no ops), says yes to the block-quantized
// weight types it is given and records what prepare_weight receives.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <vector>

#include "core/backend.h"

namespace brigade::testing {

// prepare_weight records the host tensor, its bytes and the type asked for, and keeps the bytes
// as they came.
class BlockWeightBackend final : public Backend {
 public:
  struct Prepared {
    Tensor host;
    std::vector<uint8_t> bytes;
    std::optional<DType> want;
  };
  explicit BlockWeightBackend(std::set<DType> blocks) : blocks_(std::move(blocks)) {}
  std::vector<Prepared> prepared;

  std::string name() const override { return "blocks"; }
  DType activation_dtype() const override { return DType::f32; }
  bool supports_weight_dtype(DType t) const override { return Backend::supports_weight_dtype(t) || blocks_.count(t); }
  bool supports_moe() const override { return true; }  // loads MoE models (runs nothing)
  Expected<Buffer> allocate(size_t bytes) override {
    return Buffer(std::malloc(std::max<size_t>(bytes, 1)), bytes, [](void* p) { std::free(p); });
  }
  void upload(const Tensor& dst, const void* src) override { std::memcpy(dst.data, src, dst.nbytes()); }
  void download(void* dst, const Tensor& src) override { std::memcpy(dst, src.data, src.nbytes()); }
  Expected<OwnedTensor> prepare_weight(const Tensor& host, std::optional<DType> want) override {
    const auto* p = static_cast<const uint8_t*>(host.data);
    prepared.push_back({host, std::vector<uint8_t>(p, p + host.nbytes()), want});
    BRIGADE_ASSIGN_OR_RETURN(Buffer buf, allocate(host.nbytes()));
    Tensor t = host;
    t.data = buf.data();
    std::memcpy(t.data, host.data, host.nbytes());
    return OwnedTensor{std::move(buf), t};
  }
  void synchronize() override {}
  void embedding(const Tensor&, const Tensor&, const Tensor&) override { FAIL(); }
  void matmul(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override { FAIL(); }
  void rms_norm(const Tensor&, const Tensor&, float, const Tensor&) override { FAIL(); }
  void add_rms_norm(const Tensor&, const Tensor&, const Tensor&, float, const Tensor&) override { FAIL(); }
  void add(const Tensor&, const Tensor&) override { FAIL(); }
  void silu_mul(const Tensor&, const Tensor&) override { FAIL(); }
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

 private:
  std::set<DType> blocks_;
};

}  // namespace brigade::testing
