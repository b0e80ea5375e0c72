// CpuBackend: the Backend ops on host memory (cpu_backend.h). The class only owns the thread
// pool and the chosen kernel table; the ops live in the files listed in ops.h.
#include "cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/ops.h"

namespace brigade {
namespace {

bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& o)
      : pool_(o.n_threads), kernels_(cpu::kernels_for(cpu::simd_level_from_env())) {
    ctx_.pool = &pool_;
    ctx_.kernels = &kernels_;
  }

  std::string name() const override {
    return std::string("cpu (") + cpu::simd_level_name(kernels_.level) + ", " +
           std::to_string(pool_.size()) + " threads)";
  }
  DType activation_dtype() const override { return DType::f32; }
  bool supports_kv_dtype(DType t) const override { return is_float(t) || t == DType::i8; }

  Expected<Buffer> allocate(size_t bytes) override {
    const size_t rounded = (std::max<size_t>(bytes, 1) + 63) & ~size_t{63};
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr)
      return out_of_resources("cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    return Buffer(p, bytes, [](void* q) { std::free(q); });
  }
  void upload(const Tensor& dst, const void* host_src) override {
    std::memcpy(dst.data, host_src, dst.nbytes());
  }
  void download(void* host_dst, const Tensor& src) override {
    std::memcpy(host_dst, src.data, src.nbytes());
  }

  Expected<OwnedTensor> prepare_weight(const Tensor& host, std::optional<DType> want) override {
    const DType to = want.value_or(host.dtype);
    if (to != host.dtype && !(is_float(to) && is_float(host.dtype)))
      return unsupported(std::string("cannot convert a ") + dtype_name(host.dtype) + " weight to " +
                         dtype_name(to) + "; weights convert between f32, bf16 and f16");
    Tensor dst = host;
    dst.dtype = to;
    auto buf = allocate(dst.nbytes());
    if (!buf) return buf.status();
    dst.data = buf->data();
    convert(host, dst);
    return OwnedTensor{std::move(*buf), dst};
  }
  void synchronize() override {}

  void embedding(const Tensor& table, const Tensor& ids, const Tensor& out) override {
    cpu::embedding(ctx_, table, ids, out);
  }
  void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) override {
    cpu::matmul(ctx_, x, w, bias, out);
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    cpu::rms_norm(ctx_, x, weight, eps, out);
  }
  void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                    const Tensor& out) override {
    cpu::add_rms_norm(ctx_, residual, x, weight, eps, out);
  }
  void add(const Tensor& a, const Tensor& b) override { cpu::add(ctx_, a, b); }
  void silu_mul(const Tensor& gate_up, const Tensor& out) override {
    cpu::silu_mul(ctx_, gate_up, out);
  }
  void qk_head_norm(const Tensor& qkv, const QkvLayout& l, const Tensor& q_weight,
                    const Tensor& k_weight, float eps) override {
    cpu::qk_head_norm(ctx_, qkv, l, q_weight, k_weight, eps);
  }
  void rope(const Tensor& qkv, const QkvLayout& l, const Tensor& positions,
            const RopeConfig& rope) override {
    cpu::rope(ctx_, qkv, l, positions, rope);
  }
  void write_kv(const KvLayer& cache, const Tensor& qkv, const QkvLayout& l,
                const Tensor& slots) override {
    cpu::write_kv(ctx_, cache, qkv, l, slots);
  }
  void attention(const Tensor& qkv, const QkvLayout& l, const KvLayer& cache,
                 const AttentionMeta& meta, float scale, const Tensor& out) override {
    cpu::attention(ctx_, qkv, l, cache, meta, scale, out);
  }
  void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) override {
    cpu::gather_rows(ctx_, x, rows, out);
  }

 private:
  // dst = src element-wise (same shape); float types convert through f32 in blocks.
  void convert(const Tensor& src, const Tensor& dst) {
    if (src.dtype == dst.dtype) {
      std::memcpy(dst.data, src.data, src.nbytes());
      return;
    }
    constexpr int64_t kBlock = 4096;
    const size_t in_size = dtype_size(src.dtype), out_size = dtype_size(dst.dtype);
    pool_.parallel_for((src.numel() + kBlock - 1) / kBlock, 16, [&](int64_t b, int64_t e, int) {
      std::vector<float> tmp(kBlock);
      for (int64_t blk = b; blk < e; ++blk) {
        const int64_t i0 = blk * kBlock, cnt = std::min(kBlock, src.numel() - i0);
        kernels_.to_f32(static_cast<const char*>(src.data) + static_cast<size_t>(i0) * in_size,
                        src.dtype, tmp.data(), cnt);
        kernels_.from_f32(tmp.data(), dst.dtype,
                          static_cast<char*>(dst.data) + static_cast<size_t>(i0) * out_size, cnt);
      }
    });
  }

  ThreadPool pool_;
  const cpu::Kernels& kernels_;
  cpu::CpuContext ctx_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

std::string cpu_simd_level() { return cpu::simd_level_name(cpu::simd_level_from_env()); }

}  // namespace brigade
