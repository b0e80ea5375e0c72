// CudaBackendImpl: the Backend ops on one GPU (cuda_backend.h). The class owns the stream, the
// cuBLASLt workspace and plans (gemm.h), device copies of RoPE frequency tables and the attention
// split workspace; the kernels live in *.cu behind kernels.h.
#include "gpu/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "gpu/cuda_check.h"
#include "gpu/gemm.h"
#include "gpu/kernels.h"
#include "gpu/step_graph.h"

namespace brigade {
namespace gpu {

void cuda_failed(const char* expr, cudaError_t err, const char* file, int line) {
  const std::string why = "CUDA call failed: " + cuda_error_string(err);
  check_failed(expr, why.c_str(), file, line);
}

void cublas_failed(const char* expr, cublasStatus_t st, const char* file, int line) {
  const std::string why = "cuBLAS call failed: status " + std::to_string(static_cast<int>(st));
  check_failed(expr, why.c_str(), file, line);
}

std::string cuda_error_string(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

}  // namespace gpu

namespace {

using gpu::HeadShape;
using gpu::Sig;

// Op ids in step signatures.
enum Op : int { kUpload = 1, kEmbedding, kMatmul, kRmsNorm, kAddRmsNorm, kAdd, kSiluMul, kGeluTanhMul, kScale, kSoftcap, kQkNorm, kRope, kWriteKv,
                kAttention, kGather, kArgmax, kSample, kGatherTokens, kScatterTokens, kMoeRoute, kMoeExperts,
                kHeadMatmul, kWriteMlaKv, kMlaAttention, kXielu, kAttnTemperature, kQkSumSquares, kQkNormBySums,
                kLayerNorm, kQkLayerNorm, kAddRowBias, kCopy, kSsmConv, kSsmScan, kSsmScanDiag, kGatedDelta,
                kSigmoidMul, kReluSquared, kKda, kWriteKvColumns, kDsaTopk, kLightning,
                kAltupPredict, kAltupCorrect, kMatchRms, kGaussianTopk, kVHeadNorm, kGeluTanhGate, kGelu, kClamp,
                kRelu2Mul, kQuantizeRowsInt8 };

bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

HeadShape head_shape(const QkvLayout& l) { return {l.n_heads, l.n_kv_heads, l.head_dim}; }

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

class CudaBackendImpl final : public CudaBackend {
 public:
  CudaBackendImpl(const CudaBackendOptions& o, const cudaDeviceProp& prop)
      : options_(o), sm_count_(prop.multiProcessorCount), compute_capability_(prop.major * 10 + prop.minor),
        device_name_(prop.name) {}

