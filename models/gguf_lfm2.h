// Internal to models/: llama.cpp's LFM2 GGUF architectures, `lfm2` (LFM2-350M ... 2.6B) and
// `lfm2moe` (LFM2-8B-A1B), read into the ModelConfig the safetensors path builds for lfm2 and
// lfm2_moe (models/state_space_config.h), as llama.cpp's loader (src/models/lfm2.cpp,
// lfm2moe.cpp) reads them.
//
// What llama.cpp's converter (conversion/lfm2.py) writes:
//   - {arch}.attention.head_count_kv as one count per block, 0 for the short-conv blocks (which
//     blocks are recurrent: llama.cpp's is_recr), {arch}.shortconv.l_cache (the conv's taps),
//     feed_forward_length (lfm2: the width Lfm2MLP adjusts intermediate_size to; lfm2moe: the
//     dense layers'), attention.layer_norm_rms_epsilon, rope.freq_base; lfm2moe's
//     expert_count, expert_used_count, expert_feed_forward_length, leading_dense_block_count
//     and expert_gating_func (sigmoid). It writes neither norm_topk_prob nor
//     routed_scaling_factor: llama.cpp's graph renormalises the k weights always and scales
//     them by expert_weights_scale where a file has one.
//   - token_embd_norm: the final norm (embedding_norm; llama.cpp's "fix for wrong tensor name");
//     per block attn_norm (operator_norm), ffn_norm; shortconv.conv [hidden, l_cache],
//     shortconv.in_proj, shortconv.out_proj; attn_q/k/v, attn_output, attn_q_norm, attn_k_norm;
//     ffn_gate (w1), ffn_up (w3), ffn_down (w2), or lfm2moe's ffn_gate_inp (the router),
//     exp_probs_b.bias (expert_bias), ffn_gate_exps / ffn_up_exps / ffn_down_exps.
// llama.cpp loads no conv biases (LFM2's checkpoints have none), so a file's tensors load under
// the checkpoint's names (model.layers.N.conv.in_proj.weight ...) with conv_bias false.
// Refused by name: attention with q|k|v fused (attn_qkv), a sliding window.
#pragma once

#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_lfm2(const std::string& gguf_arch);  // lfm2, lfm2moe

// Fills the short-conv, layer and MoE fields of c (arch becomes lfm2 or lfm2_moe; n_kv_heads the
// attention blocks' count), the common keys but head_count_kv read already. corrupt naming the
// key for values out of range, missing or inconsistent.
Status read_gguf_lfm2(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c);

// The Hugging Face name of such a file's tensor, under model.layers.N. for a block's suffix, or
// of the top-level `name` (token_embd_norm.weight); "" for the names every architecture shares.
std::string gguf_lfm2_layer_name(const std::string& suffix);
std::string gguf_lfm2_top_name(const std::string& name);

// unsupported naming the tensor for layouts brigade does not read (see above); corrupt for a
// MoE layer's tensors missing or misshapen.
Status check_gguf_lfm2_tensors(const GgufFile& g, const ModelConfig& c);

}  // namespace brigade
