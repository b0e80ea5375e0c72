// A test backend for weight loading: memory only (no ops), says yes to the block-quantized
// weight types it is given and records what prepare_weight receives.
#pragma once

#include <cstring>
#include <optional>
#include <set>
#include <vector>

#include "tests/memory_only_backend.h"

namespace brigade::testing {

// prepare_weight records the host tensor, its bytes and the type asked for, and keeps the bytes
// as they came.
class BlockWeightBackend final : public MemoryOnlyBackend {
 public:
  struct Prepared {
    Tensor host;
    std::vector<uint8_t> bytes;
    std::optional<DType> want;
  };
  // `stacked`: whether it says it multiplies row groups of different types (matmul_stacked).
  explicit BlockWeightBackend(std::set<DType> blocks, bool stacked = false) : blocks_(std::move(blocks)), stacked_(stacked) {}
  std::vector<Prepared> prepared;

  std::string name() const override { return "blocks"; }
  bool supports_weight_dtype(DType t) const override { return Backend::supports_weight_dtype(t) || blocks_.count(t); }
  bool supports_moe() const override { return true; }  // loads MoE models (runs nothing)
  bool supports_stacked_matmul() const override { return stacked_; }
  Expected<OwnedTensor> prepare_weight(const Tensor& host, std::optional<DType> want) override {
    const auto* p = static_cast<const uint8_t*>(host.data);
    prepared.push_back({host, std::vector<uint8_t>(p, p + host.nbytes()), want});
    BRIGADE_ASSIGN_OR_RETURN(Buffer buf, allocate(host.nbytes()));
    Tensor t = host;
    t.data = buf.data();
    std::memcpy(t.data, host.data, host.nbytes());
    return OwnedTensor{std::move(buf), t};
  }

 private:
  std::set<DType> blocks_;
  bool stacked_ = false;
};

}  // namespace brigade::testing
