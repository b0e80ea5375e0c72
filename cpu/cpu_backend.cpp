// CpuBackend: the Backend ops on host memory (cpu_backend.h). The class only owns the thread
// pool and the chosen kernel table; the ops live in the files listed in ops.h.
#include "cpu/cpu_backend.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "core/quant.h"
#include "core/sampling.h"
#include "core/thread_pool.h"
#include "cpu/openblas_core.h"
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
  // Float weights, and the block-quantized ones matmul and embedding read in place (core/quant.h).
  bool supports_weight_dtype(DType t) const override { return is_float(t) || is_block_quantized(t); }

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
  void copy(const Tensor& dst, const Tensor& src) override {
    BRIGADE_CHECK(dst.nbytes() == src.nbytes(), "copy() between tensors of one size");
    std::memcpy(dst.data, src.data, src.nbytes());
  }

  Expected<OwnedTensor> prepare_weight(const Tensor& host, std::optional<DType> want) override {
    const DType to = want.value_or(host.dtype);
    if (to != host.dtype) {
      const bool dequantize = is_float(to) && (is_float(host.dtype) || is_block_quantized(host.dtype));
      const bool quantize = is_float(host.dtype) && quant::can_quantize_to(to);
      if (!dequantize && !quantize)
        return unsupported(std::string("cannot convert a ") + dtype_name(host.dtype) + " weight to " +
                           dtype_name(to) + "; weights convert between f32, bf16 and f16, dequantize from " +
                           "q8_0, q4_0, q4_1, q4_k, q5_k, q6_k and mxfp4, and quantize to q8_0, q4_0, q4_1 and mxfp4 " +
                           "(q4_k, q5_k and q6_k come only from GGUF files)");
    }
    const DType blocked = is_block_quantized(to) ? to : host.dtype;
    const int64_t row = host.ndim == 0 ? 1 : host.shape[static_cast<size_t>(host.ndim - 1)];
    if (row % dtype_block_elems(blocked) != 0)
      return unsupported("a " + host.shape_string() + " weight cannot be " + dtype_name(blocked) + ": its rows of " +
                         std::to_string(row) + " elements are not whole blocks of " +
                         std::to_string(dtype_block_elems(blocked)));
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
  bool supports_stacked_matmul() const override { return true; }
  void matmul_stacked(const Tensor& x, std::span<const Tensor> ws, const Tensor& bias, const Tensor& out) override {
    cpu::matmul_stacked(ctx_, x, ws, bias, out);
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    cpu::rms_norm(ctx_, x, weight, eps, out);
  }
  void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                    const Tensor& out) override {
    cpu::add_rms_norm(ctx_, residual, x, weight, eps, out);
  }
  void add(const Tensor& a, const Tensor& b) override { cpu::add(ctx_, a, b); }
  void add_row_bias(const Tensor& x, const Tensor& bias) override { cpu::add_row_bias(ctx_, x, bias); }
  void silu_mul(const Tensor& gate_up, const Tensor& out) override {
    cpu::silu_mul(ctx_, gate_up, out);
  }
  void gelu_tanh_mul(const Tensor& gate_up, const Tensor& out) override { cpu::gelu_tanh_mul(ctx_, gate_up, out); }
  void gelu_mul(const Tensor& gate_up, const Tensor& out) override { cpu::gelu_mul(ctx_, gate_up, out); }
  void xielu(const Tensor& x, const XieluParams& p) override { cpu::xielu(ctx_, x, p); }
  void scale(const Tensor& x, float s) override { cpu::scale(ctx_, x, s); }
  void softcap(const Tensor& x, float cap) override { cpu::softcap(ctx_, x, cap); }
  void clamp(const Tensor& x, float lo, float hi) override { cpu::clamp(ctx_, x, lo, hi); }
  void qk_head_norm(const Tensor& qkv, const QkvLayout& l, const Tensor& q_weight,
                    const Tensor& k_weight, float eps) override {
    cpu::qk_head_norm(ctx_, qkv, l, q_weight, k_weight, eps);
  }
  void qk_head_layer_norm(const Tensor& qkv, const QkvLayout& l, const Tensor& q_weight, const Tensor& k_weight,
                          float eps) override {
    cpu::qk_head_layer_norm(ctx_, qkv, l, q_weight, k_weight, eps);
  }
  void qk_sum_squares(const Tensor& qkv, const QkvLayout& l, const Tensor& sums) override {
    cpu::qk_sum_squares(ctx_, qkv, l, sums);
  }
  void qk_norm_by_sums(const Tensor& qkv, const QkvLayout& l, const Tensor& sums, int64_t q_total, int64_t k_total,
                       const Tensor& q_weight, const Tensor& k_weight, float eps) override {
    cpu::qk_norm_by_sums(ctx_, qkv, l, sums, q_total, k_total, q_weight, k_weight, eps);
  }
  void attention_temperature(const Tensor& qkv, const QkvLayout& l, const Tensor& positions, float floor_scale,
                             float scale, float offset) override {
    cpu::attention_temperature(ctx_, qkv, l, positions, floor_scale, scale, offset);
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
  void scatter_add_rows(const Tensor& y, const Tensor& rows, const Tensor& src) override {
    cpu::scatter_add_rows(ctx_, y, rows, src);
  }
  bool supports_vision() const override { return true; }
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) override {
    cpu::layer_norm(ctx_, x, weight, bias, eps, out);
  }
  void gelu_tanh(const Tensor& x) override { cpu::gelu_tanh(ctx_, x); }
  void gelu(const Tensor& x) override { cpu::gelu(ctx_, x); }
  void quick_gelu(const Tensor& x) override { cpu::quick_gelu(ctx_, x); }
  bool supports_alibi() const override { return true; }
  void scatter_rows(const Tensor& y, const Tensor& rows, const Tensor& src) override {
    cpu::scatter_rows(ctx_, y, rows, src);
  }
  void blend_rows(const Tensor& x, const Tensor& rows, const Tensor& weights, const Tensor& out) override {
    cpu::blend_rows(ctx_, x, rows, weights, out);
  }
  bool supports_moe() const override { return true; }
  void moe_route(const Tensor& router_logits, const MoeRouting& r, const Tensor& ids,
                 const Tensor& weights) override {
    cpu::moe_route(ctx_, router_logits, r, ids, weights);
  }
  size_t moe_workspace_bytes(int64_t n, int k, int64_t d, int64_t inter) const override {
    return cpu::moe_workspace_bytes(n, k, d, inter);
  }
  void moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids,
                   const Tensor& weights, const MoeExpertMlp& mlp, const Tensor& workspace, const Tensor& out) override {
    cpu::moe_experts(ctx_, x, gate_up, down, ids, weights, mlp, workspace, out);
  }
  bool supports_split_experts() const override { return true; }
  bool supports_relu2_experts() const override { return true; }
  bool supports_gelu_experts() const override { return true; }
  void moe_experts_split(const Tensor& x, const Tensor& gate, const Tensor& up, const Tensor& down, const Tensor& ids,
                         const Tensor& weights, const MoeExpertMlp& mlp, const Tensor& workspace,
                         const Tensor& out) override {
    cpu::moe_experts_split(ctx_, x, gate, up, down, ids, weights, mlp, workspace, out);
  }
  void moe_identity_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, int n_experts,
                            const Tensor& out) override {
    cpu::moe_identity_experts(ctx_, x, ids, weights, n_experts, out);
  }
  bool supports_ssm() const override { return true; }
  void relu_squared(const Tensor& x) override { cpu::relu_squared(ctx_, x); }
  void relu2_mul(const Tensor& gate_up, const Tensor& out) override { cpu::relu2_mul(ctx_, gate_up, out); }
  void quantize_rows_int8(const Tensor& x) override { cpu::quantize_rows_int8(ctx_, x); }
  void ssm_conv(const Tensor& in, int64_t col, const Tensor& weight, const Tensor& bias, const SsmSeqs& seqs,
                const Tensor& conv_state, const Tensor& out) override {
    cpu::ssm_conv(ctx_, in, col, weight, bias, seqs, conv_state, out);
  }
  void short_conv(const Tensor& in, const Tensor& weight, const Tensor& bias, const SsmSeqs& seqs,
                  const Tensor& conv_state, const Tensor& out) override {
    cpu::short_conv(ctx_, in, weight, bias, seqs, conv_state, out);
  }
  void ssm_scan_diag(const Tensor& x, const Tensor& dt_in, const Tensor& b, const Tensor& c, const Tensor& z,
                     int64_t z_col, const Tensor& a, const Tensor& skip, const SsmSeqs& seqs, const Tensor& state,
                     const Tensor& out) override {
    cpu::ssm_scan_diag(ctx_, x, dt_in, b, c, z, z_col, a, skip, seqs, state, out);
  }
  void ssm_scan(const Tensor& proj, const Tensor& xbc, const SsmLayout& l, const SsmParams& p, const SsmSeqs& seqs,
                const Tensor& state, const Tensor& out) override {
    cpu::ssm_scan(ctx_, proj, xbc, l, p, seqs, state, out);
  }
  void gated_delta(const Tensor& qkv, const Tensor& proj, int64_t z_col, const SsmLayout& l, const SsmParams& p,
                   const SsmSeqs& seqs, const Tensor& state, const Tensor& out) override {
    cpu::gated_delta(ctx_, qkv, proj, z_col, l, p, seqs, state, out);
  }
  void kda(const Tensor& qkv, const Tensor& f, const Tensor& beta, const SsmLayout& l, const SsmParams& p,
           const SsmSeqs& seqs, const Tensor& state, const Tensor& out) override {
    cpu::kda(ctx_, qkv, f, beta, l, p, seqs, state, out);
  }
  void lightning_attention(const Tensor& qkv, const Tensor& decay, const SsmLayout& l, const SsmSeqs& seqs,
                           const Tensor& state, const Tensor& out) override {
    cpu::lightning_attention(ctx_, qkv, decay, l, seqs, state, out);
  }
  void sigmoid_mul(const Tensor& x, const Tensor& gate) override { cpu::sigmoid_mul(ctx_, x, gate); }
  bool supports_altup() const override { return true; }
  void altup_predict(const Tensor& streams, const Tensor& router, const Tensor& coefs, const Tensor& out) override {
    cpu::altup_predict(ctx_, streams, router, coefs, out);
  }
  void altup_correct(const Tensor& pred, const Tensor& activated, const Tensor& router, const Tensor& coefs,
                     int active) override {
    cpu::altup_correct(ctx_, pred, activated, router, coefs, active);
  }
  void match_rms(const Tensor& x, const Tensor& ref, float eps) override { cpu::match_rms(ctx_, x, ref, eps); }
  void gaussian_topk(const Tensor& x, int64_t cols, float k) override { cpu::gaussian_topk(ctx_, x, cols, k); }
  void v_head_norm(const Tensor& qkv, const QkvLayout& l, float eps) override { cpu::v_head_norm(ctx_, qkv, l, eps); }
  void gelu_tanh_gate(const Tensor& x, const Tensor& y) override { cpu::gelu_tanh_gate(ctx_, x, y); }
  bool supports_mla() const override { return true; }
  void head_matmul(const Tensor& x, const Tensor& w, int n_heads, const Tensor& out) override {
    cpu::head_matmul(ctx_, x, w, n_heads, out);
  }
  void write_mla_kv(const KvLayer& cache, const Tensor& latent, const Tensor& k_pe, const Tensor& slots) override {
    cpu::write_mla_kv(ctx_, cache, latent, k_pe, slots);
  }
  void mla_attention(const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l, const KvLayer& cache,
                     const AttentionMeta& meta, float scale, const Tensor& out) override {
    cpu::mla_attention(ctx_, q_lat, q_pe, l, cache, meta, scale, out);
  }
  bool supports_dsa() const override { return true; }
  void write_kv_columns(const KvLayer& cache, const Tensor& x, int col, const Tensor& slots) override {
    cpu::write_kv_columns(ctx_, cache, x, col, slots);
  }
  void dsa_topk(const Tensor& q, const Tensor& weights, const KvLayer& cache, const DsaLayout& l, const AttentionMeta& meta,
                const Tensor& workspace, const Tensor& out) override {
    (void)workspace;  // each row's scores live in its task's own vector
    cpu::dsa_topk(ctx_, q, weights, cache, l, meta, out);
  }
  void mla_sparse_attention(const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l, const KvLayer& cache,
                            const AttentionMeta& meta, const Tensor& indices, float scale, const Tensor& out) override {
    cpu::mla_sparse_attention(ctx_, q_lat, q_pe, l, cache, meta, indices, scale, out);
  }

  // The device path's token ops as plain loops (the executor forces that path on CPUs in tests).
  void argmax(const Tensor& logits, const Tensor& tokens) override {
    check_token_rows(logits, tokens);
    const size_t vocab = static_cast<size_t>(logits.dim(1));
    pool_.parallel_for(logits.dim(0), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; ++r) tokens.as<int32_t>()[r] = brigade::argmax(row_of(logits, r, vocab));
    });
  }
  void sample(const Tensor& logits, const Tensor& params, const Tensor& tokens) override {
    check_token_rows(logits, tokens);
    BRIGADE_CHECK(params.nbytes() >= static_cast<size_t>(logits.dim(0)) * sizeof(SampleParams),
                  "sample: params [n] SampleParams");
    const size_t vocab = static_cast<size_t>(logits.dim(1));
    const auto* p = static_cast<const SampleParams*>(params.data);
    pool_.parallel_for(logits.dim(0), 1, [&](int64_t b, int64_t e, int) {
      for (int64_t r = b; r < e; ++r) tokens.as<int32_t>()[r] = sample_like_device(row_of(logits, r, vocab), p[r]);
    });
  }
  void gather_tokens(const Tensor& table, const Tensor& index, const Tensor& tokens) override {
    check_token_index(table, index, tokens);
    for (int64_t i = 0; i < index.numel(); ++i) {
      const int32_t j = index.as<const int32_t>()[i];
      if (j >= 0) tokens.as<int32_t>()[i] = table.as<const int32_t>()[j];
    }
  }
  void scatter_tokens(const Tensor& tokens, const Tensor& index, const Tensor& table) override {
    check_token_index(table, index, tokens);
    for (int64_t i = 0; i < index.numel(); ++i) {
      const int32_t j = index.as<const int32_t>()[i];
      if (j >= 0) table.as<int32_t>()[j] = tokens.as<const int32_t>()[i];
    }
  }

 private:
  static void check_token_rows(const Tensor& logits, const Tensor& tokens) {
    BRIGADE_CHECK(logits.dtype == DType::f32 && logits.ndim == 2 && tokens.dtype == DType::i32 &&
                      tokens.numel() == logits.dim(0), "logits [n, vocab] f32, tokens [n] i32");
  }
  static std::span<const float> row_of(const Tensor& logits, int64_t r, size_t vocab) {
    return {logits.as<const float>() + static_cast<size_t>(r) * vocab, vocab};
  }
  // Indices outside the table are a bug of the caller (the executor owns both).
  static void check_token_index(const Tensor& table, const Tensor& index, const Tensor& tokens) {
    BRIGADE_CHECK(table.dtype == DType::i32 && index.dtype == DType::i32 && tokens.dtype == DType::i32 &&
                      index.numel() == tokens.numel(), "table [m], index [n], tokens [n] i32");
    for (int64_t i = 0; i < index.numel(); ++i)
      BRIGADE_CHECK(index.as<const int32_t>()[i] < table.numel(), "token index inside the table");
  }

  // dst = src element-wise (same shape); float types convert through f32 in blocks, and
  // block-quantized ones row by row (their rows are whole blocks).
  void convert(const Tensor& src, const Tensor& dst) {
    if (src.dtype == dst.dtype) {
      std::memcpy(dst.data, src.data, src.nbytes());
      return;
    }
    if (is_block_quantized(src.dtype) || is_block_quantized(dst.dtype)) {
      const int64_t len = src.ndim == 0 ? 1 : src.shape[static_cast<size_t>(src.ndim - 1)];
      pool_.parallel_for(src.numel() / len, std::max<int64_t>(1, 16384 / len), [&](int64_t b, int64_t e, int) {
        std::vector<float> tmp(static_cast<size_t>(len));
        for (int64_t r = b; r < e; ++r) {
          const char* in = static_cast<const char*>(src.data) + dtype_bytes(src.dtype, r * len);
          char* out = static_cast<char*>(dst.data) + dtype_bytes(dst.dtype, r * len);
          if (is_block_quantized(src.dtype)) quant::dequantize_row(in, src.dtype, tmp.data(), len);
          else kernels_.to_f32(in, src.dtype, tmp.data(), len);
          if (is_block_quantized(dst.dtype)) quant::quantize_row(tmp.data(), dst.dtype, out, len);
          else kernels_.from_f32(tmp.data(), dst.dtype, out, len);
        }
      });
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
  // An embedding program that did not re-execute (cpu/openblas_core.h) hears about the slow GEMM once.
  static const bool warned = [] {
    const std::string core = cpu::openblas_core_to_request();
    if (!core.empty())
      spdlog::warn("OpenBLAS runs its generic Prescott kernels on this CPU; OPENBLAS_CORETYPE={} in the "
                   "environment makes f32/bf16 prefill GEMMs about 4x faster", core);
    return true;
  }();
  (void)warned;
  return std::make_unique<CpuBackend>(options);
}

std::string cpu_simd_level() { return cpu::simd_level_name(cpu::simd_level_from_env()); }

}  // namespace brigade