  ~CudaBackendImpl() override {
    cudaSetDevice(options_.device);
    if (stream_) cudaStreamSynchronize(stream_);
    for (auto& [ticket, ev] : tickets_) cudaEventDestroy(ev);
    for (cudaEvent_t ev : free_events_) cudaEventDestroy(ev);
    graphs_.reset();
    gemm_.reset();
    rope_tables_.clear();
    partial_ = Buffer();
    fp8_act_ = Buffer();
    workspace_ = Buffer();
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status init() {
    BRIGADE_CUDA_CHECK(cudaSetDevice(options_.device));
    BRIGADE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    auto ws = allocate(options_.gemm_workspace_bytes);
    if (!ws) return ws.status();
    workspace_ = std::move(*ws);
    gemm_ = std::make_unique<gpu::Gemm>(workspace_.data(), workspace_.bytes());
    gpu::attention_init();
    graphs_ = std::make_unique<gpu::StepGraphs>(stream_, options_.use_graphs, options_.step_arena_bytes);
    return Status::ok();
  }

  std::string name() const override { return "cuda (" + device_name_ + ", " + std::to_string(sm_count_) + " SMs)"; }
  DType activation_dtype() const override { return DType::bf16; }
  // The CUDA write_kv and attention kernels read bf16 or f32 pages only (no f16, no int8 scales).
  bool supports_kv_dtype(DType t) const override { return t == DType::bf16 || t == DType::f32; }
  // Float weights are bf16 here (prepare_weight); fp8 tensor cores start at sm_89 (Ada, Hopper).
  bool supports_weight_dtype(DType t) const override {
    return t == DType::bf16 || (t == DType::f8e4m3 && compute_capability_ >= 89);
  }
  int sm_count() const override { return sm_count_; }
  int device() const override { return options_.device; }
  std::pair<size_t, size_t> memory_info() const override {
    size_t free = 0, total = 0;
    if (cudaSetDevice(options_.device) != cudaSuccess || cudaMemGetInfo(&free, &total) != cudaSuccess) return {0, 0};
    return {free, total};
  }
  void* stream() const override { return stream_; }

  Expected<Buffer> allocate(size_t bytes) override {
    bind();
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 1));
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free allocation error
      return out_of_resources("cannot allocate " + std::to_string(bytes) + " bytes of GPU memory: " +
                              gpu::cuda_error_string(err));
    }
    // Zeroed, on the stream every later op and copy of it is queued on: memory is never read
    // uninitialized. It matters for the KV pool: a decode step padded to its graph bucket
    // (step_buckets.h) has rows that read page 0, position 0, whatever sequence holds it or none,
    // and a stale NaN there would reach the other rows through the per-tensor absmax that scales
    // the activations under weights: fp8. (No step allocates, so nothing is captured here.)
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    BRIGADE_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capturing));
    if (capturing == cudaStreamCaptureStatusNone) BRIGADE_CUDA_CHECK(cudaMemsetAsync(p, 0, std::max<size_t>(bytes, 1), stream_));
    const int device = options_.device;
    return Buffer(p, bytes, [device](void* q) {
      cudaSetDevice(device);
      cudaFree(q);  // synchronises with the device: no kernel still reads it
    });
  }
  // The host memory may be reused once upload returns (pageable copies are staged before return).
  // Inside a step the bytes are staged in the pinned arena (step_graph.h) and copied from there.
  void upload(const Tensor& dst, const void* host_src) override {
    bind();
    const size_t n = dst.nbytes();
    const void* src = graphs_->active() ? graphs_->stage(host_src, n) : host_src;
    if (src == nullptr) {  // arena full: this step runs eagerly, the closure owns a copy
      auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(host_src),
                                                         static_cast<const uint8_t*>(host_src) + n);
      graphs_->record(Sig() << kUpload << dst.data << int64_t(n) << copy->data(), [this, dst, n, copy] {
        BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst.data, copy->data(), n, cudaMemcpyHostToDevice, stream_));
      });
      return;
    }
    graphs_->record(Sig() << kUpload << dst.data << int64_t(n) << src, [this, dst, n, src] {
      BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst.data, src, n, cudaMemcpyHostToDevice, stream_));
    });
  }
  // A device-to-device copy is a stream operation that a graph captures, so inside a step it is
  // recorded like an op (a recurrent model restores a state snapshot at the start of its step).
  void copy(const Tensor& dst, const Tensor& src) override {
    BRIGADE_CHECK(dst.nbytes() == src.nbytes(), "copy() between tensors of one size");
    bind();
    graphs_->record(Sig() << kCopy << dst << src, [=, this] {
      BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), cudaMemcpyDeviceToDevice, stream_));
    });
  }
  void download(void* host_dst, const Tensor& src) override {
    BRIGADE_CHECK(!graphs_->active(), "download() inside a step");
    bind();
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(host_dst, src.data, src.nbytes(), cudaMemcpyDeviceToHost, stream_));
    BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  // Pinned memory: a copy into it is a DMA behind the stream's queued work; into pageable
  // memory cudaMemcpyAsync would wait for the stream.
  Expected<Buffer> allocate_host(size_t bytes) override {
    bind();
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault);
    if (err != cudaSuccess) {
      cudaGetLastError();
      return out_of_resources("cannot allocate " + std::to_string(bytes) + " bytes of pinned host memory: " +
                              gpu::cuda_error_string(err));
    }
    return Buffer(p, bytes, [](void* q) { cudaFreeHost(q); });
  }
  // The copy and an event behind it go on the stream; the ticket names the event.
  uint64_t download_async(void* host_dst, const Tensor& src) override {
    BRIGADE_CHECK(!graphs_->active(), "download_async() inside a step");
    bind();
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(host_dst, src.data, src.nbytes(), cudaMemcpyDeviceToHost, stream_));
    cudaEvent_t ev = nullptr;
    if (free_events_.empty()) {
      BRIGADE_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    } else {
      ev = free_events_.back();
      free_events_.pop_back();
    }
    BRIGADE_CUDA_CHECK(cudaEventRecord(ev, stream_));
    const uint64_t ticket = next_ticket_++;
    tickets_.emplace(ticket, ev);
    return ticket;
  }
  bool download_done(uint64_t ticket) override {
    bind();
    const cudaError_t err = cudaEventQuery(ticket_event(ticket));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not ready" is no error; clear it, or a launch check would see it
      return false;
    }
    BRIGADE_CUDA_CHECK(err);
    return true;
  }
  void wait_download(uint64_t ticket) override {
    bind();
    const cudaEvent_t ev = ticket_event(ticket);
    BRIGADE_CUDA_CHECK(cudaEventSynchronize(ev));
    free_events_.push_back(ev);
    tickets_.erase(ticket);
  }
  cudaEvent_t ticket_event(uint64_t ticket) const {
    auto it = tickets_.find(ticket);
    BRIGADE_CHECK(it != tickets_.end(), "a download ticket that download_async gave and wait_download has not retired");
    return it->second;
  }

  // Float weights become bf16 (the tensor-core GEMMs and the embedding read bf16); other types
  // are copied as they are. `want` other than bf16 for a float weight is unsupported.
  Expected<OwnedTensor> prepare_weight(const Tensor& host, std::optional<DType> want) override {
    BRIGADE_CHECK(!graphs_->active(), "prepare_weight() inside a step");
    bind();
    if (!is_float(host.dtype)) {
      if (want && *want != host.dtype)
        return unsupported(std::string("cannot convert a ") + dtype_name(host.dtype) + " weight to " + dtype_name(*want));
      auto buf = allocate(host.nbytes());
      if (!buf) return buf.status();
      Tensor dst = host;
      dst.data = buf->data();
      upload(dst, host.data);
      synchronize();
      return OwnedTensor{std::move(*buf), dst};
    }
    if (want == DType::f8e4m3) return prepare_fp8_weight(host);
    if (want && *want != DType::bf16)
      return unsupported(std::string("the CUDA backend keeps float weights in bf16; ") + dtype_name(*want) +
                         " weights are not supported (load with weight dtype bf16 or the stored type)");
    Tensor dst = host;
    dst.dtype = DType::bf16;
    auto buf = allocate(dst.nbytes());
    if (!buf) return buf.status();
    dst.data = buf->data();
    if (host.dtype == DType::bf16) {
      upload(dst, host.data);
    } else {
      auto staged = allocate(host.nbytes());
      if (!staged) return staged.status();
      Tensor src = host;
      src.data = staged->data();
      upload(src, host.data);
      gpu::launch_to_bf16(src.data, src.dtype, dst.data, dst.numel(), stream_);
    }
    synchronize();  // the staging buffer and the host memory are free to go
    return OwnedTensor{std::move(*buf), dst};
  }
  void synchronize() override {
    BRIGADE_CHECK(!graphs_->active(), "synchronize() inside a step");
    bind();
    BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void embedding(const Tensor& table, const Tensor& ids, const Tensor& out) override {
    const int64_t n = ids.numel(), d = table.row_numel();
    BRIGADE_CHECK(out.dtype == DType::bf16 && out.numel() == n * d, "embedding: out [n, d] bf16");
    BRIGADE_CHECK(table.dtype == DType::bf16 || table.dtype == DType::f32, "embedding: table bf16 or f32");
    bind();
    graphs_->record(Sig() << kEmbedding << table << ids << out, [=, this] {
      gpu::launch_embedding(table.data, table.dtype, ids.as<const int32_t>(), n, d, table.dim(0), out.data, stream_);
    });
  }
  void matmul(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) override {
    bind();
    if (w.dtype == DType::f8e4m3) return matmul_fp8(x, w, bias, out);
    graphs_->record(Sig() << kMatmul << x << w << bias << out, [=, this] { gemm_->run(x, w, bias, out, stream_); });
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override {
    check_norm(x, weight, out);
    bind();
    graphs_->record(Sig() << kRmsNorm << x << weight << eps << out, [=, this] {
      gpu::launch_rms_norm(nullptr, x.data, weight.data, weight.dtype, eps, out.data, x.dim(0), x.row_numel(), stream_);
    });
  }
  void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                    const Tensor& out) override {
    check_norm(residual, weight, out);
    BRIGADE_CHECK(x.dtype == DType::bf16 && x.numel() == residual.numel(), "add_rms_norm: x [n, d] bf16");
    bind();
    graphs_->record(Sig() << kAddRmsNorm << residual << x << weight << eps << out, [=, this] {
      gpu::launch_rms_norm(residual.data, x.data, weight.data, weight.dtype, eps, out.data, residual.dim(0),
                           residual.row_numel(), stream_);
    });
  }
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) override {
    check_norm(x, weight, out);
    BRIGADE_CHECK(bias.empty() || (bias.numel() == weight.numel() && (bias.dtype == DType::f32 || bias.dtype == DType::bf16)),
                  "layer_norm: bias [d] f32 or bf16, or none");
    bind();
    graphs_->record(Sig() << kLayerNorm << x << weight << bias << eps << out, [=, this] {
      gpu::launch_layer_norm(x.data, weight.data, weight.dtype, bias.empty() ? nullptr : bias.data, bias.dtype, eps,
                             out.data, x.dim(0), x.row_numel(), stream_);
    });
  }
  void add(const Tensor& a, const Tensor& b) override {
    BRIGADE_CHECK(a.numel() == b.numel() && a.dtype == DType::bf16 && b.dtype == DType::bf16, "add: a, b [n, d] bf16");
    bind();
    graphs_->record(Sig() << kAdd << a << b, [=, this] { gpu::launch_add(a.data, b.data, a.numel(), stream_); });
  }
  void add_row_bias(const Tensor& x, const Tensor& bias) override {
    const int64_t n = x.dim(0), d = x.row_numel();
    BRIGADE_CHECK(x.dtype == DType::bf16 && bias.dtype == DType::f32 && bias.numel() == d,
                  "add_row_bias: x [n, d] bf16, bias [d] f32");
    bind();
    graphs_->record(Sig() << kAddRowBias << x << bias, [=, this] {
      gpu::launch_add_bias(x.data, x.dtype, bias.data, bias.dtype, n, d, stream_);
    });
  }
  void silu_mul(const Tensor& gate_up, const Tensor& out) override {
    const int64_t n = gate_up.dim(0), inter = gate_up.row_numel() / 2;
    BRIGADE_CHECK(gate_up.row_numel() == 2 * inter && out.numel() == n * inter && out.dtype == DType::bf16 &&
                      gate_up.dtype == DType::bf16, "silu_mul: gate_up [n, 2I], out [n, I] bf16");
    bind();
    graphs_->record(Sig() << kSiluMul << gate_up << out,
                    [=, this] { gpu::launch_silu_mul(gate_up.data, out.data, n, inter, stream_); });
  }
  void gelu_tanh_mul(const Tensor& gate_up, const Tensor& out) override { gelu_mul_op(gate_up, out, /*exact=*/false); }
  void gelu_mul(const Tensor& gate_up, const Tensor& out) override { gelu_mul_op(gate_up, out, /*exact=*/true); }
  void gelu_mul_op(const Tensor& gate_up, const Tensor& out, bool exact) {
    const int64_t n = gate_up.dim(0), inter = gate_up.row_numel() / 2;
    BRIGADE_CHECK(gate_up.row_numel() == 2 * inter && out.numel() == n * inter && out.dtype == DType::bf16 &&
                      gate_up.dtype == DType::bf16, "gelu_tanh_mul / gelu_mul: gate_up [n, 2I], out [n, I] bf16");
    bind();
    graphs_->record(Sig() << kGeluTanhMul << gate_up << out << exact,
                    [=, this] { gpu::launch_gelu_mul(gate_up.data, out.data, n, inter, exact, stream_); });
  }
  void xielu(const Tensor& x, const XieluParams& p) override {
    BRIGADE_CHECK(x.dtype == DType::bf16, "xielu: x [n, d] bf16");
    bind();
    graphs_->record(Sig() << kXielu << x << p.alpha_p << p.alpha_n << p.beta << p.eps, [=, this] {
      gpu::launch_xielu(x.data, x.numel(), p.alpha_p, p.alpha_n, p.beta, p.eps, stream_);
    });
  }
  // The ungated GELU MLPs (StarCoder2, Phi, GPT-2, GPT-NeoX, ...); the vision towers' other ops
  // (quick_gelu, scatter_rows, sectioned RoPE) are not here, so supports_vision stays false.
  bool supports_gelu() const override { return true; }
  void gelu_tanh(const Tensor& x) override { gelu_op(x, /*exact=*/false); }
  void gelu(const Tensor& x) override { gelu_op(x, /*exact=*/true); }
  void gelu_op(const Tensor& x, bool exact) {
    BRIGADE_CHECK(x.dtype == DType::bf16, "gelu: x [n, d] bf16");
    bind();
    graphs_->record(Sig() << kGelu << x << exact, [=, this] { gpu::launch_gelu(x.data, x.numel(), exact, stream_); });
  }
  void scale(const Tensor& x, float s) override {
    BRIGADE_CHECK(x.dtype == DType::bf16, "scale: x [n, d] bf16");
    bind();
    graphs_->record(Sig() << kScale << x << s, [=, this] { gpu::launch_scale(x.data, s, x.numel(), stream_); });
  }
  void softcap(const Tensor& x, float cap) override {
    BRIGADE_CHECK(x.dtype == DType::f32 && cap > 0.0f, "softcap: x [n, m] f32, cap > 0");
    bind();
    graphs_->record(Sig() << kSoftcap << x << cap,
                    [=, this] { gpu::launch_softcap(x.as<float>(), cap, x.numel(), stream_); });
  }
  void clamp(const Tensor& x, float lo, float hi) override {
    BRIGADE_CHECK(x.dtype == DType::bf16 && !(lo > hi), "clamp: x [n, m] bf16, lo <= hi");
    bind();
    graphs_->record(Sig() << kClamp << x << lo << hi,
                    [=, this] { gpu::launch_clamp(x.data, lo, hi, x.numel(), stream_); });
  }
  void qk_head_norm(const Tensor& qkv, const QkvLayout& l, const Tensor& q_weight, const Tensor& k_weight,
                    float eps) override {
    const bool whole = q_weight.numel() == l.q_width() && k_weight.numel() == l.kv_width();
    BRIGADE_CHECK(qkv.row_numel() == l.row_width() &&
                      (whole || (q_weight.numel() == l.head_dim && k_weight.numel() == l.head_dim)) &&
                      q_weight.dtype == k_weight.dtype && (q_weight.dtype == DType::f32 || q_weight.dtype == DType::bf16),
                  "qk_head_norm: qkv [n, row_width], weights [head_dim] (or the whole q and k widths) f32 or bf16");
    bind();
    graphs_->record(Sig() << kQkNorm << qkv << l.n_heads << l.n_kv_heads << l.head_dim << q_weight << k_weight << eps,
                    [=, this] {
                      gpu::launch_qk_head_norm(qkv.data, qkv.dim(0), head_shape(l), q_weight.data, k_weight.data,
                                               q_weight.dtype, eps, whole, stream_);
                    });
  }
  void qk_head_layer_norm(const Tensor& qkv, const QkvLayout& l, const Tensor& q_weight, const Tensor& k_weight,
                          float eps) override {
    BRIGADE_CHECK(qkv.dtype == DType::bf16 && qkv.row_numel() == l.row_width() && q_weight.numel() == l.q_width() &&
                      k_weight.numel() == l.kv_width() && q_weight.dtype == k_weight.dtype &&
                      (q_weight.dtype == DType::f32 || q_weight.dtype == DType::bf16),
                  "qk_head_layer_norm: qkv [n, row_width] bf16, weights [n_heads * head_dim] and [n_kv_heads * head_dim] "
                  "f32 or bf16");
    bind();
    graphs_->record(Sig() << kQkLayerNorm << qkv << l.n_heads << l.n_kv_heads << l.head_dim << q_weight << k_weight << eps,
                    [=, this] {
                      gpu::launch_qk_head_layer_norm(qkv.data, qkv.dim(0), head_shape(l), q_weight.data, k_weight.data,
                                                     q_weight.dtype, eps, stream_);
                    });
  }
  void rope(const Tensor& qkv, const QkvLayout& l, const Tensor& positions, const RopeConfig& cfg) override {
    BRIGADE_CHECK(cfg.rotary_dim % 2 == 0 && cfg.rotary_dim <= l.head_dim &&
                      static_cast<int>(cfg.inv_freq.size()) == cfg.rotary_dim / 2,
                  "rope: even rotary_dim <= head_dim and inv_freq [rotary_dim / 2]");
    BRIGADE_CHECK(cfg.sections.empty(), "rope: sectioned (multimodal) rotation is CPU only (supports_vision)");
    BRIGADE_CHECK(qkv.row_numel() == l.row_width() && positions.numel() == qkv.dim(0),
                  "rope: qkv [n, row_width], positions [n]");
    bind();
    const float* table = rope_table(cfg.inv_freq);
    const int rotary_dim = cfg.rotary_dim;
    const bool neox = cfg.style == RopeStyle::neox;
    const float factor = cfg.attention_factor;
    graphs_->record(Sig() << kRope << qkv << l.n_heads << l.n_kv_heads << l.head_dim << positions << table << rotary_dim
                          << neox << factor,
                    [=, this] {
                      gpu::launch_rope(qkv.data, qkv.dim(0), head_shape(l), positions.as<const int32_t>(), table,
                                       rotary_dim, neox, factor, stream_);
                    });
  }
  void qk_sum_squares(const Tensor& qkv, const QkvLayout& l, const Tensor& sums) override {
    BRIGADE_CHECK(qkv.dtype == DType::bf16 && qkv.row_numel() == l.row_width() && sums.dtype == DType::f32 &&
                      sums.numel() == 2 * qkv.dim(0),
                  "qk_sum_squares: qkv [n, row_width] bf16, sums [n, 2] f32");
    bind();
    graphs_->record(Sig() << kQkSumSquares << qkv << l.n_heads << l.n_kv_heads << l.head_dim << sums, [=, this] {
      gpu::launch_qk_sum_squares(qkv.data, qkv.dim(0), head_shape(l), sums.as<float>(), stream_);
    });
  }
  void qk_norm_by_sums(const Tensor& qkv, const QkvLayout& l, const Tensor& sums, int64_t q_total, int64_t k_total,
                       const Tensor& q_weight, const Tensor& k_weight, float eps) override {
    BRIGADE_CHECK(qkv.dtype == DType::bf16 && qkv.row_numel() == l.row_width() && sums.dtype == DType::f32 &&
                      sums.numel() == 2 * qkv.dim(0) && q_weight.numel() == l.q_width() &&
                      k_weight.numel() == l.kv_width() && q_weight.dtype == k_weight.dtype &&
                      (q_weight.dtype == DType::f32 || q_weight.dtype == DType::bf16),
                  "qk_norm_by_sums: qkv [n, row_width] bf16, sums [n, 2] f32, weights [q_width] and [kv_width]");
    bind();
    graphs_->record(Sig() << kQkNormBySums << qkv << l.n_heads << l.n_kv_heads << l.head_dim << sums << q_total
                          << k_total << q_weight << k_weight << eps,
                    [=, this] {
                      gpu::launch_qk_norm_by_sums(qkv.data, qkv.dim(0), head_shape(l), sums.as<const float>(), q_total,
                                                  k_total, q_weight.data, k_weight.data, q_weight.dtype, eps, stream_);
                    });
  }
  void attention_temperature(const Tensor& qkv, const QkvLayout& l, const Tensor& positions, float floor_scale,
                             float scale, float offset) override {
    BRIGADE_CHECK(qkv.dtype == DType::bf16 && qkv.row_numel() == l.row_width() && positions.numel() == qkv.dim(0) &&
                      floor_scale > 0.0f,
                  "attention_temperature: qkv [n, row_width] bf16, positions [n], floor_scale > 0");
    bind();
    graphs_->record(Sig() << kAttnTemperature << qkv << l.n_heads << l.n_kv_heads << l.head_dim << positions
                          << floor_scale << scale << offset,
                    [=, this] {
                      gpu::launch_attention_temperature(qkv.data, qkv.dim(0), head_shape(l),
                                                        positions.as<const int32_t>(), floor_scale, scale, offset,
                                                        stream_);
                    });
  }
  void write_kv(const KvLayer& cache, const Tensor& qkv, const QkvLayout& l, const Tensor& slots) override {
    const int64_t page_size = cache.k.dim(1), n_pages = cache.k.dim(0);
    BRIGADE_CHECK(qkv.row_numel() == l.row_width() && slots.numel() == qkv.dim(0),
                  "write_kv: qkv [n, row_width], slots [n]");
    BRIGADE_CHECK(cache.k.row_numel() == page_size * l.kv_width(), "KV page holds page_size x kv_width");
    BRIGADE_CHECK(cache.k.dtype == cache.v.dtype && (cache.k.dtype == DType::bf16 || cache.k.dtype == DType::f32),
                  "the GPU KV cache is bf16 or f32");
    bind();
    graphs_->record(Sig() << kWriteKv << cache.k << cache.v << qkv << l.n_heads << l.n_kv_heads << l.head_dim << slots,
                    [=, this] {
                      gpu::launch_write_kv(cache.k.data, cache.v.data, cache.k.dtype, qkv.data, qkv.dim(0),
                                           head_shape(l), slots.as<const int32_t>(), n_pages * page_size, stream_);
                    });
  }
  void attention(const Tensor& qkv, const QkvLayout& l, const KvLayer& cache, const AttentionMeta& meta,
                 float scale, const Tensor& out) override;
  void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) override {
    const int64_t r = rows.numel();
    BRIGADE_CHECK(out.dtype == x.dtype && out.numel() == r * x.row_numel() && dtype_size(x.dtype) == 2,
                  "gather_rows: out [r, d], 2-byte elements");
    bind();
    graphs_->record(Sig() << kGather << x << rows << out, [=, this] {
      gpu::launch_gather_rows(x.data, x.row_numel() * 2, rows.as<const int32_t>(), r, x.dim(0), out.data, stream_);
    });
  }
  void scatter_add_rows(const Tensor& y, const Tensor& rows, const Tensor& src) override {
    constexpr int kScatterAddRows = 1000;  // outside enum Op: the LoRA op keeps to its own lines
    const int64_t r = rows.numel(), d = y.row_numel();
    BRIGADE_CHECK(y.dtype == DType::bf16 && src.dtype == DType::bf16 && src.numel() == r * d,
                  "scatter_add_rows: y [n, d] and src [r, d] bf16");
    bind();
    graphs_->record(Sig() << kScatterAddRows << y << rows << src, [=, this] {
      gpu::launch_scatter_add_rows(y.data, d, rows.as<const int32_t>(), r, y.dim(0), src.data, stream_);
    });
  }

  bool supports_moe() const override { return true; }
  bool supports_gelu_experts() const override { return true; }
  int max_attention_head_dim() const override { return gpu::kAttentionMaxHeadDim; }  // attention.cu's buckets
  bool supports_alibi() const override { return true; }  // attention.cu's scores (AttentionArgs::alibi)
  void moe_route(const Tensor& router_logits, const MoeRouting& r, const Tensor& ids, const Tensor& weights) override {
    const int64_t n = router_logits.dim(0), n_experts = router_logits.row_numel();
    const int k = r.k;
    BRIGADE_CHECK(router_logits.dtype == DType::f32 && ids.dtype == DType::i32 && weights.dtype == DType::f32,
                  "moe_route: router_logits f32, ids i32, weights f32");
    BRIGADE_CHECK(k >= 1 && k <= n_experts && n_experts <= 8192 && ids.numel() == n * k && weights.numel() == n * k,
                  "moe_route: 1 <= k <= E <= 8192, ids and weights [n, k]");
    BRIGADE_CHECK(r.bias.empty() || (r.bias.dtype == DType::f32 && r.bias.numel() == n_experts), "moe_route: bias [E] f32");
    BRIGADE_CHECK(r.expert_scale.empty() || (r.expert_scale.dtype == DType::f32 && r.expert_scale.numel() == n_experts &&
                                             r.scoring != MoeScoring::sparsemixer),
                  "moe_route: expert_scale [E] f32 (not with sparsemixer)");
    const bool grouped = r.group_score != MoeGroupScore::none && r.n_group > 1;
    BRIGADE_CHECK(!grouped || (r.n_group <= 64 && n_experts % r.n_group == 0 && r.topk_group >= 1 &&
                               r.topk_group <= r.n_group && k <= r.topk_group * (n_experts / r.n_group)),
                  "moe_route: n_group <= 64 dividing E, topk_group in [1, n_group], k <= the allowed experts");
    gpu::RouteArgs a;
    a.logits = router_logits.as<const float>();
    a.bias = r.bias.empty() ? nullptr : r.bias.as<const float>();
    a.expert_scale = r.expert_scale.empty() ? nullptr : r.expert_scale.as<const float>();
    a.n_experts = static_cast<int>(n_experts);
    a.k = k;
    a.sigmoid = r.scoring == MoeScoring::sigmoid;
    a.select_on_logits = r.select_on_logits;
    a.sparsemixer = r.scoring == MoeScoring::sparsemixer;
    a.jitter_eps = r.jitter_eps;
    BRIGADE_CHECK(!a.sparsemixer || (k == 2 && r.bias.empty() && !grouped),
                  "moe_route: sparsemixer routes top-2, without bias or groups");
    a.normalize = r.normalize;
    a.n_group = r.n_group;
    a.topk_group = r.topk_group;
    a.group_score = grouped ? static_cast<int>(r.group_score) : 0;
    a.scale = r.scale;
    a.first_expert = r.first_expert;
    a.ids = ids.as<int32_t>();
    a.weights = weights.as<float>();
    bind();
    graphs_->record(Sig() << kMoeRoute << router_logits << k << a.sigmoid << a.select_on_logits << a.sparsemixer << r.jitter_eps << r.normalize << r.n_group << r.topk_group
                          << a.group_score << r.scale << r.bias << r.expert_scale << ids << weights,
                    [=, this] { gpu::launch_moe_route(a, n, stream_); });
  }
  size_t moe_workspace_bytes(int64_t n, int k, int64_t d, int64_t inter) const override {
    return gpu::moe_workspace_bytes(n, k, d, inter);
  }
  void moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids, const Tensor& weights,
                   const MoeExpertMlp& mlp, const Tensor& workspace, const Tensor& out) override {
    const int64_t n = x.dim(0), d = x.row_numel(), inter = down.row_numel();
    const int64_t k = n > 0 ? ids.numel() / n : 0;
    BRIGADE_CHECK(x.dtype == DType::bf16 && out.dtype == DType::bf16 && out.numel() == n * d,
                  "moe_experts: x and out [n, d] bf16");
    BRIGADE_CHECK(gate_up.dtype == DType::bf16 && down.dtype == DType::bf16 && inter > 0 && gate_up.row_numel() == d &&
                      gate_up.dim(0) % (2 * inter) == 0, "moe_experts: gate_up [E * 2I, d], down [E * d, I] bf16");
    const int64_t n_experts = gate_up.dim(0) / (2 * inter);
    BRIGADE_CHECK(down.dim(0) == n_experts * d && ids.dtype == DType::i32 && weights.dtype == DType::f32 &&
                      weights.numel() == n * k && workspace.nbytes() >= gpu::moe_workspace_bytes(n, static_cast<int>(k), d, inter),
                  "moe_experts: down [E * d, I], ids and weights [n, k], workspace of moe_workspace_bytes");
    BRIGADE_CHECK((mlp.gate_up_bias.empty() ||
                   (mlp.gate_up_bias.dtype == DType::f32 && mlp.gate_up_bias.numel() == n_experts * 2 * inter)) &&
                      (mlp.down_bias.empty() ||
                       (mlp.down_bias.dtype == DType::f32 && mlp.down_bias.numel() == n_experts * d)),
                  "moe_experts: gate_up_bias [E * 2I] and down_bias [E * d] f32");
    BRIGADE_CHECK(!mlp.relu2, "moe_experts: relu2 experts run on the CPU backend (supports_relu2_experts)");
    BRIGADE_CHECK(!mlp.gelu_tanh || (mlp.gate_up_bias.empty() && mlp.swiglu_limit <= 0.0f),
                  "moe_experts: gelu_tanh experts have no gate_up biases or clamp");
    gpu::ExpertMlpArgs m;
    m.gate_up_bias = mlp.gate_up_bias.empty() ? nullptr : mlp.gate_up_bias.as<const float>();
    m.down_bias = mlp.down_bias.empty() ? nullptr : mlp.down_bias.as<const float>();
    m.swiglu_limit = mlp.swiglu_limit;
    m.swiglu_alpha = mlp.swiglu_alpha;
    m.weight_on_input = mlp.weight_on_input;
    m.gelu_tanh = mlp.gelu_tanh;
    m.weights = weights.as<const float>();
    bind();
    graphs_->record(Sig() << kMoeExperts << x << gate_up << down << ids << weights << mlp.gate_up_bias << mlp.down_bias
                          << m.swiglu_limit << m.swiglu_alpha << m.weight_on_input << m.gelu_tanh << workspace << out,
                    [=, this] {
                      gpu::launch_moe_experts(x.data, gate_up.data, down.data, ids.as<const int32_t>(),
                                              weights.as<const float>(), m, n, static_cast<int>(k), d, inter,
                                              static_cast<int>(n_experts), workspace.data, out.data, stream_);
                    });
  }
  void moe_identity_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, int n_experts,
                            const Tensor& out) override {
    constexpr int kMoeIdentityExperts = 1105;  // outside enum Op: kept to this op's lines
    const int64_t n = x.dim(0), d = x.row_numel();
    const int64_t k = n > 0 ? ids.numel() / n : 0;
    BRIGADE_CHECK(x.dtype == DType::bf16 && out.dtype == DType::bf16 && out.numel() == n * d,
                  "moe_identity_experts: x and out [n, d] bf16");
    BRIGADE_CHECK(ids.dtype == DType::i32 && weights.dtype == DType::f32 && ids.numel() == n * k &&
                      weights.numel() == n * k && n_experts >= 0,
                  "moe_identity_experts: ids and weights [n, k]");
    bind();
    graphs_->record(Sig() << kMoeIdentityExperts << x << ids << weights << n_experts << out, [=, this] {
      gpu::launch_moe_identity_experts(x.data, ids.as<const int32_t>(), weights.as<const float>(), n_experts, n,
                                       static_cast<int>(k), d, out.data, stream_);
    });
  }

  void begin_step(uint64_t key) override {
    bind();
    graphs_->begin(key);
  }
  void end_step() override {
    bind();
    graphs_->end();
  }
  CudaGraphStats graph_stats() const override {
    const gpu::GraphStats s = graphs_->stats();
    return {s.replays, s.captures, s.eager_steps};
  }

  void gather_tokens(const Tensor& table, const Tensor& index, const Tensor& tokens) override {
    BRIGADE_CHECK(table.dtype == DType::i32 && index.dtype == DType::i32 && tokens.dtype == DType::i32 &&
                      index.numel() == tokens.numel(), "gather_tokens: table [m], index [n], tokens [n] i32");
    bind();
    graphs_->record(Sig() << kGatherTokens << table << index << tokens, [=, this] {
      gpu::launch_gather_tokens(table.as<const int32_t>(), index.as<const int32_t>(), index.numel(),
                                tokens.as<int32_t>(), stream_);
    });
  }
  void scatter_tokens(const Tensor& tokens, const Tensor& index, const Tensor& table) override {
    BRIGADE_CHECK(table.dtype == DType::i32 && index.dtype == DType::i32 && tokens.dtype == DType::i32 &&
                      index.numel() == tokens.numel(), "scatter_tokens: tokens [n], index [n], table [m] i32");
    bind();
    graphs_->record(Sig() << kScatterTokens << tokens << index << table, [=, this] {
      gpu::launch_scatter_tokens(tokens.as<const int32_t>(), index.as<const int32_t>(), index.numel(),
                                 table.as<int32_t>(), stream_);
    });
  }
  bool prefers_device_steps() const override { return true; }

  bool supports_mla() const override { return true; }
  void head_matmul(const Tensor& x, const Tensor& w, int n_heads, const Tensor& out) override {
    const int64_t n = x.dim(0);
    BRIGADE_CHECK(n_heads > 0 && x.dtype == DType::bf16 && w.dtype == DType::bf16 && out.dtype == DType::bf16 &&
                      x.row_numel() % n_heads == 0 && w.dim(0) % n_heads == 0,
                  "head_matmul: x [n, H a], w [H b, a], out [n, H b], all bf16");
    const int64_t a = x.row_numel() / n_heads, b = w.dim(0) / n_heads;
    BRIGADE_CHECK(w.row_numel() == a && out.row_numel() == n_heads * b && out.dim(0) == n && n_heads * b <= 65535 * 8,
                  "head_matmul: w [H b, a] and out [n, H b], H b <= 524280");
    bind();
    graphs_->record(Sig() << kHeadMatmul << x << w << n_heads << out, [=, this] {
      gpu::launch_head_matmul(x.data, w.data, n, n_heads, a, b, out.data, stream_);
    });
  }
  void write_mla_kv(const KvLayer& cache, const Tensor& latent, const Tensor& k_pe, const Tensor& slots) override {
    const int64_t n = latent.dim(0), r = latent.row_numel(), dr = k_pe.row_numel();
    BRIGADE_CHECK(cache.v.empty() && cache.k.ndim == 4 && cache.k.dim(2) == 1 && cache.k.dim(3) == r + dr &&
                      (cache.k.dtype == DType::bf16 || cache.k.dtype == DType::f32),
                  "write_mla_kv: a bf16 or f32 latent cache [n_pages, page_size, 1, R + rope_dim] without V");
    BRIGADE_CHECK(latent.dtype == DType::bf16 && k_pe.dtype == DType::bf16 && k_pe.dim(0) == n && slots.numel() == n,
                  "write_mla_kv: latent [n, R], k_pe [n, rope_dim] bf16, slots [n]");
    const int64_t n_slots = cache.k.dim(0) * cache.k.dim(1);
    bind();
    graphs_->record(Sig() << kWriteMlaKv << cache.k << latent << k_pe << slots, [=, this] {
      gpu::launch_write_mla_kv(cache.k.data, cache.k.dtype, latent.data, k_pe.data, n, static_cast<int>(r),
                               static_cast<int>(dr), slots.as<const int32_t>(), n_slots, stream_);
    });
  }
  void mla_attention(const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l, const KvLayer& cache,
                     const AttentionMeta& meta, float scale, const Tensor& out) override {
    mla_attention_over(q_lat, q_pe, l, cache, meta, scale, out, Tensor());
  }
  // mla_attention over each row's whole context (indices empty) or over the positions it lists.
  void mla_attention_over(const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l, const KvLayer& cache,
                          const AttentionMeta& meta, float scale, const Tensor& out, const Tensor& indices);

  // ---- DeepSeek Sparse Attention (gpu/dsa.cu) ----
  bool supports_dsa() const override { return true; }
  void write_kv_columns(const KvLayer& cache, const Tensor& x, int col, const Tensor& slots) override {
    const int64_t n = x.dim(0), d = x.row_numel();
    BRIGADE_CHECK(cache.v.empty() && cache.k.ndim == 4 && cache.k.dim(2) == 1 && col >= 0 && cache.k.dim(3) >= col + d &&
                      (cache.k.dtype == DType::bf16 || cache.k.dtype == DType::f32),
                  "write_kv_columns: a bf16 or f32 latent cache [n_pages, page_size, 1, >= col + d]");
    BRIGADE_CHECK(x.dtype == DType::bf16 && slots.numel() == n, "write_kv_columns: x [n, d] bf16, slots [n]");
    const int64_t n_slots = cache.k.dim(0) * cache.k.dim(1), width = cache.k.dim(3);
    bind();
    graphs_->record(Sig() << kWriteKvColumns << cache.k << x << col << slots, [=, this] {
      gpu::launch_write_kv_columns(cache.k.data, cache.k.dtype, width, x.data, n, static_cast<int>(d), col,
                                   slots.as<const int32_t>(), n_slots, stream_);
    });
  }
  void dsa_topk(const Tensor& q, const Tensor& weights, const KvLayer& cache, const DsaLayout& l, const AttentionMeta& meta,
                const Tensor& workspace, const Tensor& out) override;
  void mla_sparse_attention(const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l, const KvLayer& cache,
                            const AttentionMeta& meta, const Tensor& indices, float scale, const Tensor& out) override {
    BRIGADE_CHECK(indices.dtype == DType::i32 && indices.dim(0) == q_lat.dim(0) && indices.row_numel() > 0,
                  "mla_sparse_attention: indices [n, k] i32");
    mla_attention_over(q_lat, q_pe, l, cache, meta, scale, out, indices);
  }

  // ---- state-space layers (gpu/ssm.cu) ----
  bool supports_ssm() const override { return true; }
  void ssm_conv(const Tensor& in, int64_t col, const Tensor& weight, const Tensor& bias, const SsmSeqs& seqs,
                const Tensor& conv_state, const Tensor& out) override {
    const int64_t n = in.dim(0), width = in.row_numel(), ch = out.row_numel();
    BRIGADE_CHECK(in.dtype == DType::bf16 && out.dtype == DType::bf16 && out.numel() == n * ch && col >= 0 &&
                      col + ch <= width,
                  "ssm_conv: in [n, >= col + C] and out [n, C] bf16");
    run_conv(in, width, col, ch, weight, bias, false, seqs, conv_state, out);
  }
  void short_conv(const Tensor& in, const Tensor& weight, const Tensor& bias, const SsmSeqs& seqs,
                  const Tensor& conv_state, const Tensor& out) override {
    const int64_t n = in.dim(0), ch = out.row_numel();
    BRIGADE_CHECK(in.dtype == DType::bf16 && out.dtype == DType::bf16 && out.numel() == n * ch &&
                      in.numel() == n * 3 * ch,
                  "short_conv: in [n, 3 C] (B | C | x) and out [n, C] bf16");
    run_conv(in, 3 * ch, 0, ch, weight, bias, true, seqs, conv_state, out);
  }
  void ssm_scan(const Tensor& proj, const Tensor& xbc, const SsmLayout& l, const SsmParams& p, const SsmSeqs& seqs,
                const Tensor& state, const Tensor& out) override;
  void ssm_scan_diag(const Tensor& x, const Tensor& dt_in, const Tensor& b, const Tensor& c, const Tensor& z,
                     int64_t z_col, const Tensor& a, const Tensor& skip, const SsmSeqs& seqs, const Tensor& state,
                     const Tensor& out) override;
  void gated_delta(const Tensor& qkv, const Tensor& proj, int64_t z_col, const SsmLayout& l, const SsmParams& p,
                   const SsmSeqs& seqs, const Tensor& state, const Tensor& out) override;
  void kda(const Tensor& qkv, const Tensor& f, const Tensor& beta, const SsmLayout& l, const SsmParams& p,
           const SsmSeqs& seqs, const Tensor& state, const Tensor& out) override;
  void lightning_attention(const Tensor& qkv, const Tensor& decay, const SsmLayout& l, const SsmSeqs& seqs,
                           const Tensor& state, const Tensor& out) override;
  void sigmoid_mul(const Tensor& x, const Tensor& gate) override {
    BRIGADE_CHECK(x.dtype == DType::bf16 && gate.dtype == DType::bf16 && x.numel() == gate.numel(),
                  "sigmoid_mul: x and gate of one shape, bf16");
    bind();
    graphs_->record(Sig() << kSigmoidMul << x << gate,
                    [=, this] { gpu::launch_sigmoid_mul(x.data, gate.data, x.numel(), stream_); });
  }
  void relu_squared(const Tensor& x) override {
    BRIGADE_CHECK(x.dtype == DType::bf16, "relu_squared: x bf16");
    bind();
    graphs_->record(Sig() << kReluSquared << x, [=, this] { gpu::launch_relu_squared(x.data, x.numel(), stream_); });
  }
  void relu2_mul(const Tensor& gate_up, const Tensor& out) override {
    const int64_t n = gate_up.dim(0), inter = gate_up.row_numel() / 2;
    BRIGADE_CHECK(gate_up.row_numel() == 2 * inter && out.numel() == n * inter && out.dtype == DType::bf16 &&
                      gate_up.dtype == DType::bf16, "relu2_mul: gate_up [n, 2I], out [n, I] bf16");
    bind();
    graphs_->record(Sig() << kRelu2Mul << gate_up << out,
                    [=, this] { gpu::launch_relu2_mul(gate_up.data, out.data, n, inter, stream_); });
  }
  void quantize_rows_int8(const Tensor& x) override {
    BRIGADE_CHECK(x.dtype == DType::bf16, "quantize_rows_int8: x [n, d] bf16");
    const int64_t n = x.dim(0), d = x.row_numel();
    bind();
    graphs_->record(Sig() << kQuantizeRowsInt8 << x,
                    [=, this] { gpu::launch_quantize_rows_int8(x.data, n, d, stream_); });
  }

  // ---- Gemma 3n (gpu/gemma3n.cu) ----
  bool supports_altup() const override { return true; }
  void altup_predict(const Tensor& streams, const Tensor& router, const Tensor& coefs, const Tensor& out) override {
    const int64_t ns = streams.dim(0), n = streams.dim(1), d = streams.dim(2);
    BRIGADE_CHECK(streams.ndim == 3 && streams.dtype == DType::bf16 && out.dtype == DType::bf16 &&
                      router.dtype == DType::bf16 && coefs.dtype == DType::f32 && out.numel() == streams.numel() &&
                      ns <= 8 && router.numel() == n * ns && coefs.numel() == ns * ns * ns,
                  "altup_predict: streams [N <= 8, n, d] and out bf16, router [n, N] bf16, coefs [N * N, N] f32");
    bind();
    graphs_->record(Sig() << kAltupPredict << streams << router << coefs << out, [=, this] {
      gpu::launch_altup_predict(streams.data, router.data, coefs.as<const float>(), out.data, static_cast<int>(ns), n, d,
                                stream_);
    });
  }
  void altup_correct(const Tensor& pred, const Tensor& activated, const Tensor& router, const Tensor& coefs,
                     int active) override {
    const int64_t ns = pred.dim(0), n = pred.dim(1), d = pred.dim(2);
    BRIGADE_CHECK(pred.ndim == 3 && pred.dtype == DType::bf16 && activated.dtype == DType::bf16 &&
                      router.dtype == DType::bf16 && coefs.dtype == DType::f32 && activated.numel() == n * d &&
                      ns <= 8 && router.numel() == n * ns && coefs.numel() == ns * ns && active >= 0 && active < ns,
                  "altup_correct: pred [N <= 8, n, d], activated [n, d], router [n, N] bf16, coefs [N, N] f32");
    bind();
    graphs_->record(Sig() << kAltupCorrect << pred << activated << router << coefs << active, [=, this] {
      gpu::launch_altup_correct(pred.data, activated.data, router.data, coefs.as<const float>(), active,
                                static_cast<int>(ns), n, d, stream_);
    });
  }
  void match_rms(const Tensor& x, const Tensor& ref, float eps) override {
    BRIGADE_CHECK(x.ndim == 2 && x.dtype == DType::bf16 && ref.dtype == DType::bf16 && x.numel() == ref.numel(),
                  "match_rms: x and ref [n, d] bf16");
    bind();
    graphs_->record(Sig() << kMatchRms << x << ref << eps,
                    [=, this] { gpu::launch_match_rms(x.data, ref.data, x.dim(0), x.dim(1), eps, stream_); });
  }
  void gaussian_topk(const Tensor& x, int64_t cols, float k) override {
    BRIGADE_CHECK(x.ndim == 2 && x.dtype == DType::bf16 && cols > 0 && cols <= x.dim(1),
                  "gaussian_topk: x [n, >= cols] bf16");
    bind();
    graphs_->record(Sig() << kGaussianTopk << x << cols << k,
                    [=, this] { gpu::launch_gaussian_topk(x.data, x.dim(0), x.dim(1), cols, k, stream_); });
  }
  void v_head_norm(const Tensor& qkv, const QkvLayout& l, float eps) override {
    BRIGADE_CHECK(qkv.dtype == DType::bf16 && qkv.row_numel() == l.row_width(), "v_head_norm: qkv [n, row_width] bf16");
    bind();
    graphs_->record(Sig() << kVHeadNorm << qkv << l.n_heads << l.n_kv_heads << l.head_dim << eps, [=, this] {
      gpu::launch_v_head_norm(qkv.data, qkv.dim(0), l.n_heads, l.n_kv_heads, l.head_dim, eps, stream_);
    });
  }
  void gelu_tanh_gate(const Tensor& x, const Tensor& y) override {
    BRIGADE_CHECK(x.dtype == DType::bf16 && y.dtype == DType::bf16 && x.numel() == y.numel(),
                  "gelu_tanh_gate: x and y of one shape, bf16");
    bind();
    graphs_->record(Sig() << kGeluTanhGate << x << y,
                    [=, this] { gpu::launch_gelu_tanh_gate(x.data, y.data, x.numel(), stream_); });
  }

  void argmax(const Tensor& logits, const Tensor& tokens) override {
    BRIGADE_CHECK(logits.dtype == DType::f32 && logits.ndim == 2 && tokens.numel() == logits.dim(0),
                  "argmax: logits [n, vocab] f32, tokens [n]");
    bind();
    graphs_->record(Sig() << kArgmax << logits << tokens, [=, this] {
      gpu::launch_argmax(logits.as<const float>(), logits.dim(0), logits.dim(1), tokens.as<int32_t>(), stream_);
    });
  }
  void sample(const Tensor& logits, const Tensor& params, const Tensor& tokens) override {
    BRIGADE_CHECK(logits.dtype == DType::f32 && logits.ndim == 2 && tokens.numel() == logits.dim(0) &&
                      params.nbytes() >= static_cast<size_t>(logits.dim(0)) * sizeof(SampleParams),
                  "sample: logits [n, vocab] f32, params [n] SampleParams, tokens [n]");
    bind();
    graphs_->record(Sig() << kSample << logits << params << tokens, [=, this] {
      gpu::launch_sample(logits.as<const float>(), params.data, logits.dim(0), logits.dim(1), tokens.as<int32_t>(),
                         stream_);
    });
  }

 private:
  void bind() const { BRIGADE_CUDA_CHECK(cudaSetDevice(options_.device)); }
  static void check_norm(const Tensor& x, const Tensor& weight, const Tensor& out) {
    BRIGADE_CHECK(x.dtype == DType::bf16 && out.dtype == DType::bf16 && out.numel() == x.numel() &&
                      weight.numel() == x.row_numel() && (weight.dtype == DType::f32 || weight.dtype == DType::bf16),
                  "rms_norm: x, out [n, d] bf16; weight [d] f32 or bf16");
  }
  // A device copy of a RoPE frequency table, uploaded the first time it is seen (a model has one
  // or two), so rope() queues no host copy per step.
  const float* rope_table(const std::vector<float>& inv_freq);
  void ensure_partial(int64_t floats);
  // The device sequence table of a state-space op (checked for shape; its values are read on
  // the device) for rows of the step and a state tensor of n_slots slots.
  static gpu::SsmSeqArgs ssm_seqs(const SsmSeqs& seqs, int64_t n_rows, int64_t n_slots);
  static Sig& sign(Sig& sig, const SsmSeqs& seqs) {
    return sig << seqs.q_start << seqs.slots << seqs.fresh << seqs.n_seqs << seqs.save_rows << seqs.save_slots;
  }
  void run_conv(const Tensor& in, int64_t width, int64_t col, int64_t ch, const Tensor& weight, const Tensor& bias,
                bool short_conv, const SsmSeqs& seqs, const Tensor& conv_state, const Tensor& out);
  Expected<OwnedTensor> prepare_fp8_weight(const Tensor& host);
  void matmul_fp8(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out);

  CudaBackendOptions options_;
  int sm_count_;
  int compute_capability_;  // major * 10 + minor
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  Buffer workspace_;
  std::unique_ptr<gpu::Gemm> gemm_;
  std::unique_ptr<gpu::StepGraphs> graphs_;
  std::vector<std::pair<std::vector<float>, Buffer>> rope_tables_;
  Buffer partial_;
  std::unordered_map<uint64_t, cudaEvent_t> tickets_;  // download_async copies not yet retired
  std::vector<cudaEvent_t> free_events_;
  uint64_t next_ticket_ = 1;
  // fp8 activations of the matmul in flight: the scale (f32) and absmax (u32) words, then the
  // E4M3 codes from byte kFp8ActCodes (grown like partial_, see matmul_fp8).
  Buffer fp8_act_;
};

