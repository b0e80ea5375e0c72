// QuantConfig: how a checkpoint's linear weights are stored quantized, parsed from config.json's
// `quantization_config`. Supported (weights FP8 E4M3, dequantized at load: models/weight_quant.h):
//   - quant_method "fp8" (DeepSeek-V3/R1, Qwen3-*-FP8; transformers' FineGrainedFP8Config):
//     weight_block_size [br, bc], each weight W [rows, cols] stored F8_E4M3 with
//     `<W>_scale_inv` [ceil(rows/br), ceil(cols/bc)], W = q * scale_inv per block. Without
//     weight_block_size (vLLM's Fp8Config, AutoFP8 checkpoints): one `<W>_scale` per tensor.
//     modules_to_not_convert lists modules stored unquantized.
//   - quant_method "compressed-tensors" (RedHat/neuralmagic *-FP8, *-FP8-dynamic): config_groups
//     whose weights are {num_bits 8, type float} with strategy tensor (`<W>_scale` of one element),
//     channel (`<W>_scale` [rows, 1]) or block (block_structure [br, bc], `<W>_scale` as above);
//     W = q * scale. `ignore` lists unquantized modules (names, or "re:" + a regex).
// Activation quantization (input_activations, activation_scheme, input_scale tensors) is not
// applied: brigade computes activations in the backend's float type (f32/bf16), which is what
// transformers does with the dequantized model, not what an fp8 GEMM in vLLM/SGLang does.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace brigade {

// How a quantized weight's scales cover it.
enum class WeightScaling {
  none,     // not quantized
  block,    // one scale per [block_rows, block_cols] block (the last ones may be partial)
  channel,  // one scale per output row
  tensor,   // one scale for the whole matrix
};

struct QuantConfig {
  WeightScaling scaling = WeightScaling::none;
  std::string method;            // quant_method as config.json writes it: "fp8" or "compressed-tensors"
  int block_rows = 0;            // scaling == block
  int block_cols = 0;
  bool scale_is_inverse = true;  // the scale tensor is named "_scale_inv" (fp8 blocks) rather than "_scale"
  std::vector<std::string> ignore;  // modules stored unquantized (modules_to_not_convert / ignore)

  bool quantized() const { return scaling != WeightScaling::none; }
  // The scale tensor of the stored weight `weight` ("x.weight" -> "x.weight_scale_inv" or
  // "x.weight_scale"; transformers 5's stacked "x.gate_up_proj" -> "x.gate_up_proj_scale_inv").
  std::string scale_name(const std::string& weight) const;
  // Whether `weight` ("model.layers.0.mlp.down_proj.weight") belongs to a module of `ignore`:
  // transformers' rule (the module is an entry, or lies under one) and compressed-tensors'
  // "re:" entries (a regex matched at the start of the module name).
  bool ignored(const std::string& weight) const;
  // A few words for `brigade inspect` and the load progress: "fp8 e4m3, 128x128 block scales
  // (quant_method fp8)"; "none" when not quantized.
  std::string describe() const;
};

// Parses config.json's quantization_config object `q`. unsupported, naming the quant_method (or
// the field) and listing what is supported, for anything else; corrupt for malformed fields.
Expected<QuantConfig> parse_quant_config(const nlohmann::json& q);

}  // namespace brigade
