// Internal to models/: llama.cpp's `gemma4` GGUF architecture (Gemma 4's language model: 31B,
// 26B-A4B, E2B / E4B) read into the ModelConfig and tensor names the safetensors path builds for
// the same model (models/gemma4_config.h), as llama.cpp's loader (src/models/gemma4.cpp) reads it.
//
// What llama.cpp's converter (conversion/gemma.py Gemma4Model) writes:
//   - norms as they are (Gemma 4's RMSNorm scales by w: no + 1, unlike gemma2 / gemma3);
//   - two geometries: attention.key_length / head_count_kv of the full layers, key_length_swa of
//     the sliding ones; head_count_kv one count or one per layer; which layers slide in
//     attention.sliding_window_pattern (one bool per layer, required as llama.cpp requires it);
//   - the full layers' proportional RoPE as rope_freqs.weight [full head_dim / 2]: 1 for the pairs
//     rotated, 1e30 for the rest (a frequency of 0; rope.dimension_count the whole head), the
//     proportional factor dropped (the converter writes no rope scaling);
//   - attention_k_eq_v as no attn_v in the full layers (llama.cpp takes V from attn_k where a
//     layer has no attn_v); attention.shared_kv_layers; feed_forward_length per layer where
//     use_double_wide_mlp doubles the K/V-reusing layers';
//   - per-layer inputs: embedding_length_per_layer_input, per_layer_token_embd, per_layer_model_proj,
//     per_layer_proj_norm and per layer inp_gate, proj, post_norm;
//   - the MoE block: expert_count / expert_used_count / expert_feed_forward_length, ffn_gate_inp
//     (router.proj) with its .scale (router.scale), ffn_gate_up_exps and ffn_down_exps (the
//     Hub's fused experts), ffn_down_exps.scale (router.per_expert_scale), pre_ffw_norm_2,
//     post_ffw_norm_1 / _2; layer_output_scale (layer_scalar).
// What llama.cpp fixes rather than reads: softmax scale 1, embeddings times sqrt(hidden), gelu_tanh.
// The K/V-reusing layers take transformers' rule (the last earlier layer of their type: llama.cpp's
// own agrees on Google's layouts, docs/architecture.md "Gemma 4").
// Refused by name: a fused attn_qkv, experts split into ffn_gate_exps / ffn_up_exps, attn_v missing
// from a sliding layer or from some full layers only, rope_freqs other than one factor over the
// rotated pairs then 1e30, key_length differing from value_length.
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "models/checkpoint.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_gemma4(const std::string& gguf_arch);

// Fills c (arch gemma4_text, c.gemma4) from the gemma4 keys; the common keys (hidden, layers,
// heads, context, rms eps, rope.freq_base, bos / eos) read already, feed_forward_length and
// head_count_kv left to it (they may be per layer).
Status read_gguf_gemma4(const GgufFile& g, ModelConfig& c);

// The Hugging Face name of a gemma4 tensor that the shared table does not map (the per-layer
// inputs, the MoE block, the sandwich norms, layer_output_scale), or "".
std::string gguf_gemma4_name(const std::string& name);

// rope_freqs.weight [full head_dim / 2] into c.gemma4's full_rope_partial and full_rope_factor.
Status read_gguf_gemma4_rope_freqs(const GgufFile& g, const RawTensor& t, ModelConfig& c);

// After the tensors: rope_freqs.weight was present, and the per-layer table's rows.
Status finish_gguf_gemma4(const GgufFile& g, const std::map<std::string, RawTensor>& tensors, ModelConfig& c);

}  // namespace brigade
