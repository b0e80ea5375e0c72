#include "gpu/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "gpu/cuda_backend.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels.h"
#include "gpu/nccl_widen.h"

namespace brigade {
namespace {

// NCCL is opened at run time, not linked: libnccl is 200+ MB, so the packed GPU binaries
// (scripts/gpu_check.sh --pack) leave it to the device image, and a binary without it still
// starts and runs everything but tensor parallelism across GPUs.
struct NcclApi {
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  std::string error;  // why NCCL could not be opened; empty when it was
};

template <class Fn>
bool bind(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return fn != nullptr;
}

const NcclApi& nccl() {
  static const NcclApi api = [] {
    NcclApi a;
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen(BRIGADE_NCCL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      a.error = std::string("libnccl.so.2 is not installed (") + dlerror() + ")";
      return a;
    }
    if (!bind(lib, "ncclGetErrorString", a.get_error_string) || !bind(lib, "ncclCommInitAll", a.comm_init_all) ||
        !bind(lib, "ncclAllReduce", a.all_reduce) || !bind(lib, "ncclCommGetAsyncError", a.comm_get_async_error) ||
        !bind(lib, "ncclCommAbort", a.comm_abort) || !bind(lib, "ncclCommDestroy", a.comm_destroy))
      a.error = std::string("libnccl.so.2 lacks a function brigade needs (") + dlerror() + ")";
    return a;
  }();
  return api;
}

Status nccl_status(const char* call, ncclResult_t r) {
  if (r == ncclSuccess) return Status::ok();
  return Status(StatusCode::internal, std::string(call) + " failed: " + nccl().get_error_string(r));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, NcclRank where)
      : comm_(comm), rank_(rank), size_(size), device_(where.device), stream_(static_cast<cudaStream_t>(where.stream)) {}

  ~NcclCommunicator() override {
    // The backend's stream may be gone by now: cudaFree waits for the device instead.
    if (scratch_ != nullptr && cudaSetDevice(device_) == cudaSuccess) cudaFree(scratch_);
    if (!nccl_aborted_.load()) {
      const ncclResult_t r = nccl().comm_destroy(comm_);
      if (r != ncclSuccess) spdlog::warn("NCCL rank {}: ncclCommDestroy: {}", rank_, nccl().get_error_string(r));
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status all_reduce_sum(const Tensor& x) override {
    if (x.dtype != DType::f32 && x.dtype != DType::bf16)
      return invalid_argument(std::string("all_reduce_sum supports f32 and bf16, not ") + dtype_name(x.dtype));
    std::lock_guard<std::mutex> lock(mu_);
    {
      std::lock_guard<std::mutex> error_lock(error_mu_);
      if (failed_) return Status(StatusCode::cancelled, error_);
    }
    BRIGADE_CUDA_CHECK(cudaSetDevice(device_));
    const size_t n = static_cast<size_t>(x.numel());
    float* buf = x.as<float>();
    if (x.dtype == DType::bf16) {
      BRIGADE_RETURN_IF_ERROR(fail_on(ensure_scratch(n)));
      gpu::launch_bf16_to_f32(x.data, scratch_, static_cast<int64_t>(n), stream_);
      buf = scratch_;
    }
    BRIGADE_RETURN_IF_ERROR(fail_on(nccl_status("ncclAllReduce", nccl().all_reduce(buf, buf, n, ncclFloat, ncclSum, comm_, stream_))));
    if (x.dtype == DType::bf16) gpu::launch_to_bf16(scratch_, DType::f32, x.data, static_cast<int64_t>(n), stream_);
    // A collective that failed on the device (a peer vanished, a network error) reports here.
    ncclResult_t async = ncclSuccess;
    BRIGADE_RETURN_IF_ERROR(fail_on(nccl_status("ncclCommGetAsyncError", nccl().comm_get_async_error(comm_, &async))));
    if (async != ncclSuccess && async != ncclInProgress)
      return fail_on(nccl_status("an earlier NCCL collective", async));
    return Status::ok();
  }

  void abort(const std::string& reason) override {
    {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!failed_) error_ = "rank " + std::to_string(rank_) + " aborted the NCCL group: " + reason;
      failed_ = true;
    }
    // ncclCommAbort frees the communicator and makes collectives stuck on it return, which is
    // what peers waiting for this rank need; it must not be followed by ncclCommDestroy.
    if (!nccl_aborted_.exchange(true)) {
      const ncclResult_t r = nccl().comm_abort(comm_);
      if (r != ncclSuccess) spdlog::warn("NCCL rank {}: ncclCommAbort: {}", rank_, nccl().get_error_string(r));
    }
  }

 private:
  // Records the first failure: the communicator stays failed, as a failed NCCL comm does.
  Status fail_on(Status st) {
    if (st.is_ok()) return st;
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!failed_) error_ = "NCCL rank " + std::to_string(rank_) + ": " + st.message();
    failed_ = true;
    return Status(st.code(), error_);
  }

