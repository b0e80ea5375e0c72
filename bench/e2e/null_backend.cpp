#include "bench/e2e/null_backend.h"

#include <cstdlib>
#include <cstring>

namespace brigade {

namespace {

class NullBackend final : public Backend {
 public:
  std::string name() const override { return "null"; }
  DType activation_dtype() const override { return DType::f32; }
  Expected<Buffer> allocate(size_t bytes) override {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) return out_of_resources("null backend: allocation failed");
    std::memset(p, 0, bytes);
    return Buffer(p, bytes, [](void* q) { std::free(q); });
  }
  void upload(const Tensor&, const void*) override {}
  void download(void*, const Tensor&) override {}
  Expected<OwnedTensor> prepare_weight(const Tensor& host, std::optional<DType> want) override {
    OwnedTensor t;
    t.tensor = host;  // shape only: the mapped file is never read
    if (want) t.tensor.dtype = *want;
    return t;
  }
  void synchronize() override {}
  void embedding(const Tensor&, const Tensor&, const Tensor&) override {}
  void matmul(const Tensor&, const Tensor&, const Tensor&, const Tensor&) override {}
  void rms_norm(const Tensor&, const Tensor&, float, const Tensor&) override {}
  void add_rms_norm(const Tensor&, const Tensor&, const Tensor&, float, const Tensor&) override {}
  void add(const Tensor&, const Tensor&) override {}
  void silu_mul(const Tensor&, const Tensor&) override {}
  void gelu_tanh_mul(const Tensor&, const Tensor&) override {}
  void scale(const Tensor&, float) override {}
  void softcap(const Tensor&, float) override {}
  void qk_head_norm(const Tensor&, const QkvLayout&, const Tensor&, const Tensor&, float) override {}
  void rope(const Tensor&, const QkvLayout&, const Tensor&, const RopeConfig&) override {}
  void write_kv(const KvLayer&, const Tensor&, const QkvLayout&, const Tensor&) override {}
  void attention(const Tensor&, const QkvLayout&, const KvLayer&, const AttentionMeta&, float,
                 const Tensor&) override {}
  void gather_rows(const Tensor&, const Tensor&, const Tensor&) override {}
  void argmax(const Tensor&, const Tensor&) override {}
  void sample(const Tensor&, const Tensor&, const Tensor&) override {}
  void gather_tokens(const Tensor&, const Tensor&, const Tensor&) override {}
  void scatter_tokens(const Tensor&, const Tensor&, const Tensor&) override {}
};

}  // namespace

std::unique_ptr<Backend> make_null_backend() { return std::make_unique<NullBackend>(); }

}  // namespace brigade
