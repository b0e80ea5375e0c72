#include "models/tensor_parallel.h"

#include <string>

#include "core/communicator.h"
#include "models/moe_block.h"

namespace brigade {

Status check_tensor_parallel(const ModelConfig& c, const LoadOptions& o, bool split_kv_heads) {
  if (o.communicator == nullptr) return Status::ok();
  const int tp = o.communicator->size();
  const bool dense = c.n_moe_layers() < c.n_layers;  // intermediate_size sizes the dense MLPs only
  auto divides = [&](int n) {
    return c.n_heads % n == 0 && (!split_kv_heads || c.n_kv_heads % n == 0) &&
           (!dense || c.intermediate_size % n == 0) && moe_splits(c, n, o.expert_parallel);
  };
  if (divides(tp)) return Status::ok();
  std::string fields = "n_heads (" + std::to_string(c.n_heads) + ")";
  if (split_kv_heads) fields += ", n_kv_heads (" + std::to_string(c.n_kv_heads) + ")";
  if (dense) fields += ", intermediate_size (" + std::to_string(c.intermediate_size) + ")";
  if (c.n_moe_layers() > 0) fields += ", " + moe_split_fields(c, o.expert_parallel);
  return tp_refusal(tp, fields, divides, c.n_heads);
}

Status tp_refusal(int tp, const std::string& fields, const std::function<bool(int)>& divides, int max_n) {
  std::string valid;
  for (int n = 1; n <= max_n; ++n)
    if (divides(n)) valid += (valid.empty() ? "" : ", ") + std::to_string(n);
  return invalid_argument("tensor parallelism tp=" + std::to_string(tp) + " must divide " + fields +
                          "; valid tp for this model: " + valid);
}

Status rms_norm_across_ranks(Backend& b, Communicator& comm, const Tensor& x, int heads, int head_dim, int64_t total,
                             const Tensor& weight, float eps, const Tensor& sums) {
  const QkvLayout mine{heads, 0, head_dim};  // x as a q part without k or v
  b.qk_sum_squares(x, mine, sums);
  BRIGADE_RETURN_IF_ERROR(comm.all_reduce_sum(sums));
  b.qk_norm_by_sums(x, mine, sums, total, 1, weight, Tensor(weight.data, weight.dtype, {0}), eps);
  return Status::ok();
}

}  // namespace brigade
