// Internal to models/: llama.cpp's `glm4moe` GGUF architecture (GLM-4.5, GLM-4.5-Air, GLM-4.6),
// read into the ModelConfig the safetensors path builds for glm4_moe (models/deepseek_config.h), as
// llama.cpp's loader (src/models/glm4-moe.cpp) reads it.
//
// What llama.cpp's converter (conversion/glm.py Glm4MoeModel) writes:
//   - glm4moe.block_count counting the MTP layers too, and nextn_predict_layers (how many of the
//     last blocks are MTP layers: blk.{L}.* with nextn.eh_proj, enorm, hnorm, shared_head_norm
//     and, from GLM-4.5's checkpoints, the embed_tokens / shared_head_head copies, beside a sparse
//     layer's tensors);
//   - attention.key_length / value_length (head_dim: 128, while hidden / heads is 53 on GLM-4.5),
//     rope.dimension_count (head_dim * partial_rotary_factor: 64), neox RoPE, q/k rows not
//     permuted;
//   - expert_count, expert_used_count, expert_feed_forward_length, expert_shared_count,
//     leading_dense_block_count (first_k_dense_replace), expert_gating_func (sigmoid),
//     expert_weights_scale (routed_scaling_factor), expert_weights_norm (norm_topk_prob);
//   - blk.N.attn_{q,k,v}.{weight,bias}, attn_output.weight, attn_{q,k}_norm.weight where the
//     model has q/k norms (GLM-4.5; not GLM-4.5-Air), post_attention_norm (the norm before the
//     MLP), the dense layers' ffn_{gate,up,down}, and per sparse layer the router ffn_gate_inp, the
//     selection bias exp_probs_b.bias (e_score_correction_bias), the experts stacked
//     (ffn_{gate,up,down}_exps) and the shared experts as ffn_{gate,up,down}_shexp.
// What llama.cpp decides rather than reads (and brigade with it): the q/k/v biases and q/k norms
// exist when their tensors do; gating without expert_gating_func is sigmoid; routing has no expert
// groups (n_group 1: every published GLM-4.5 config says so). The first MTP layer drafts under
// speculative method mtp (n_mtp_layers; its nextn.* tensors named as the Hugging Face checkpoint's
// model.layers.{L}.*, the copies of the embedding and head not loaded: the model's own are used,
// where llama.cpp's MTP graph would take the copies; they are equal in converted files). The
// vocabulary's pre-tokenizer is glm4 (models/tokenizer_gguf.cpp); eos, eot (<|user|>) and eom
// (<|observation|>) end generation (models/gguf_eog.h).
#pragma once

#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_glm4moe(const std::string& gguf_arch);

// Fills the glm4_moe fields of c (arch becomes glm4_moe; n_layers loses the MTP layers, which
// n_mtp_layers counts), the
// common keys (sizes, heads, key_length, rope dims, rms eps, rope.freq_base, bos / eos) read
// already. corrupt naming the key for values out of range or missing; unsupported naming it for
// a gating function other than sigmoid.
Status read_gguf_glm4moe(const GgufFile& g, ModelConfig& c);

// The Hugging Face name (under model.layers.N.) of a glm4moe block tensor's suffix, or "" for the
// suffixes every architecture shares (and the MTP layers' nextn.embed_tokens / shared_head_head,
// which are not loaded).
std::string gguf_glm4moe_layer_name(const std::string& suffix);

}  // namespace brigade
