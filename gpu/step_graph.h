// Internal to gpu/: CUDA Graphs for steps (Backend::begin_step / end_step in core/backend.h).
//
// Outside a step every op runs at once. Inside a step the backend hands each op to record() as
// a signature (op id, pointers, shapes, scalars) plus a launch closure, and uploads stage their
// bytes in a pinned arena (stage()) so a captured copy node reads them from the same address on
// every replay. At end():
//   - signature equal to the key's stored one and a graph instantiated: replay it (one launch);
//   - equal and seen once before (warm: cuBLASLt plans, workspaces and RoPE tables exist):
//     capture the closures on the stream (relaxed mode), instantiate, launch;
//   - otherwise: run the closures eagerly and remember the signature (the next equal step
//     captures). A step whose uploads overflowed the arena always runs eagerly.
// The kernels take their per-step values (tokens, positions, slots, q_start, ctx_len, block
// table) from device memory, and attention's launch geometry depends only on n_seqs, max_q_len
// and the split count, so one graph serves every decode step of a batch bucket.
// Two pinned arenas: a step takes the previous step's arena when that step has finished (one
// graph per key when steps run one at a time), else the other one, waiting for the step that
// used it last. So the executor can queue step N+1 while step N still runs (steps in flight),
// and a key's graph exists once per arena (its copies read from that arena's addresses).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace brigade::gpu {

// Signature words of one op.
class Sig {
 public:
  Sig& operator<<(uint64_t v) { words_.push_back(v); return *this; }
  Sig& operator<<(int64_t v) { return *this << static_cast<uint64_t>(v); }
  Sig& operator<<(int v) { return *this << static_cast<uint64_t>(static_cast<int64_t>(v)); }
  Sig& operator<<(bool v) { return *this << static_cast<uint64_t>(v); }
  Sig& operator<<(float v);
  Sig& operator<<(const void* p) { return *this << static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }
  Sig& operator<<(const Tensor& t);
  const std::vector<uint64_t>& words() const { return words_; }

 private:
  std::vector<uint64_t> words_;
};

struct GraphStats {
  int64_t replays = 0;      // steps run as one graph launch (including the capturing step)
  int64_t captures = 0;     // graphs captured
  int64_t eager_steps = 0;  // steps run op by op (first sight of a signature, or a mismatch)
};

class StepGraphs {
 public:
  StepGraphs(cudaStream_t stream, bool enabled, size_t arena_bytes);
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  bool active() const { return active_; }
  void begin(uint64_t key);
  void end();
  // Runs fn now outside a step; inside one, records it under its signature.
  void record(const Sig& sig, std::function<void()> fn);
  // Inside a step: copies `bytes` of host memory into the pinned arena and returns the copy, or
  // null when the arena is full (the step then runs eagerly).
  const void* stage(const void* host, size_t bytes);
  // Forgets every graph (a buffer they use was replaced); `keep` lives until the step's ops ran.
  void drop_all(Buffer keep);
  GraphStats stats() const { return stats_; }

 private:
  struct Graph {
    std::vector<uint64_t> sig;
    bool warm = false;
    cudaGraphExec_t exec = nullptr;
  };
  void run_eagerly();
  bool capture(Graph& g);

  static constexpr int kArenas = 2;
  cudaStream_t stream_;
  bool enabled_;
  bool active_ = false;
  bool overflow_ = false;
  uint64_t key_ = 0;
  int arena_ = 0;  // the current step's
  void* arenas_[kArenas] = {};
  size_t arena_bytes_;
  size_t cursor_ = 0;
  cudaEvent_t done_[kArenas] = {};  // recorded after the last step that used each arena
  std::vector<uint64_t> sig_;
  std::vector<std::function<void()>> ops_;
  std::vector<Buffer> keep_;
  std::map<std::pair<uint64_t, int>, Graph> graphs_;  // by (key, arena)
  GraphStats stats_;
};

}  // namespace brigade::gpu
