// Internal to models/: llama.cpp's `kimi-linear` GGUF files (conversion/kimi_linear.py's
// KimiLinearModel) read into the ModelConfig the safetensors path builds for kimi_linear
// (models/kimi_linear_config.h), as llama.cpp's loader and graph (src/models/kimi-linear.cpp) read
// them:
//   - attention.head_count_kv one count per block: 0 marks a KDA block (recurrent), else MLA;
//     the KDA blocks have attention.head_count heads of kda.head_dim and ssm.conv_kernel taps;
//   - MLA: attention.kv_lora_rank, key_length_mla (nope + rope), value_length_mla, q_lora_rank
//     (absent: q_proj), rope.dimension_count (the rope part's width: nothing rotates, as
//     transformers); the latent norms at attention.layer_norm_rms_epsilon (llama.cpp's, where
//     transformers builds them at 1e-6); key_length / value_length are not read (the converter
//     writes config.json's head_dim there, which neither uses);
//   - the experts as deepseek2's (read_gguf_shared_experts, read_gguf_deepseek_routing), routed by
//     expert_gating_func (sigmoid; required, as llama.cpp's loader requires it) and always
//     renormalised (llama.cpp's graph passes norm_w true whatever expert_weights_norm says).
// Tensors load under the checkpoint's names (ssm_conv1d_q -> self_attn.q_conv1d.weight, ssm_a ->
// self_attn.A_log holding A, ssm_dt.bias -> dt_bias, ssm_beta -> b_proj, ssm_norm -> o_norm;
// attn_k_b / attn_v_b as deepseek2's, reshaped to the rows models/kimi_linear.cpp takes per head).
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

bool is_gguf_kimi_linear(const std::string& gguf_arch);  // kimi-linear

// Fills the KDA, MLA and routing fields of c (arch becomes kimi_linear), the common keys read
// already; corrupt naming the key for values missing, out of range or inconsistent, unsupported
// naming it for what brigade does not run (a gating other than sigmoid).
Status read_gguf_kimi_linear(const GgufFile& g, ModelConfig& c);

// The Hugging Face name (under model.layers.N.) of a kimi-linear block tensor's suffix, or "".
std::string gguf_kimi_linear_layer_name(const std::string& suffix);

// Reshapes the MLA blocks' k_b_proj [H, R, nope] to [H R, nope] and v_b_proj [H, v, R] to [H v, R];
// corrupt naming a tensor of another shape.
Status finish_gguf_kimi_linear(const GgufFile& g, std::map<std::string, RawTensor>& tensors, const ModelConfig& c);

}  // namespace brigade