  Status ensure_scratch(size_t n) {
    if (n <= scratch_n_) return Status::ok();
    if (scratch_ != nullptr) {
      BRIGADE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // earlier collectives may still read it
      BRIGADE_CUDA_CHECK(cudaFree(scratch_));
      scratch_ = nullptr;
      scratch_n_ = 0;
    }
    const cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&scratch_), n * sizeof(float));
    if (e != cudaSuccess)
      return out_of_resources("NCCL scratch of " + std::to_string(n * sizeof(float)) + " bytes: " + gpu::cuda_error_string(e));
    scratch_n_ = n;
    return Status::ok();
  }

  ncclComm_t comm_;
  const int rank_;
  const int size_;
  const int device_;
  const cudaStream_t stream_;
  std::mutex mu_;  // one collective at a time (the rank's executor thread)
  std::mutex error_mu_;
  bool failed_ = false;  // guarded by error_mu_, with error_
  std::string error_;
  std::atomic<bool> nccl_aborted_{false};
  float* scratch_ = nullptr;  // [scratch_n_] f32 for bf16 reductions
  size_t scratch_n_ = 0;
};

}  // namespace

Expected<std::vector<std::unique_ptr<Communicator>>> make_nccl_group(const std::vector<NcclRank>& ranks) {
  if (ranks.empty()) return invalid_argument("an NCCL group needs at least one rank");
  if (!nccl().error.empty()) return unsupported("tensor parallelism across GPUs needs NCCL: " + nccl().error);
  const int n_devices = cuda_device_count();
  std::set<int> seen;
  std::vector<int> devices;
  for (const NcclRank& r : ranks) {
    if (r.device < 0 || r.device >= n_devices)
      return invalid_argument("tp " + std::to_string(ranks.size()) + " needs GPU " + std::to_string(r.device) +
                              ", but this machine has " + std::to_string(n_devices) + " GPU(s)");
    if (!seen.insert(r.device).second)
      return invalid_argument("GPU " + std::to_string(r.device) + " is given to two tensor-parallel ranks");
    if (r.stream == nullptr) return invalid_argument("NCCL rank on GPU " + std::to_string(r.device) + " has no stream");
    devices.push_back(r.device);
  }
  std::vector<ncclComm_t> comms(ranks.size());
  const ncclResult_t r = nccl().comm_init_all(comms.data(), static_cast<int>(ranks.size()), devices.data());
  if (r != ncclSuccess) return unsupported(std::string("NCCL cannot start: ncclCommInitAll: ") + nccl().get_error_string(r));
  std::vector<std::unique_ptr<Communicator>> out;
  for (size_t i = 0; i < ranks.size(); ++i)
    out.push_back(std::make_unique<NcclCommunicator>(comms[i], static_cast<int>(i), static_cast<int>(ranks.size()), ranks[i]));
  return out;
}

}  // namespace brigade
