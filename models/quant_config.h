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
// int4 weight-only (W4A16; scaling group, models/int4_weight.h reads them):
//   - quant_method "gptq" (AutoGPTQ / GPTQModel): `qweight` [in / 8, out] int32, 8 nibbles along
//     the input dim; `qzeros` [groups, out / 8] along the output dim; `scales` [groups, out];
//     `g_idx` [in] (each input column's group; desc_act permutes it). W = s * (q - z), z the stored
//     nibble + 1 in the original format (checkpoint_format gptq), as stored in gptq_v2.
//   - quant_method "awq" (AutoAWQ, version gemm): `qweight` [in, out / 8] and `qzeros`
//     [in / group, out / 8], 8 nibbles along the output dim in AWQ's order 0,2,4,6,1,3,5,7;
//     `scales` [in / group, out]. W = s * (q - z).
//   - quant_method "compressed-tensors", format pack-quantized (RedHat *-quantized.w4a16):
//     `weight_packed` [out, in / 8] int32 (nibble = q + 8, q signed), `weight_scale` [out, groups],
//     `weight_zero_point` (asymmetric; packed [out / 8, groups] int32 or [out, groups] int8),
//     `weight_shape` [2]; strategy group or channel; optional `weight_g_idx` (actorder).
// Ternary weights with int8 activations (BitNet b1.58; models/weight_quant.h reads them):
//   - quant_method "bitnet" (transformers' BitNetQuantConfig): every linear of the decoder layers
//     (not lm_head, nor modules_to_not_convert) holds values in {-1, 0, 1} times one scale per
//     tensor, and its input is quantized per row to int8 and back (Backend::quantize_rows_int8,
//     applied by the Llama decoder). linear_class "bitlinear" (the default; BitLinear): `weight`
//     u8 [rows / 4, cols], four ternary codes per byte (bits 2i..2i+1 of stored row r hold value + 1
//     of matrix row r + i * rows / 4), W = t / weight_scale. "autobitlinear" (AutoBitLinear): quantization_mode
//     "offline" stores `weight` ternary (packed as above, or as floats) with W = t * weight_scale;
//     "online" stores the float weights, ternarized at load as transformers does per forward,
//     W = clamp(round(w s), -1, 1) / s with s = 1 / max(mean |w|, 1e-5). use_rms_norm (a norm
//     inside each linear) is refused.
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
  group,    // int4: one scale (and zero point) per output row and group of input columns
  mxfp4,    // quant_method mxfp4 (gpt-oss): the MoE experts as <name>_blocks / <name>_scales, OCP
            // microscaling FP4 (32 E2M1 values per E8M0 power-of-two scale); the rest is stored float
  ternary,  // quant_method bitnet: {-1, 0, 1} times one scale per tensor, int8 activations
};

// How a bitnet checkpoint's ternary linears store their scale (scaling == ternary).
enum class TernaryLinear {
  bitlinear,       // BitLinear: packed codes, W = t / weight_scale
  auto_offline,    // AutoBitLinear, offline: packed or float codes, W = t * weight_scale
  auto_online,     // AutoBitLinear, online: float weights ternarized at load, no weight_scale
};

// How an int4 checkpoint packs its linear layers (scaling == group).
enum class Int4Packing { none, gptq, awq, pack_quantized };

struct QuantConfig {
  WeightScaling scaling = WeightScaling::none;
  std::string method;            // quant_method as config.json writes it: "fp8" or "compressed-tensors"
  int block_rows = 0;            // scaling == block
  int block_cols = 0;
  bool scale_is_inverse = true;  // the scale tensor is named "_scale_inv" (fp8 blocks) rather than "_scale"
  std::vector<std::string> ignore;  // modules stored unquantized (modules_to_not_convert / ignore)
  // int4 (scaling == group):
  Int4Packing packing = Int4Packing::none;
  int group_size = -1;       // input columns per group; -1: one group per row (per channel)
  bool symmetric = true;     // zero point 8 everywhere (gptq sym, compressed-tensors symmetric)
  bool zero_plus_one = false;  // gptq's original format: z = stored nibble + 1
  bool act_order = false;    // gptq desc_act / compressed-tensors actorder: g_idx names the groups
  TernaryLinear ternary_linear = TernaryLinear::bitlinear;  // scaling == ternary

  bool quantized() const { return scaling != WeightScaling::none; }
  bool int4() const { return scaling == WeightScaling::group; }
  bool mxfp4() const { return scaling == WeightScaling::mxfp4; }
  // BitNet: ternary linears whose inputs the decoder quantizes to int8 per row.
  bool ternary() const { return scaling == WeightScaling::ternary; }
  // Whether the stored weight `weight` is one of a ternary checkpoint's ternary linears: a
  // projection of the decoder layers ("model.layers.<i>.<...>_proj.weight": q/k/v/o, gate/up/down)
  // not in `ignore`.
  bool ternary_weight(const std::string& weight) const;
  // The scale tensor of the stored weight `weight` ("x.weight" -> "x.weight_scale_inv" or
  // "x.weight_scale"; transformers 5's stacked "x.gate_up_proj" -> "x.gate_up_proj_scale_inv").
  std::string scale_name(const std::string& weight) const;
  // Whether `weight` ("model.layers.0.mlp.down_proj.weight") belongs to a module of `ignore`:
  // transformers' rule (the module is an entry, or lies under one) and compressed-tensors'
  // "re:" entries (a regex matched at the start of the module name).
  bool ignored(const std::string& weight) const;
  // A few words for `brigade inspect` and the load progress: "fp8 e4m3, 128x128 block scales
  // (quant_method fp8)", "int4, groups of 128, symmetric (quant_method gptq)"; "none" when not
  // quantized.
  std::string describe() const;
};

// Parses config.json's quantization_config object `q`. unsupported, naming the quant_method (or
// the field) and listing what is supported, for anything else; corrupt for malformed fields.
Expected<QuantConfig> parse_quant_config(const nlohmann::json& q);

}  // namespace brigade
