// Internal to models/: llama.cpp's GGUF files of the Llama decoder's newer relatives, read into
// the ModelConfig the safetensors path builds for them (models/llama_variants_config.h), as
// llama.cpp's loader and graphs (src/models/olmo.cpp, olmo2.cpp, exaone4.cpp, glm4.cpp, seed-oss.cpp,
// ernie4-5.cpp, hunyuan-dense.cpp, hunyuan-moe.cpp, llama4.cpp, minimax-m2.cpp, dots1.cpp, command-r.cpp,
// cohere2.cpp, chatglm.cpp) run them:
//   olmo           OLMo 1: llama's tensors (q/k rows permuted) without attn_norm / ffn_norm /
//                  output_norm (its LayerNorms have no weights; attention.layer_norm_epsilon),
//                  attention.clamp_kqv (absent: none) clamping q, k and v after their projections;
//   dbrx           DBRX: attn_norm / attn_output_norm LayerNorms without bias
//                  (attention.layer_norm_epsilon), attn_qkv fused and clamped to
//                  attention.clamp_kqv (required), every layer experts feed_forward_length wide
//                  (ffn_{gate,up,down}_exps, the converter transposing w2 back), softmax top k
//                  renormalised;
//   olmo2          OLMo 2 and OLMo 3 (one converter class): no attn_norm / ffn_norm,
//                  post_attention_norm and post_ffw_norm on the blocks' outputs, attn_q_norm /
//                  attn_k_norm over the whole projections ([H hd], [KV hd]); OLMo 3's
//                  attention.sliding_window with sliding_window_pattern (one bool per layer;
//                  absent: every 4th layer full, llama.cpp's default), rope.scaling.type yarn on
//                  the full layers only, the sliding layers unscaled with rope.freq_base_swa
//                  (llama.cpp's olmo2 graph rotates them with rope.freq_base; the two are equal
//                  in what its converter writes from OLMo 3's configs, and brigade takes the
//                  file's _swa value, which transformers' sliding layers use);
//   exaone4        EXAONE 4.0: the same norms, per-head q/k norms, llama3 scaling as
//                  rope_freqs.weight; attention.sliding_window with sliding_window_pattern,
//                  whose full layers then have no RoPE (llama.cpp applies the window only to
//                  a 64-layer file, EXAONE-4.0-32B's depth; brigade wherever the file has the
//                  key, as transformers wherever the config has it);
//   glm4           GLM-4-0414 dense: post_attention_norm on the attention output, ffn_norm before
//                  the MLP, post_ffw_norm after it; ffn_up is gate|up fused ([2 I, hidden]); q/k/v
//                  biases; RoPE of adjacent pairs (NORM, not permuted: transformers' GLM-4
//                  interleaves too) over rope.dimension_count of each head;
//   chatglm        GLM-4-9B (ChatGLMModel: attn_qkv fused with its bias) and GLM-Edge
//                  (GlmForCausalLM: attn_q / attn_k / attn_v): GlmForCausalLM's layer (arch glm),
//                  ffn_up gate|up fused, q/k/v biases where stored, RoPE of adjacent pairs (not
//                  permuted) over rope.dimension_count (half of each head);
//   seed_oss       Seed-OSS: post_attention_norm is the norm before the MLP (transformers'
//                  post_attention_layernorm); q/k/v biases where stored;
//   ernie4_5       ERNIE 4.5 dense: Llama's names, RoPE of adjacent pairs (not permuted), tied;
//   hunyuan-dense  Hunyuan dense: attn_q_norm / attn_k_norm are its per-head norms after RoPE;
//                  the converter folds the NTK alpha into rope.freq_base (a rope.scaling.alpha
//                  key, which it does not write, is folded at load as llama.cpp does);
//   hunyuan-moe    Hunyuan MoE (Hunyuan-A13B; arch hunyuan_v1_moe, read_hunyuan_moe's fields):
//                  hunyuan-dense's attention and its converter's alpha folded into
//                  rope.freq_base; every layer sparse: ffn_gate_inp the router, the experts
//                  stacked as qwen3moe's and expert_feed_forward_length wide (absent:
//                  feed_forward_length, by which llama.cpp sizes them: it loads only files where
//                  the two agree, as in every released config), the top expert_used_count of
//                  their softmax renormalised (fixed by llama.cpp's graph: no
//                  expert_gating_func, expert_weights_norm or expert_weights_scale read), beside
//                  ffn_*_shexp, one ungated SwiGLU expert_shared_feed_forward_length wide
//                  (absent: feed_forward_length). Refused by name: expert_shared_count other
//                  than 1, expert_group_count above 1, per-layer expert_used_count or
//                  expert_feed_forward_length, rope.scaling.alpha (which llama.cpp's hunyuan-moe
//                  loader, unlike hunyuan-dense's, does not apply);
//   ernie4_5-moe   ERNIE 4.5 MoE (ERNIE-4.5-21B-A3B): ernie4_5's attention and RoPE; experts
//                  stacked as qwen3moe's (models/gguf_moe.h) with exp_probs_b (the selection bias)
//                  and ffn_*_shexp shared experts expert_shared_feed_forward_length wide;
//                  leading_dense_block_count and interleave_moe_layer_step place the sparse layers;
//   apertus        Apertus: attn_norm / ffn_norm are its attention_ / feedforward_layernorm,
//                  per-head q/k norms, ffn_up and ffn_down only, llama3 scaling as
//                  rope_freqs.weight (NEOX, not permuted); its xIELU parameters as metadata
//                  xielu.alpha_p / alpha_n / beta / eps (no arch prefix; f32, one per layer or one
//                  for all, alpha_p and alpha_n as stored before their softplus), which
//                  add_gguf_xielu_tensors turns into the checkpoint's mlp.act_fn.* tensors;
//   llama4         Llama 4's language model (Scout, Maverick; arch llama4_text, read_llama4's
//                  fields): RoPE of adjacent pairs (NORM, not permuted: transformers' Llama 4
//                  rotates pairs already), llama3 scaling as rope_freqs.weight; what llama.cpp
//                  fixes rather than reads: no RoPE on every 4th layer, chunks of 8192 on the
//                  others (or where attention.sliding_window_pattern says), the NoPE layers'
//                  query temperature (floor 8192, scale 0.1), weightless q/k norms after RoPE
//                  on the RoPE layers unless expert_count is 128 (Maverick's config has none);
//                  every interleave_moe_layer_step-th layer sparse: ffn_gate_inp the router, the
//                  experts stacked as qwen3moe's, top expert_used_count by the raw logits whose
//                  sigmoid scales each expert's input, beside ffn_*_shexp, a shared expert as wide
//                  as the experts (expert_feed_forward_length); the others dense ffn_gate / up /
//                  down of feed_forward_length. Refused by name: attention.sliding_window 0 (the
//                  converter's "every layer full attention", which llama.cpp cannot run),
//                  rope.freq_base_swa other than rope.freq_base, per-layer expert_used_count or
//                  expert_feed_forward_length;
//   minimax-m2     MiniMax-M2 (arch minimax_m2, read_minimax_m2's fields): attn_q_norm /
//                  attn_k_norm over the whole projections ([H hd], [KV hd]) before NEOX RoPE
//                  (not permuted) over rope.dimension_count of each head; every layer sparse:
//                  ffn_gate_inp the router, the experts stacked as qwen3moe's and
//                  feed_forward_length wide (llama.cpp sizes them by it; the converter writes
//                  expert_feed_forward_length equal), the top expert_used_count chosen on sigmoid
//                  + exp_probs_b (the selection bias, [E]) and renormalised, as llama.cpp's graph
//                  fixes. expert_gating_func 2 (sigmoid), or absent (llama.cpp then aborts;
//                  MiniMax-M2 routes by sigmoid). Refused by name: another expert_gating_func,
//                  expert_group_count above 1, per-layer expert_used_count;
//   dots1          dots.llm1 (arch dots1, read_dots1's fields): qwen3's attention (per-head
//                  attn_q_norm / attn_k_norm, which llama.cpp requires); leading_dense_block_count
//                  dense layers, then ffn_gate_inp the router, the experts stacked as qwen3moe's
//                  (expert_feed_forward_length wide) beside expert_shared_count shared experts
//                  of that width in ffn_*_shexp (gguf_moe.h's read_gguf_shared_experts); the top
//                  expert_used_count chosen on sigmoid + exp_probs_b where the file has it (llama.cpp's
//                  is optional), within the expert_group_used_count best of expert_group_count
//                  groups by their two best (llama.cpp's build_moe_ffn for every architecture),
//                  renormalised with expert_weights_norm, times expert_weights_scale. Its converter
//                  writes expert_gating_func only from config.json's scoring_func (llama.cpp aborts
//                  without it; dots.llm1 routes by sigmoid, which brigade runs). No sliding window
//                  (neither the converter nor llama.cpp's dots1 has one). Refused by name:
//                  expert_gating_func other than 2 (sigmoid);
//   command-r      Command R and R+ (arch cohere, read_cohere's fields): every norm a LayerNorm
//                  without bias (eps attention.layer_norm_epsilon, required), attention and MLP in
//                  parallel on attn_norm's output (no ffn_norm), RoPE of adjacent pairs (NORM, not
//                  permuted), tied (no output.weight), the logits times logit_scale (absent: none);
//                  per-head attn_q_norm / attn_k_norm LayerNorms ({head_dim, n_head} as stored:
//                  the checkpoint's q_norm [n_heads, head_dim]) where the file holds them
//                  (llama.cpp loads them, and requires them, in a file of 64 layers or more only:
//                  Command R+'s);
//   cohere2        Command R7B and Command A (arch cohere2): command-r's layer without q/k norms;
//                  logit_scale and attention.sliding_window required, the window on the layers
//                  attention.sliding_window_pattern marks (absent: every 4th layer full, as
//                  llama.cpp), RoPE on those sliding layers only (the full ones are NoPE).
// The converter permutes no q/k rows for any of them. Biases the file holds load (transformers'
// attention_bias / attention_out_bias / use_bias); llama.cpp creates no o or MLP biases for
// these (its loader refuses a file holding them), so its files have none.
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "models/raw_tensor.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_llama_variant(const std::string& gguf_arch);