constexpr size_t kFp8ActCodes = 256;

const float* CudaBackendImpl::rope_table(const std::vector<float>& inv_freq) {
  for (const auto& [freq, buf] : rope_tables_)
    if (freq == inv_freq) return static_cast<const float*>(buf.data());
  auto buf = allocate(inv_freq.size() * sizeof(float));
  BRIGADE_CHECK(buf.has_value(), "GPU memory for a RoPE table (a few hundred bytes)");
  // On the stream, so the kernels queued after it see the table (pageable: staged before return).
  BRIGADE_CUDA_CHECK(cudaMemcpyAsync(buf->data(), inv_freq.data(), inv_freq.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, stream_));
  rope_tables_.emplace_back(inv_freq, std::move(*buf));
  return static_cast<const float*>(rope_tables_.back().second.data());
}

void CudaBackendImpl::ensure_partial(int64_t floats) {
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  if (partial_.bytes() >= bytes) return;
  graphs_->drop_all(std::move(partial_));  // graphs use the old one; ops of this step may too
  partial_ = Buffer();
  auto buf = allocate(std::max<size_t>(bytes, size_t{4} << 20));
  BRIGADE_CHECK(buf.has_value(), "GPU memory for the attention split workspace");
  partial_ = std::move(*buf);
}

// The codes and, after them (core/backend.h fp8_scale_offset), the f32 scale and a u32 of absmax
// scratch, all in one allocation so the Tensor alone leads matmul to the scale.
Expected<OwnedTensor> CudaBackendImpl::prepare_fp8_weight(const Tensor& host) {
  if (!supports_weight_dtype(DType::f8e4m3))
    return unsupported("fp8 weights need a CUDA GPU with compute capability >= 8.9; " + device_name_ + " is " +
                       std::to_string(compute_capability_ / 10) + "." + std::to_string(compute_capability_ % 10));
  if (!is_float(host.dtype) || host.ndim != 2)
    return unsupported(std::string("fp8 weights are quantized from float matrices, not a ") + dtype_name(host.dtype) +
                       " tensor of shape " + host.shape_string());
  if (host.dim(1) % 16 != 0)
    return unsupported("fp8 weights need the input dimension to be a multiple of 16 (cuBLASLt's fp8 layout); got " +
                       host.shape_string());
  Tensor dst = host;
  dst.dtype = DType::f8e4m3;
  const size_t scale_at = fp8_scale_offset(dst);
  auto buf = allocate(scale_at + 2 * sizeof(float));
  if (!buf) return buf.status();
  dst.data = buf->data();
  auto staged = allocate(host.nbytes());
  if (!staged) return staged.status();
  Tensor src = host;
  src.data = staged->data();
  upload(src, host.data);
  auto* scale = reinterpret_cast<float*>(static_cast<uint8_t*>(dst.data) + scale_at);
  gpu::launch_quantize_e4m3(src.data, src.dtype, src.numel(), scale, reinterpret_cast<unsigned*>(scale + 1),
                            static_cast<uint8_t*>(dst.data), stream_);
  synchronize();  // the staging buffer and the host memory are free to go
  return OwnedTensor{std::move(*buf), dst};
}

