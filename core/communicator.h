// Communicator: the collectives a tensor-parallel group runs inside the forward pass
// (DESIGN.md §3 "Topologies", §8). One object per rank; ranks of a group call the same
// collectives in the same order with tensors of the same shape and dtype.
//
// Implementations: an in-process group for ranks on host memory (core/in_process_communicator.h,
// CPU executors on threads of one process) and NCCL for GPUs (gpu/nccl_communicator.h).
//
// Failure: a collective that cannot complete (a peer aborted, timed out, NCCL failed) returns an
// error instead of blocking forever, and the group stays failed: every later collective returns
// the same error. A failed group is not repaired; the ranks must be rebuilt (as with NCCL).
#pragma once

#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace brigade {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  // in [0, size)
  virtual int size() const = 0;

  // x [any shape] = the sum of every rank's x, in place, identical on every rank. f32 and bf16
  // (bf16 inputs are summed in f32 and rounded once). x lives where this communicator's ranks
  // keep their activations (host memory for the in-process group, device memory for NCCL).
  // Enqueued in order with the rank's backend ops; the in-process group completes it on return.
  virtual Status all_reduce_sum(const Tensor& x) = 0;

  // Marks the group failed with `reason` and wakes every rank waiting in a collective, which then
  // returns an error naming this rank and the reason. Safe to call from any thread, repeatedly.
  // A rank that stops (its executor exits or fails mid-step) calls it so no peer waits for it.
  virtual void abort(const std::string& reason) = 0;
};

}  // namespace brigade