// Fills what the architecture adds to the common keys read_config reads (arch becomes the
// safetensors name: olmo, dbrx, olmo2 or olmo3, exaone4, glm4, seed_oss, ernie4_5, hunyuan_v1_dense,
// hunyuan_v1_moe, llama4_text, minimax_m2, cohere, cohere2, dots1). unsupported naming the key for what
// brigade does not run (above). corrupt naming the key for values out of range and required keys
// missing.
Status read_gguf_llama_variant(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c);

// llama.cpp's mistral3 (Ministral 3, Devstral Small 2, and Mistral Small 3.x's language model as
// current converters write it): llama's layer and names (q/k rows permuted, RoPE of adjacent
// pairs), rope.scaling.type none or yarn (read_gguf_yarn) whose yarn_log_multiplier is
// Ministral3Config's mscale_all_dim (llama.cpp takes mscale 1: the cos/sin factor is
// mscale(factor, 1) / mscale(factor, multiplier), times rope.scaling.attn_factor), and, with
// attention.temperature_scale, the query temperature on every layer after RoPE over YaRN's
// original_context_length (context_length without YaRN), offset 0, as llama.cpp's mistral3 graph
// (arch ministral3; without the key, llama). unsupported naming the key for another scaling type
// or a multiplier without YaRN; corrupt for values out of range.
Status read_gguf_mistral3(const GgufFile& g, const std::string& a, ModelConfig& c);

// Apertus's xIELU parameters (metadata xielu.*) as the tensors model.layers.N.mlp.act_fn.alpha_p,
// alpha_n, beta, eps [1] f32 a safetensors checkpoint holds, over the metadata's bytes in the
// mapping. corrupt naming the key when one is missing, not f32 or not one per layer (or one).
Status add_gguf_xielu_tensors(const GgufFile& g, int n_layers, std::map<std::string, RawTensor>& tensors);

// The Hugging Face name of a block tensor's suffix (under model.layers.N.) where the
// architecture names it otherwise than Llama's table, or "" (hunyuan-moe's and dots1's experts,
// router and shared MLP: gguf_moe_layer_name's, the shared MLP as mlp.shared_experts.*).
std::string gguf_llama_variant_layer_name(const std::string& gguf_arch, const std::string& suffix);

}  // namespace brigade