// x (bf16) is quantized with its own dynamic per-tensor scale into fp8_act_, then the fp8 GEMM
// reads both scales on the device. The scratch grows at record time, outside the closures, so a
// captured graph never refers to a freed buffer (drop_all forgets graphs that used the old one).
void CudaBackendImpl::matmul_fp8(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  BRIGADE_CHECK(x.dtype == DType::bf16, "fp8 matmul: x is bf16 (quantized per call)");
  BRIGADE_CHECK(w.ndim == 2 && x.row_numel() == w.dim(1), "x [n, k] and w [m, k] agree on k");
  const size_t codes = static_cast<size_t>(x.numel());
  if (codes == 0) return;
  if (fp8_act_.bytes() < kFp8ActCodes + codes) {
    graphs_->drop_all(std::move(fp8_act_));
    fp8_act_ = Buffer();
    auto buf = allocate(std::max<size_t>(kFp8ActCodes + codes, size_t{4} << 20));
    BRIGADE_CHECK(buf.has_value(), "GPU memory for the fp8 activations of a matmul");
    fp8_act_ = std::move(*buf);
  }
  auto* x_scale = static_cast<float*>(fp8_act_.data());
  Tensor x8 = x;
  x8.dtype = DType::f8e4m3;
  x8.data = static_cast<uint8_t*>(fp8_act_.data()) + kFp8ActCodes;
  const float* w_scale = reinterpret_cast<const float*>(static_cast<const uint8_t*>(w.data) + fp8_scale_offset(w));
  graphs_->record(Sig() << kMatmul << x << w << bias << out << x8, [=, this] {
    gpu::launch_quantize_e4m3(x.data, x.dtype, x.numel(), x_scale, reinterpret_cast<unsigned*>(x_scale + 1),
                              static_cast<uint8_t*>(x8.data), stream_);
    gemm_->run_fp8(x8, x_scale, w, w_scale, bias, out, stream_);
  });
}

