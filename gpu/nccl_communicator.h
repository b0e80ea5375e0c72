// NCCL communicators for tensor-parallel ranks on the GPUs of one process (DESIGN.md §8): one
// rank per GPU, each driven by its own executor thread, all created together (ncclCommInitAll).
//
// all_reduce_sum is queued on the rank's backend stream (CudaBackend::stream()) after the ops
// that produced its input and before those that read its output; it returns before the reduction
// has run, like every backend op. f32 is reduced as is; bf16 is widened to f32 on the device,
// reduced in f32 and rounded once (so the sum does not depend on NCCL's ring order of bf16
// roundings). Every NCCL call is checked: a failure (or one reported asynchronously by a
// previous collective) fails the communicator with NCCL's error string; abort() aborts the NCCL
// communicator so that peers waiting in a collective return. libnccl.so.2 is opened at run time
// (not linked): without it make_nccl_group is `unsupported` and everything else still runs.
#pragma once

#include <memory>
#include <vector>

#include "core/communicator.h"

namespace brigade {

struct NcclRank {
  int device = 0;          // CUDA device ordinal of this rank
  void* stream = nullptr;  // cudaStream_t of the rank's backend on that device
};

// One communicator per entry of `ranks` (rank = index). invalid_argument when `ranks` is empty,
// names a device twice or one that does not exist ("tp N needs N GPUs; this machine has M"),
// unsupported when NCCL is not installed or cannot start.
Expected<std::vector<std::unique_ptr<Communicator>>> make_nccl_group(const std::vector<NcclRank>& ranks);

}  // namespace brigade
