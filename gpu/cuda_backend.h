// The CUDA backend (DESIGN.md §4): the Backend ops on one NVIDIA GPU, built for sm_90 (H100/H200).
//
// Activations are bf16, logits f32, matrices bf16 (tensor-core GEMMs through cuBLASLt) or, when
// loaded as f8e4m3, fp8 E4M3 with a per-tensor scale (fp8 GEMMs; the activations are quantized
// per matmul with a dynamic per-tensor scale, core/backend.h "fp8 weights"), norm weights and
// biases f32 or bf16. Every op is queued on the backend's one stream and returns at
// once; download() and synchronize() wait. CUDA and cuBLAS failures inside ops are bugs or a lost
// device and stop the process with the CUDA error string (BRIGADE_CHECK); allocation failures
// are out_of_resources.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "core/backend.h"
#include "core/status.h"

namespace brigade {

struct CudaBackendOptions {
  int device = 0;                             // CUDA device ordinal
  size_t gemm_workspace_bytes = 32u << 20;    // cuBLASLt workspace
  // Upper bound on KV splits of one attention launch (flash decoding); the attention workspace
  // holds this many partial results per query row and head.
  int max_attention_splits = 32;
  // Replay steps (Backend::begin_step / end_step) as CUDA Graphs; false runs them eagerly.
  bool use_graphs = true;
  // Pinned host memory for the uploads of one step (tokens, positions, slots, block table...).
  size_t step_arena_bytes = 16u << 20;
};

struct CudaGraphStats {
  int64_t replays = 0;      // steps run as one graph launch (including the capturing step)
  int64_t captures = 0;     // graphs captured
  int64_t eager_steps = 0;  // steps run op by op (a signature's first sight, or a mismatch)
};

// The CUDA backend's interface: Backend plus graph statistics and device facts. Steps between
// begin_step(key) and end_step() are replayed as CUDA Graphs (gpu/step_graph.h): use one key per
// batch-size bucket and keep the step's tensors (scratch, int arrays, block table width) fixed
// within a bucket; anything else runs eagerly, correctly.
class CudaBackend : public Backend {
 public:
  // How steps ran so far (begin_step / end_step).
  virtual CudaGraphStats graph_stats() const = 0;
  // Properties of the device, for benchmarks and logs.
  virtual int sm_count() const = 0;
  virtual int device() const = 0;     // the CUDA device ordinal
  // The device's free and total memory in bytes now (cudaMemGetInfo; {0, 0} if it fails).
  virtual std::pair<size_t, size_t> memory_info() const = 0;
  virtual void* stream() const = 0;  // the cudaStream_t every op is queued on
};

// Number of usable CUDA devices; 0 when there is no GPU or no driver (never fails).
int cuda_device_count();

// A backend on options.device; unsupported when there is no such device, not an sm_90+ GPU, or
// CUDA cannot start.
Expected<std::unique_ptr<CudaBackend>> make_cuda_backend(const CudaBackendOptions& options = {});

}  // namespace brigade