gpu::SsmSeqArgs CudaBackendImpl::ssm_seqs(const SsmSeqs& seqs, int64_t n_rows, int64_t n_slots) {
  const auto i32 = [](const Tensor& t, int64_t n) { return t.dtype == DType::i32 && t.numel() == n; };
  BRIGADE_CHECK(seqs.n_seqs >= 0 && i32(seqs.q_start, seqs.n_seqs + 1) && i32(seqs.slots, seqs.n_seqs) &&
                    i32(seqs.fresh, seqs.n_seqs),
                "ssm: q_start [n_seqs + 1], slots and fresh [n_seqs] i32");
  BRIGADE_CHECK(seqs.save_rows.empty() == seqs.save_slots.empty() &&
                    (seqs.save_rows.empty() || (i32(seqs.save_rows, seqs.n_seqs) && i32(seqs.save_slots, seqs.n_seqs))),
                "ssm: save_rows and save_slots [n_seqs] i32, or neither");
  gpu::SsmSeqArgs a;
  a.q_start = seqs.q_start.as<const int32_t>();
  a.slots = seqs.slots.as<const int32_t>();
  a.fresh = seqs.fresh.as<const int32_t>();
  a.save_rows = seqs.save_rows.empty() ? nullptr : seqs.save_rows.as<const int32_t>();
  a.save_slots = seqs.save_slots.empty() ? nullptr : seqs.save_slots.as<const int32_t>();
  a.n_seqs = seqs.n_seqs;
  a.n_rows = n_rows;
  a.n_slots = n_slots;
  return a;
}

