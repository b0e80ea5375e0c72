// Internal to models/: the int4 weight-only quantization configs (quant_method gptq, awq, and
// compressed-tensors' pack-quantized groups) that parse_quant_config (quant_config.h) reads.
// Each fills the int4 fields of a QuantConfig (scaling group) or refuses, naming the field and
// listing what is supported.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/status.h"
#include "models/quant_config.h"

namespace brigade {

// What parse_quant_config lists as the int4 part of "supported: ...".
extern const char* const kInt4Supported;

// AutoGPTQ / GPTQModel's quantize_config: bits 4, group_size (-1: per channel), sym, desc_act,
// checkpoint_format (or format) gptq / gptq_v2.
Status parse_gptq(const nlohmann::json& q, QuantConfig& c);
// AutoAWQ's quant_config: bits (w_bit) 4, group_size (q_group_size), zero_point true, version gemm.
Status parse_awq(const nlohmann::json& q, QuantConfig& c);
// One compressed-tensors config group's weights {num_bits 4, type int, strategy group | channel,
// group_size, symmetric, actorder} (format pack-quantized); `where` names the group for errors.
Status parse_ct_int4(const std::string& where, const nlohmann::json& w, QuantConfig& c);

}  // namespace brigade
