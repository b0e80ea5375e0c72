// Internal to models/: llama.cpp's `qwen3moe` GGUF architecture (Qwen3-30B-A3B, Qwen3-235B-A22B),
// read into the ModelConfig the safetensors path builds for qwen3_moe (models/moe_block.h), as
// llama.cpp's loader (src/models/qwen3moe.cpp) reads it.
//
// What llama.cpp's converter (convert_hf_to_gguf.py Qwen3MoeModel, by way of Qwen2MoeModel) writes:
//   - qwen3moe.expert_count (num_experts), expert_used_count (num_experts_per_tok),
//     expert_feed_forward_length (moe_intermediate_size); feed_forward_length is the dense
//     intermediate_size, which no qwen3moe layer uses;
//   - blk.N.ffn_gate_inp.weight [E, hidden] (the router, mlp.gate), and each layer's experts
//     stacked: ffn_gate_exps and ffn_up_exps [E, I, hidden], ffn_down_exps [E, hidden, I]
//     (outermost first), each in its own ggml type (a Q4_K_M file: Q4_K gate and up, Q4_K or Q6_K
//     down; the router is kept F32 by llama-quantize);
//   - q/k norms as qwen3; no norm_topk_prob, decoder_sparse_step or mlp_only_layers.
// What llama.cpp decides rather than reads (and brigade with it):
//   - every layer is sparse;
//   - the k routing weights are renormalised (build_moe_ffn's norm_w is true for qwen3moe), as
//     every published Qwen3-MoE config's norm_topk_prob says;
//   - expert_feed_forward_length, when absent, is feed_forward_length / expert_used_count;
//   - expert_weights_scale, when present and not 0 or 1, scales the routing weights.
// The experts load as GGUF keeps them, gate and up apart (Backend::moe_experts_split).
//
// qwen2moe (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B; convert_hf_to_gguf.py Qwen2MoeModel) is the same
// with qwen2's attention (q/k/v biases, no q/k norms), the k routing weights not renormalised
// (build_moe_ffn's norm_w is false for it), and one shared expert: ffn_{gate,up,down}_shexp of
// expert_shared_feed_forward_length (llama.cpp's fallback: feed_forward_length) and its gate
// ffn_gate_inp_shexp [hidden] (a vector; Qwen2MoeSparseMoeBlock's shared_expert_gate [1, hidden]).
// It becomes arch qwen2_moe.
//
// olmoe (OLMoE-1B-7B; conversion/olmo.py OlmoeModel) is the same with OLMo 2's q/k norms over
// the whole projections (attn_q_norm / attn_k_norm [hidden]: llama.cpp sizes both n_embd, so only
// files with as many KV heads as query heads load there, as OLMoE's are), experts
// feed_forward_length wide, the k routing weights not renormalised (norm_w false for olmoe),
// NEOX RoPE, no permutation. It becomes arch olmoe.
//
// Mixtral (convert_hf_to_gguf.py LlamaModel) is arch `llama` with llama.expert_count and
// expert_used_count, the same stacked tensors, experts feed_forward_length wide (llama.cpp's
// llama reads no expert_feed_forward_length), no q/k norms, q/k rows permuted as llama's; it
// routes by softmax top-k renormalised (build_moe_ffn's norm_w, true for llama). It becomes
// arch mixtral. Files from before llama.cpp stacked the experts (blk.N.ffn_gate.E.weight, one
// tensor per expert) are refused by name.
//
// granitemoe (Granite 3.x MoE: granite-3.0/3.1-1b-a400m, 3b-a800m, and the shared-expert model;
// conversion/granite.py GraniteMoeModel, a LlamaModel: q/k rows permuted, read as dense granite's
// multipliers in gguf_checkpoint.cpp) is the same stacked layout, the Hub's fused input_linear
// split by the converter into ffn_gate_exps and ffn_up_exps, the router
// (block_sparse_moe.router.layer) as ffn_gate_inp; experts feed_forward_length wide (llama.cpp
// sizes them by it: there is no expert_feed_forward_length), softmax top-k renormalised (the
// granite graph's norm_w), no expert_weights_scale (its loader reads none); logit_scale required
// (by llama.cpp's loader too).
// GraniteMoeShared's ungated shared MLP is expert_shared_feed_forward_length wide (absent or 0:
// none) in ffn_{gate,up,down}_shexp (the Hub's shared_mlp.input_linear split). It becomes arch
// granitemoeshared where the file has one, granitemoe otherwise, as the Hub's two classes.
#pragma once