// A per-head state [slots, H, P, N] f32 whose head (with the kernel's other shared arrays, `smem`
// bytes) fits one block's shared memory.
void check_head_state(const char* op, const Tensor& state, const SsmLayout& l, size_t smem) {
  BRIGADE_CHECK(state.dtype == DType::f32 && state.ndim >= 1 && state.row_numel() == l.d_inner() * l.state_size,
                (std::string(op) + ": state [slots, H, P, N] f32").c_str());
  BRIGADE_CHECK(smem <= gpu::kSsmMaxSmemBytes,
                (std::string(op) + ": a head's state (" + std::to_string(l.head_dim) + " x " +
                 std::to_string(l.state_size) + " f32) must fit the kernel's shared memory (" +
                 std::to_string(gpu::kSsmMaxSmemBytes) + " bytes)").c_str());
}

void fill_heads(gpu::SsmHeadArgs& a, const SsmLayout& l, const SsmParams& p, const Tensor& state, const Tensor& out) {
  a.heads = l.n_heads;
  a.head_dim = l.head_dim;
  a.groups = l.n_groups;
  a.state_size = l.state_size;
  a.a = p.a.as<const float>();
  a.dt_bias = p.dt_bias.as<const float>();
  a.norm_weight = p.norm_weight.empty() ? nullptr : p.norm_weight.as<const float>();
  a.norm_eps = p.norm_eps;
  a.state = state.as<float>();
  a.out = out.data;
}

void CudaBackendImpl::run_conv(const Tensor& in, int64_t width, int64_t col, int64_t ch, const Tensor& weight,
                               const Tensor& bias, bool short_conv, const SsmSeqs& seqs, const Tensor& conv_state,
                               const Tensor& out) {
  const int64_t k = ch > 0 ? weight.numel() / ch : 0, keep = k - 1;
  BRIGADE_CHECK(weight.dtype == DType::f32 && k >= 1 && weight.numel() == ch * k,
                "ssm_conv / short_conv: weight [C, kernel] f32");
  BRIGADE_CHECK(k <= gpu::kMaxConvKernel, ("ssm_conv / short_conv: the CUDA kernel takes at most " +
                                               std::to_string(gpu::kMaxConvKernel) + " taps, not " + std::to_string(k)).c_str());
  BRIGADE_CHECK(bias.empty() || (bias.dtype == DType::f32 && bias.numel() == ch), "ssm_conv / short_conv: bias [C] f32");
  BRIGADE_CHECK(conv_state.dtype == DType::f32 && conv_state.ndim >= 1 && conv_state.row_numel() == keep * ch,
                "ssm_conv / short_conv: conv_state [slots, kernel - 1, C] f32");
  const gpu::SsmSeqArgs sa = ssm_seqs(seqs, in.dim(0), conv_state.dim(0));
  bind();
  Sig sig;
  sign(sig << kSsmConv << in << col << ch << weight << bias << short_conv << conv_state << out, seqs);
  graphs_->record(sig, [=, this] {
    gpu::launch_ssm_conv(in.data, width, col, ch, static_cast<int>(k), weight.as<const float>(),
                         bias.empty() ? nullptr : bias.as<const float>(), short_conv, sa, conv_state.as<float>(),
                         out.data, stream_);
  });
}

