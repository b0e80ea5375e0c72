// The in-process Communicator: N ranks on N threads of one process, sharing host memory (CPU
// executors under tensor parallelism, and tests).
//
// all_reduce_sum runs in two phases between barriers: every rank publishes its tensor; each rank
// sums its own slice of the elements over all ranks, always in rank order (rank 0 + rank 1 + ...)
// into a shared f32 buffer; after the second barrier every rank copies the whole sum back into its
// tensor. So the result is bit-identical on every rank and does not depend on thread timing.
//
// Waits are bounded: a rank that does not arrive within `timeout` fails the group (deadline), and
// abort() fails it at once; either way every waiting rank wakes with that error.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "core/communicator.h"

namespace brigade {

struct InProcessGroupOptions {
  int size = 1;  // ranks in the group, >= 1
  // Longest a rank waits in one collective for the others. A rank that sees this pass fails the
  // group. Generous by default: peers may be one forward pass behind (a big prefill on a slow CPU).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// One communicator per rank (index = rank), sharing one group. Each must be used by one thread
// at a time; the group lives as long as any of them. invalid_argument when size < 1.
Expected<std::vector<std::unique_ptr<Communicator>>> make_in_process_group(const InProcessGroupOptions& options);

}  // namespace brigade
