// llama2.c checkpoint reader (Karpathy's run.c format; layout in shared/testdata/README.md).
//
// The file's stacked per-layer arrays are exposed as per-layer tensors under Hugging Face names
// (model.layers.N.self_attn.q_proj.weight, ...), so one Llama loader serves both formats. Every
// matrix is already [out, in] row-major like HF; only the RoPE pairing differs (interleaved).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "models/mapped_file.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

// Parses the header, checks the file size matches it exactly, fills `config` (arch llama,
// interleaved RoPE, rms eps 1e-5, theta 10000, bos 1, eos 2, max_position = seq_len) and `out`.
Status read_llama2c(const std::shared_ptr<MappedFile>& file, ModelConfig& config,
                    std::map<std::string, RawTensor>& out);

}  // namespace brigade