void CudaBackendImpl::ssm_scan(const Tensor& proj, const Tensor& xbc, const SsmLayout& l, const SsmParams& p,
                               const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
  const int64_t n = proj.dim(0), d_inner = l.d_inner(), heads = l.n_heads;
  BRIGADE_CHECK(proj.dtype == DType::bf16 && xbc.dtype == DType::bf16 && out.dtype == DType::bf16 &&
                    proj.numel() == n * l.proj_width() && xbc.numel() == n * l.conv_dim() && out.numel() == n * d_inner,
                "ssm_scan: proj [n, proj_width], xbc [n, conv_dim] and out [n, d_inner] bf16");
  BRIGADE_CHECK(l.n_groups >= 1 && heads % l.n_groups == 0, "ssm_scan: heads a multiple of groups");
  BRIGADE_CHECK(p.a.numel() == heads && p.d.numel() == heads && p.dt_bias.numel() == heads && p.a.dtype == DType::f32 &&
                    p.d.dtype == DType::f32 && p.dt_bias.dtype == DType::f32,
                "ssm_scan: A, D and dt_bias [heads] f32");
  BRIGADE_CHECK(p.norm_weight.empty() || (p.norm_weight.dtype == DType::f32 && p.norm_weight.numel() == d_inner),
                "ssm_scan: norm weight [d_inner] f32");
  check_head_state("ssm_scan", state, l, gpu::ssm_scan_smem_bytes(l.head_dim, l.state_size));
  gpu::SsmScanArgs a;
  fill_heads(a, l, p, state, out);
  a.proj = proj.data;
  a.proj_width = l.proj_width();
  a.xbc = xbc.data;
  a.conv_dim = l.conv_dim();
  a.d = p.d.as<const float>();
  a.dt_min = p.dt_min;
  a.dt_max = p.dt_max > 0.0f ? p.dt_max : INFINITY;
  const gpu::SsmSeqArgs sa = ssm_seqs(seqs, n, state.dim(0));
  bind();
  Sig sig;
  sign(sig << kSsmScan << proj << xbc << l.n_heads << l.head_dim << l.n_groups << l.state_size << p.a << p.d
           << p.dt_bias << p.dt_min << a.dt_max << p.norm_weight << p.norm_eps << state << out,
       seqs);
  graphs_->record(sig, [=, this] { gpu::launch_ssm_scan(a, sa, stream_); });
}

void CudaBackendImpl::ssm_scan_diag(const Tensor& x, const Tensor& dt_in, const Tensor& b, const Tensor& c,
                                    const Tensor& z, int64_t z_col, const Tensor& a, const Tensor& skip,
                                    const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
  const int64_t n = x.dim(0), dim = x.row_numel(), ns = b.row_numel(), zw = z.row_numel();
  for (const Tensor* t : {&x, &dt_in, &b, &c, &z, &out})
    BRIGADE_CHECK(t->dtype == DType::bf16, "ssm_scan_diag: activations bf16");
  BRIGADE_CHECK(dt_in.numel() == n * dim && out.numel() == n * dim && b.numel() == n * ns && c.numel() == n * ns &&
                    z.dim(0) == n && z_col >= 0 && z_col + dim <= zw,
                "ssm_scan_diag: x, dt_in, out [n, D], b and c [n, N], z [n, >= z_col + D]");
  BRIGADE_CHECK(a.dtype == DType::f32 && a.numel() == dim * ns && skip.dtype == DType::f32 && skip.numel() == dim,
                "ssm_scan_diag: a [D, N] and skip [D] f32");
  BRIGADE_CHECK(state.dtype == DType::f32 && state.ndim >= 1 && state.row_numel() == dim * ns,
                "ssm_scan_diag: state [slots, D, N] f32");
  BRIGADE_CHECK(gpu::ssm_scan_diag_smem_bytes(static_cast<int>(ns)) <= gpu::kSsmMaxSmemBytes,
                ("ssm_scan_diag: state_size " + std::to_string(ns) + " is too large for the kernel's shared memory").c_str());
  gpu::SsmScanDiagArgs p;
  p.x = x.data;
  p.dt = dt_in.data;
  p.b = b.data;
  p.c = c.data;
  p.z = z.data;
  p.z_width = zw;
  p.z_col = z_col;
  p.dim = dim;
  p.state_size = static_cast<int>(ns);
  p.a = a.as<const float>();
  p.skip = skip.as<const float>();
  p.state = state.as<float>();
  p.out = out.data;
  const gpu::SsmSeqArgs sa = ssm_seqs(seqs, n, state.dim(0));
  bind();
  Sig sig;
  sign(sig << kSsmScanDiag << x << dt_in << b << c << z << z_col << a << skip << state << out, seqs);
  graphs_->record(sig, [=, this] { gpu::launch_ssm_scan_diag(p, sa, stream_); });
}

void CudaBackendImpl::gated_delta(const Tensor& qkv, const Tensor& proj, int64_t z_col, const SsmLayout& l,
                                  const SsmParams& p, const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
  const int64_t n = qkv.dim(0), ch = l.conv_dim(), heads = l.n_heads, vd = l.d_inner(), width = proj.row_numel();
  BRIGADE_CHECK(qkv.dtype == DType::bf16 && proj.dtype == DType::bf16 && out.dtype == DType::bf16 &&
                    qkv.numel() == n * ch && proj.dim(0) == n && z_col >= 0 && z_col + vd + 2 * heads <= width &&
                    out.numel() == n * vd,
                "gated_delta: qkv [n, conv_dim], proj [n, >= z_col + H P + 2 H] and out [n, H P] bf16");
  BRIGADE_CHECK(l.n_groups >= 1 && heads % l.n_groups == 0, "gated_delta: value heads a multiple of key heads");
  BRIGADE_CHECK(p.a.dtype == DType::f32 && p.a.numel() == heads && p.dt_bias.dtype == DType::f32 &&
                    p.dt_bias.numel() == heads && p.norm_weight.dtype == DType::f32 && p.norm_weight.numel() == l.head_dim,
                "gated_delta: a and dt_bias [H], norm weight [P] f32");
  check_head_state("gated_delta", state, l, gpu::gated_delta_smem_bytes(l.head_dim, l.state_size));
  gpu::GatedDeltaArgs a;
  fill_heads(a, l, p, state, out);
  a.qkv = qkv.data;
  a.conv_dim = ch;
  a.proj = proj.data;
  a.proj_width = width;
  a.z_col = z_col;
  a.tiled_heads = l.tiled_heads;
  const gpu::SsmSeqArgs sa = ssm_seqs(seqs, n, state.dim(0));
  bind();
  Sig sig;
  sign(sig << kGatedDelta << qkv << proj << z_col << l.n_heads << l.head_dim << l.n_groups << l.state_size
           << l.tiled_heads << p.a << p.dt_bias << p.norm_weight << p.norm_eps << state << out,
       seqs);
  graphs_->record(sig, [=, this] { gpu::launch_gated_delta(a, sa, stream_); });
}

void CudaBackendImpl::kda(const Tensor& qkv, const Tensor& f, const Tensor& beta, const SsmLayout& l, const SsmParams& p,
                          const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
  const int64_t n = qkv.dim(0), heads = l.n_heads, kd = heads * l.state_size, vd = l.d_inner();
  BRIGADE_CHECK(l.n_groups == l.n_heads, "kda: one key head per value head (n_groups = n_heads)");
  BRIGADE_CHECK(qkv.dtype == DType::bf16 && f.dtype == DType::bf16 && beta.dtype == DType::bf16 &&
                    out.dtype == DType::bf16 && qkv.numel() == n * (2 * kd + vd) && f.numel() == n * kd &&
                    beta.numel() == n * heads && out.numel() == n * vd,
                "kda: qkv [n, 2 H N + H P], f [n, H N], beta [n, H] and out [n, H P] bf16");
  BRIGADE_CHECK(p.a.dtype == DType::f32 && p.a.numel() == heads && p.dt_bias.dtype == DType::f32 && p.dt_bias.numel() == kd,
                "kda: a [H] and dt_bias [H N] f32");
  check_head_state("kda", state, l, gpu::kda_smem_bytes(l.head_dim, l.state_size));
  gpu::KdaArgs a;
  fill_heads(a, l, p, state, out);
  a.qkv = qkv.data;
  a.f = f.data;
  a.beta = beta.data;
  const gpu::SsmSeqArgs sa = ssm_seqs(seqs, n, state.dim(0));
  bind();
  Sig sig;
  sign(sig << kKda << qkv << f << beta << l.n_heads << l.head_dim << l.state_size << p.a << p.dt_bias << state << out,
       seqs);
  graphs_->record(sig, [=, this] { gpu::launch_kda(a, sa, stream_); });
}

void CudaBackendImpl::lightning_attention(const Tensor& qkv, const Tensor& decay, const SsmLayout& l,
                                          const SsmSeqs& seqs, const Tensor& state, const Tensor& out) {
  const int64_t n = qkv.dim(0), vd = l.d_inner();
  BRIGADE_CHECK(l.n_groups == l.n_heads && l.state_size == l.head_dim,
                "lightning_attention: one key head per value head of as many channels (n_groups = n_heads, N = P)");
  BRIGADE_CHECK(qkv.dtype == DType::bf16 && out.dtype == DType::bf16 && qkv.numel() == n * 3 * vd && out.numel() == n * vd,
                "lightning_attention: qkv [n, 3 H D] and out [n, H D] bf16");
  BRIGADE_CHECK(decay.dtype == DType::f32 && decay.numel() == l.n_heads, "lightning_attention: decay [H] f32");
  check_head_state("lightning_attention", state, l, gpu::lightning_smem_bytes(l.head_dim));
  gpu::LightningArgs a;
  fill_heads(a, l, SsmParams{decay}, state, out);
  a.qkv = qkv.data;
  const gpu::SsmSeqArgs sa = ssm_seqs(seqs, n, state.dim(0));
  bind();
  Sig sig;
  sign(sig << kLightning << qkv << decay << l.n_heads << l.head_dim << state << out, seqs);
  graphs_->record(sig, [=, this] { gpu::launch_lightning_attention(a, sa, stream_); });
}