#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"

namespace brigade {

bool is_gguf_moe(const std::string& gguf_arch);

// A count key in [1, INT32_MAX] into out; `fallback` when absent (0: required, corrupt naming the
// key when missing). corrupt naming the key when out of range.
Status read_gguf_count(const GgufFile& g, const std::string& key, int64_t fallback, int& out);
// {a}expert_count and {a}expert_used_count (a: "qwen3moe." ...), both required, the second at
// most the first; corrupt naming the key otherwise.
Status read_gguf_expert_counts(const GgufFile& g, const std::string& a, ModelConfig& c);
// {a}expert_weights_scale into c.routed_scaling_factor: 1 when absent or 0 (llama.cpp's "no
// scale"); corrupt naming the key when not a number >= 0.
Status read_gguf_expert_weights_scale(const GgufFile& g, const std::string& a, ModelConfig& c);
// {a}expert_group_count and {a}expert_group_used_count (1 when absent) into c.n_group and
// c.topk_group, groups scored by their two best experts (llama.cpp's build_moe_ffn, DeepSeek-V3's
// rule) where there are several; corrupt naming the keys when they do not fit c's experts.
Status read_gguf_expert_groups(const GgufFile& g, const std::string& a, ModelConfig& c);
// DeepSeek-V3's experts as llama.cpp's converters write them (glm4moe, dots1): expert_count,
// expert_used_count and expert_feed_forward_length, {a}expert_shared_count shared experts of that
// width (all required), after {a}leading_dense_block_count (0 when absent) dense layers, every
// later layer sparse. corrupt naming the key when one is missing or out of range.
Status read_gguf_shared_experts(const GgufFile& g, const std::string& a, ModelConfig& c);
// {a}expert_gating_func of an architecture that routes by sigmoid (glm4moe, minimax-m2, dots1): 2
// (sigmoid), or absent (llama.cpp's "none": glm4moe's loader takes sigmoid, minimax-m2's and
// dots1's graphs abort; those models route by sigmoid, which brigade runs). Sets c.moe_scoring;
// unsupported naming the key otherwise.
Status read_gguf_sigmoid_gating(const GgufFile& g, const std::string& a, ModelConfig& c);
// DeepSeek-V3's routing keys as llama.cpp's build_moe_ffn applies them (dots1, deepseek2): the
// selection bias where the first sparse layer stores exp_probs_b.bias (llama.cpp's is optional),
// the groups (read_gguf_expert_groups), expert_weights_scale (read_gguf_expert_weights_scale) and
// expert_weights_norm (false when absent). Needs read_gguf_shared_experts' fields read.
Status read_gguf_deepseek_routing(const GgufFile& g, const std::string& a, ModelConfig& c);
// Whether a file of gguf_arch has experts ({arch}.expert_count > 0): qwen3moe, or llama (Mixtral).
Expected<bool> gguf_has_experts(const GgufFile& g, const std::string& gguf_arch);

// Fills the MoE fields of c (arch becomes qwen3_moe, with qwen3's q/k norms; qwen2_moe, with its
// gated shared expert; olmoe; granitemoe or granitemoeshared; or, from llama, mixtral), the
// common keys read already. corrupt naming the key for counts out of range (expert_used_count
// above expert_count included) and for required keys missing.
Status read_gguf_moe(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c);

// The Hugging Face name (under model.layers.N.) of a MoE block tensor's suffix, or "": the router
// is mlp.gate.weight, the stacked experts mlp.experts.{gate,up,down}_proj (3-D, not a name any
// transformers checkpoint uses); the shared expert's mlp.shared_expert.* where it is gated
// (qwen2moe's, qwen35moe's), mlp.shared_experts.* where not (granitemoe's): the names
// load_moe_block reads with and without ModelConfig::shared_gate.
std::string gguf_moe_layer_name(const std::string& suffix, bool gated_shared_expert = true);

// corrupt naming the GGUF tensor when a layer's router or experts are missing or of the wrong
// shape for c; unsupported for experts stored one tensor each.
Status check_gguf_moe_tensors(const GgufFile& g, const ModelConfig& c);

}  // namespace brigade
