// The load-time check that a tensor-parallel group splits a model evenly (docs/architecture.md
// "Tensor parallelism", "Expert parallelism"), shared by the decoders.
#pragma once

#include <functional>
#include <string>

#include "core/backend.h"
#include "core/communicator.h"
#include "core/status.h"
#include "models/model.h"

namespace brigade {

// Ok without a communicator; otherwise its size must divide n_heads, n_kv_heads when the model
// splits its kv heads (Llama's GQA; MLA keeps one latent per token on every rank), the dense
// MLPs' intermediate_size when some layer is dense, and the sparse layers as moe_splits says for
// o.expert_parallel. The error names each field with its value and lists the sizes that work.
Status check_tensor_parallel(const ModelConfig& c, const LoadOptions& o, bool split_kv_heads);

// The refusal both checks give: invalid_argument "tensor parallelism tp=<tp> must divide <fields>;
// valid tp for this model: ..." listing the group sizes in [1, max_n] that `divides` accepts.
Status tp_refusal(int tp, const std::string& fields, const std::function<bool(int)>& divides, int max_n);

// x [n, heads * head_dim] (this rank's heads of a row whose RMSNorm spans every rank's: `total`
// elements) scaled in place by weight [heads * head_dim] (this rank's slice) / sqrt(the whole
// row's mean square + eps): each row's sum of squares into sums [n, 2] f32, all-reduced over
// comm, then applied (Backend::qk_sum_squares / qk_norm_by_sums with x as the q part alone). A
// one-group Mamba2 gated norm and MiniMax's lightning norm under tensor parallelism.
Status rms_norm_across_ranks(Backend& b, Communicator& comm, const Tensor& x, int heads, int head_dim, int64_t total,
                             const Tensor& weight, float eps, const Tensor& sums);

}  // namespace brigade