void CudaBackendImpl::mla_attention_over(const Tensor& q_lat, const Tensor& q_pe, const MlaLayout& l, const KvLayer& cache,
                                         const AttentionMeta& meta, float scale, const Tensor& out, const Tensor& indices) {
  const int64_t n = q_lat.dim(0), h = l.n_heads, r = l.kv_lora_rank, dr = l.rope_dim;
  BRIGADE_CHECK(q_lat.dtype == DType::bf16 && q_pe.dtype == DType::bf16 && out.dtype == DType::bf16,
                "mla_attention activations are bf16");
  BRIGADE_CHECK(q_lat.row_numel() == h * r && q_pe.row_numel() == h * dr && q_pe.dim(0) == n &&
                    out.row_numel() == h * r && out.dim(0) == n,
                "mla_attention: q_lat [n, H R], q_pe [n, H rope_dim], out [n, H R]");
  BRIGADE_CHECK(r % 32 == 0 && r <= 1024, "mla_attention: kv_lora_rank a multiple of 32, at most 1024");
  BRIGADE_CHECK(cache.v.empty() && cache.k.ndim == 4 && cache.k.dim(2) == 1 && cache.k.dim(3) == l.row_width() &&
                    (cache.k.dtype == DType::bf16 || cache.k.dtype == DType::f32),
                "mla_attention: a bf16 or f32 latent cache [n_pages, page_size, 1, R + rope_dim]");
  BRIGADE_CHECK(meta.sliding_window == 0, "mla_attention: no sliding window");
  gpu::MlaAttentionArgs a;
  a.q_lat = q_lat.data;
  a.q_pe = q_pe.data;
  a.cache = cache.k.data;
  a.kv_t = cache.k.dtype;
  a.n_heads = l.n_heads;
  a.kv_lora_rank = l.kv_lora_rank;
  a.rope_dim = l.rope_dim;
  a.page_size = static_cast<int>(cache.k.dim(1));
  a.q_start = meta.q_start.as<const int32_t>();
  a.ctx_len = meta.ctx_len.as<const int32_t>();
  a.block_table = meta.block_table.as<const int32_t>();
  a.max_blocks = static_cast<int>(meta.block_table.ndim >= 2 ? meta.block_table.dim(1) : meta.block_table.numel());
  a.n_seqs = meta.n_seqs;
  a.n_rows = static_cast<int>(n);
  a.scale = scale;
  a.out = out.data;
  a.indices = indices.empty() ? nullptr : indices.as<const int32_t>();
  a.topk = indices.empty() ? 0 : static_cast<int>(indices.row_numel());
  bind();
  graphs_->record(Sig() << kMlaAttention << q_lat << q_pe << cache.k << l.n_heads << l.kv_lora_rank << l.rope_dim
                        << meta.q_start << meta.ctx_len << meta.block_table << meta.n_seqs << scale << out << indices,
                  [=, this] { gpu::launch_mla_attention(a, stream_); });
}

void CudaBackendImpl::dsa_topk(const Tensor& q, const Tensor& weights, const KvLayer& cache, const DsaLayout& l,
                               const AttentionMeta& meta, const Tensor& workspace, const Tensor& out) {
  const int64_t n = q.dim(0);
  BRIGADE_CHECK(q.dtype == DType::bf16 && weights.dtype == DType::bf16 && out.dtype == DType::i32 &&
                    workspace.dtype == DType::f32, "dsa_topk: q, weights bf16, workspace f32, out i32");
  BRIGADE_CHECK(q.row_numel() == int64_t{l.n_heads} * l.head_dim && weights.row_numel() == l.n_heads &&
                    weights.dim(0) == n && out.row_numel() == l.topk && out.dim(0) == n && l.topk > 0,
                "dsa_topk: q [n, H D], weights [n, H], out [n, topk]");
  BRIGADE_CHECK(cache.v.empty() && cache.k.ndim == 4 && cache.k.dim(2) == 1 && cache.k.dim(3) >= l.col + l.head_dim &&
                    (cache.k.dtype == DType::bf16 || cache.k.dtype == DType::f32),
                "dsa_topk: a bf16 or f32 latent cache [n_pages, page_size, 1, >= col + D]");
  BRIGADE_CHECK(workspace.numel() >= meta.max_ctx_len, "dsa_topk: a workspace of at least meta.max_ctx_len scores");
  gpu::DsaTopkArgs a;
  a.q = q.data;
  a.weights = weights.data;
  a.cache = cache.k.data;
  a.kv_t = cache.k.dtype;
  a.width = cache.k.dim(3);
  a.col = l.col;
  a.n_heads = l.n_heads;
  a.head_dim = l.head_dim;
  a.topk = l.topk;
  a.scale = l.scale;
  a.rows = {static_cast<int>(cache.k.dim(1)), meta.q_start.as<const int32_t>(), meta.ctx_len.as<const int32_t>(),
            meta.block_table.as<const int32_t>(),
            static_cast<int>(meta.block_table.ndim >= 2 ? meta.block_table.dim(1) : meta.block_table.numel()), meta.n_seqs,
            static_cast<int>(n)};
  a.workspace = workspace.as<float>();
  a.ws_numel = workspace.numel();
  a.ws_stride = std::max(meta.max_ctx_len, 1);
  a.out = out.as<int32_t>();
  const int max_ctx = meta.max_ctx_len;
  bind();
  graphs_->record(Sig() << kDsaTopk << q << weights << cache.k << l.col << l.n_heads << l.head_dim << l.topk << l.scale
                        << meta.q_start << meta.ctx_len << meta.block_table << meta.n_seqs << max_ctx << workspace << out,
                  [=, this] { gpu::launch_dsa_topk(a, max_ctx, stream_); });
}

void CudaBackendImpl::attention(const Tensor& qkv, const QkvLayout& l, const KvLayer& cache,
                                const AttentionMeta& meta, float scale, const Tensor& out) {
  BRIGADE_CHECK(qkv.dtype == DType::bf16 && out.dtype == DType::bf16, "attention activations are bf16");
  BRIGADE_CHECK(l.n_kv_heads > 0 && l.n_heads % l.n_kv_heads == 0 && l.n_heads / l.n_kv_heads <= 32,
                "n_heads is a multiple of n_kv_heads, at most 32 query heads per kv head");
  BRIGADE_CHECK(l.head_dim > 0 && l.head_dim <= gpu::kAttentionMaxHeadDim && l.head_dim % 8 == 0,
                "attention: head_dim <= 512, a multiple of 8");
  BRIGADE_CHECK(cache.k.ndim == 4 && cache.k.dim(2) == l.n_kv_heads && cache.k.dim(3) == l.head_dim,
                "KV layer is [n_pages, page_size, n_kv_heads, head_dim]");
  BRIGADE_CHECK(cache.k.dtype == cache.v.dtype && (cache.k.dtype == DType::bf16 || cache.k.dtype == DType::f32),
                "the GPU KV cache is bf16 or f32");
  BRIGADE_CHECK(qkv.row_numel() == l.row_width() && out.row_numel() == l.q_width(),
                "qkv is [n, row_width] and out is [n, n_heads * head_dim]");
  gpu::AttentionArgs a;
  a.qkv = qkv.data;
  a.h = head_shape(l);
  a.k = cache.k.data;
  a.v = cache.v.data;
  a.kv_t = cache.k.dtype;
  a.page_size = static_cast<int>(cache.k.dim(1));
  a.q_start = meta.q_start.as<const int32_t>();
  a.ctx_len = meta.ctx_len.as<const int32_t>();
  a.block_table = meta.block_table.as<const int32_t>();
  a.max_blocks = static_cast<int>(meta.block_table.ndim >= 2 ? meta.block_table.dim(1) : meta.block_table.numel());
  a.n_seqs = meta.n_seqs;
  a.max_q_len = meta.max_q_len;
  a.n_rows = static_cast<int>(qkv.dim(0));
  a.sliding_window = meta.sliding_window;
  a.chunk = meta.chunk;
  a.scale = scale;
  a.softcap = meta.softcap;
  BRIGADE_CHECK(meta.sinks.empty() || (meta.sinks.dtype == DType::f32 && meta.sinks.numel() == l.n_heads),
                "attention: sinks [n_heads] f32");
  a.sinks = meta.sinks.empty() ? nullptr : meta.sinks.as<const float>();
  BRIGADE_CHECK(meta.alibi_slopes.empty() ||
                    (meta.alibi_slopes.dtype == DType::f32 && meta.alibi_slopes.numel() == l.n_heads),
                "attention: alibi_slopes [n_heads] f32");
  a.alibi = meta.alibi_slopes.empty() ? nullptr : meta.alibi_slopes.as<const float>();
  a.out = out.data;
  // Flash decoding: split the KV range when the (sequence, kv head slice, row block) blocks alone
  // would leave SMs idle, keeping at least 4 tiles (128 positions) per split.
  const gpu::AttentionGrid grid = gpu::attention_grid(a.h, meta.max_q_len);
  const int64_t base = int64_t{meta.n_seqs} * l.n_kv_heads * grid.head_slices * grid.n_row_blocks;
  const int64_t want = (2 * int64_t{sm_count_} + base - 1) / std::max<int64_t>(base, 1);
  const int64_t by_len = std::max(1, meta.max_ctx_len / 128);
  // Inside a step the length cap is skipped so the split count (launch geometry) stays the same
  // from step to step and one graph serves them all; splits past the context do no work.
  const int64_t splits = graphs_->active() ? want : std::min(want, by_len);
  a.n_splits = static_cast<int>(std::clamp<int64_t>(splits, 1, options_.max_attention_splits));
  bind();
  if (a.n_splits > 1) {
    ensure_partial(gpu::attention_partial_floats(a));
    a.partial = static_cast<float*>(partial_.data());
  }
  graphs_->record(Sig() << kAttention << qkv << cache.k << cache.v << meta.q_start << meta.ctx_len << meta.block_table
                        << a.n_seqs << a.max_q_len << a.sliding_window << a.chunk << scale << a.softcap << meta.sinks
                        << meta.alibi_slopes << out
                        << a.n_splits << a.partial
                        << l.n_heads << l.n_kv_heads << l.head_dim,
                  [a, this] { gpu::launch_attention(a, stream_); });
}

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the error, report none
    return 0;
  }
  return n;
}

Expected<std::unique_ptr<CudaBackend>> make_cuda_backend(const CudaBackendOptions& options) {
  const int n = cuda_device_count();
  if (options.device < 0 || options.device >= n)
    return unsupported("CUDA device " + std::to_string(options.device) + " does not exist (" + std::to_string(n) +
                       " usable devices)");
  cudaDeviceProp prop{};
  const cudaError_t err = cudaGetDeviceProperties(&prop, options.device);
  if (err != cudaSuccess) return unsupported("cannot query CUDA device: " + gpu::cuda_error_string(err));
  if (prop.major < 9)
    return unsupported(std::string("the CUDA backend is built for sm_90 (Hopper) and newer; ") + prop.name +
                       " is sm_" + std::to_string(prop.major) + std::to_string(prop.minor));
  const size_t max_smem = gpu::attention_max_smem_bytes();
  if (static_cast<size_t>(prop.sharedMemPerBlockOptin) < max_smem)
    return unsupported("the attention kernel needs " + std::to_string(max_smem) + " bytes of shared memory per block");
  auto backend = std::make_unique<CudaBackendImpl>(options, prop);
  BRIGADE_RETURN_IF_ERROR(backend->init());
  return std::unique_ptr<CudaBackend>(std::move(backend));
}

}  // namespace brigade
