#include "core/in_process_communicator.h"

#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>

namespace brigade {
namespace {

// State shared by the ranks of one group. Every field is guarded by mu_, except that sum_ and the
// published tensors are read and written outside the lock in the phases the barriers separate.
class Group {
 public:
  explicit Group(const InProcessGroupOptions& o)
      : size_(o.size), timeout_(o.timeout), inputs_(static_cast<size_t>(o.size)) {}

  int size() const { return size_; }

  Status all_reduce_sum(int rank, const Tensor& x) {
    if (x.dtype != DType::f32 && x.dtype != DType::bf16)
      return invalid_argument(std::string("all_reduce_sum supports f32 and bf16, not ") + dtype_name(x.dtype));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_) return failure();
      inputs_[static_cast<size_t>(rank)] = x;
    }
    // Phase 1: everyone has published (and finished reading sum_ of the previous collective).
    BRIGADE_RETURN_IF_ERROR(barrier(rank, [this] { return prepare_sum(); }));
    const int64_t n = x.numel();
    const int64_t begin = n * rank / size_, end = n * (rank + 1) / size_;
    for (int64_t i = begin; i < end; ++i) {
      float s = element(inputs_[0], i);
      for (int r = 1; r < size_; ++r) s += element(inputs_[static_cast<size_t>(r)], i);
      sum_[static_cast<size_t>(i)] = s;
    }
    // Phase 2: the whole sum is there and nobody reads the inputs any more.
    BRIGADE_RETURN_IF_ERROR(barrier(rank, nullptr));
    if (x.dtype == DType::f32) {
      std::memcpy(x.data, sum_.data(), static_cast<size_t>(n) * sizeof(float));
    } else {
      uint16_t* out = x.as<uint16_t>();
      for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(sum_[static_cast<size_t>(i)]);
    }
    return Status::ok();
  }

  void abort(int rank, const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_locked("rank " + std::to_string(rank) + " aborted the tensor-parallel group: " + reason);
  }

 private:
  static float element(const Tensor& t, int64_t i) {
    return t.dtype == DType::f32 ? t.as<const float>()[i] : bf16_to_f32(t.as<const uint16_t>()[i]);
  }

  // Run by the last rank to arrive at phase 1, under the lock: every rank must reduce the same
  // shape, and sum_ is resized only here, where no rank can still be reading it.
  Status prepare_sum() {
    const Tensor& first = inputs_[0];
    for (int r = 1; r < size_; ++r) {
      const Tensor& t = inputs_[static_cast<size_t>(r)];
      if (t.dtype != first.dtype || t.numel() != first.numel())
        return invalid_argument("all_reduce_sum: rank " + std::to_string(r) + " reduces " + dtype_name(t.dtype) + " " +
                                t.shape_string() + " but rank 0 reduces " + dtype_name(first.dtype) + " " +
                                first.shape_string());
    }
    if (sum_.size() < static_cast<size_t>(first.numel())) sum_.resize(static_cast<size_t>(first.numel()));
    return Status::ok();
  }

  // Waits until all ranks arrive; the last one runs `on_complete` (may be null) first. A failure of
  // on_complete, an abort or a timeout fails the group for every rank.
  Status barrier(int rank, const std::function<Status()>& on_complete) {
    std::unique_lock<std::mutex> lock(mu_);
    if (failed_) return failure();
    const uint64_t gen = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      if (on_complete) {
        Status st = on_complete();
        if (!st.is_ok()) fail_locked(st.message());
      }
      ++generation_;
      cv_.notify_all();
      return failed_ ? failure() : Status::ok();
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (generation_ == gen && !failed_) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && generation_ == gen && !failed_) {
        fail_locked("rank " + std::to_string(rank) + " waited " + std::to_string(timeout_.count()) +
                    " ms in a collective for the other ranks (a rank stopped or is stuck)");
      }
    }
    return failed_ ? failure() : Status::ok();
  }

  void fail_locked(const std::string& why) {
    if (failed_) return;  // the first cause is the one worth reporting
    failed_ = true;
    error_ = why;
    cv_.notify_all();
  }
  Status failure() const { return Status(StatusCode::cancelled, error_); }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool failed_ = false;
  std::string error_;
  std::vector<Tensor> inputs_;  // [size] each rank's tensor of the collective in progress
  std::vector<float> sum_;      // the reduced elements, shared by all ranks
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  Status all_reduce_sum(const Tensor& x) override { return group_->all_reduce_sum(rank_, x); }
  void abort(const std::string& reason) override { group_->abort(rank_, reason); }

 private:
  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

Expected<std::vector<std::unique_ptr<Communicator>>> make_in_process_group(const InProcessGroupOptions& options) {
  if (options.size < 1) return invalid_argument("a communicator group needs size >= 1 (got " + std::to_string(options.size) + ")");
  if (options.timeout.count() < 1) return invalid_argument("the collective timeout must be at least 1 ms");
  auto group = std::make_shared<Group>(options);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < options.size; ++r) ranks.push_back(std::make_unique<InProcessCommunicator>(group, r));
  return ranks;
}

}  // namespace brigade
