// The load-time check that a tensor-parallel group splits a model evenly (docs/architecture.md
// "Tensor parallelism", "Expert parallelism"), shared by the decoders.
#pragma once

#include "core/status.h"
#include "models/model.h"

namespace brigade {

// Ok without a communicator; otherwise its size must divide n_heads, n_kv_heads when the model
// splits its kv heads (Llama's GQA; MLA keeps one latent per token on every rank), the dense
// MLPs' intermediate_size when some layer is dense, and the sparse layers as moe_splits says for
// o.expert_parallel. The error names each field with its value and lists the sizes that work.
Status check_tensor_parallel(const ModelConfig& c, const LoadOptions& o, bool split_kv_heads);

}  // namespace brigade
