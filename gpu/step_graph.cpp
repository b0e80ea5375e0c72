#include "gpu/step_graph.h"

#include <cstring>

#include "gpu/cuda_check.h"

namespace brigade::gpu {

Sig& Sig::operator<<(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return *this << static_cast<uint64_t>(u);
}

Sig& Sig::operator<<(const Tensor& t) {
  *this << t.data << static_cast<int>(t.dtype) << t.ndim;
  for (int i = 0; i < t.ndim; ++i) *this << t.shape[static_cast<size_t>(i)];
  return *this;
}

StepGraphs::StepGraphs(cudaStream_t stream, bool enabled, size_t arena_bytes)
    : stream_(stream), enabled_(enabled), arena_bytes_(arena_bytes) {
  for (int i = 0; i < kArenas; ++i) {
    BRIGADE_CUDA_CHECK(cudaHostAlloc(&arenas_[i], arena_bytes_, cudaHostAllocDefault));
    BRIGADE_CUDA_CHECK(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
  }
}

StepGraphs::~StepGraphs() {
  for (auto& [key, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  for (int i = 0; i < kArenas; ++i) {
    if (done_[i]) cudaEventDestroy(done_[i]);
    if (arenas_[i]) cudaFreeHost(arenas_[i]);
  }
}

void StepGraphs::begin(uint64_t key) {
  BRIGADE_CHECK(!active_, "begin_step inside a step");
  const cudaError_t prev = cudaEventQuery(done_[arena_]);
  if (prev == cudaErrorNotReady) {  // the previous step still runs: the other arena
    (void)cudaGetLastError();  // "not ready" is no error; clear it, or a launch check would see it
    arena_ = (arena_ + 1) % kArenas;
    BRIGADE_CUDA_CHECK(cudaEventSynchronize(done_[arena_]));  // its last step no longer reads it
  } else {
    BRIGADE_CUDA_CHECK(prev);
  }
  active_ = true;
  overflow_ = false;
  key_ = key;
  cursor_ = 0;
  sig_.clear();
  ops_.clear();
}

void StepGraphs::record(const Sig& sig, std::function<void()> fn) {
  if (!active_) {
    fn();
    return;
  }
  sig_.push_back(sig.words().size());
  sig_.insert(sig_.end(), sig.words().begin(), sig.words().end());
  ops_.push_back(std::move(fn));
}

const void* StepGraphs::stage(const void* host, size_t bytes) {
  BRIGADE_CHECK(active_, "stage() inside a step");
  if (cursor_ + bytes > arena_bytes_) {
    overflow_ = true;
    return nullptr;
  }
  char* dst = static_cast<char*>(arenas_[arena_]) + cursor_;
  std::memcpy(dst, host, bytes);
  cursor_ += (bytes + 255) & ~size_t{255};
  return dst;
}

void StepGraphs::drop_all(Buffer keep) {
  for (auto& [key, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
  if (active_) keep_.push_back(std::move(keep));
}

void StepGraphs::run_eagerly() {
  for (auto& op : ops_) op();
  ++stats_.eager_steps;
}

bool StepGraphs::capture(Graph& g) {
  BRIGADE_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  for (auto& op : ops_) op();
  cudaGraph_t graph = nullptr;
  BRIGADE_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  const cudaError_t err = cudaGraphInstantiate(&g.exec, graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    cudaGetLastError();
    g.exec = nullptr;
    return false;
  }
  ++stats_.captures;
  return true;
}

void StepGraphs::end() {
  BRIGADE_CHECK(active_, "end_step without begin_step");
  active_ = false;
  Graph& g = graphs_[{key_, arena_}];
  const bool same = enabled_ && !overflow_ && g.sig == sig_;
  if (same && (g.exec != nullptr || (g.warm && capture(g)))) {
    BRIGADE_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
    ++stats_.replays;
  } else {
    if (g.exec) cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
    // A failed instantiation leaves warm set with the same signature: it would fail again.
    g.warm = enabled_ && !overflow_ && !same;
    g.sig = sig_;
    run_eagerly();
  }
  BRIGADE_CUDA_CHECK(cudaEventRecord(done_[arena_], stream_));
  ops_.clear();
  keep_.clear();  // cudaFree waits for the ops that still used these
}

}  // namespace brigade::gpu
