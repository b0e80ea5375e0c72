// Internal to models/: llama.cpp's `deepseek2` GGUF architecture (DeepSeek-V2 / V2-Lite / V2.5,
// DeepSeek-V3 / R1, Kimi-K2, and the others its converter writes so), read into the ModelConfig
// the safetensors path builds for deepseek_v2 / deepseek_v3 (models/deepseek_config.h), as
// llama.cpp's loader and graph (src/models/deepseek2.cpp) read it.
//
// What llama.cpp's converter (conversion/deepseek.py DeepseekV2Model) writes:
//   - attention.kv_lora_rank (R), attention.q_lora_rank (absent where config.json's is null:
//     V2-Lite), rope.dimension_count (qk_rope_head_dim, dr), and two head widths: current files
//     attention.key_length_mla / value_length_mla (per head: qk_nope + qk_rope, v_head_dim) with
//     key_length R + dr and value_length R (the latent MLA caches); files from before that split
//     only key_length / value_length, per head;
//   - blk.N.attn_q (V2-Lite) or attn_q_a, attn_q_a_norm, attn_q_b; attn_kv_a_mqa [R + dr rows],
//     attn_kv_a_norm; kv_b_proj split per head into attn_k_b (ggml ne [nope, R, H]: each head's K
//     rows transposed) and attn_v_b (ne [R, v, H]), or in older files kv_b_proj whole as attn_kv_b;
//     attn_output; the leading dense layers' ffn_{gate,up,down}, the sparse layers' router
//     ffn_gate_inp, selection bias exp_probs_b.bias (V3), stacked experts ffn_{gate,up,down}_exps
//     and shared experts ffn_{gate,up,down}_shexp (n_shared x expert_feed_forward_length wide);
//   - expert_count, expert_used_count, expert_feed_forward_length, expert_shared_count,
//     leading_dense_block_count, expert_weights_scale, expert_weights_norm (only when true),
//     expert_gating_func (only where config.json names a scoring function: V3's sigmoid),
//     expert_group_count / expert_group_used_count (n_group, topk_group), and YaRN as
//     rope.scaling.* with rope.scaling.yarn_log_multiplier = 0.1 x mscale_all_dim;
//   - nothing permuted: llama.cpp rotates deepseek2 by adjacent pairs (RopeStyle::interleaved), as
//     transformers' DeepSeek-V2 and V3 (rope_interleave) do; the MTP layers are not written.
// What llama.cpp decides rather than reads (and brigade with it):
//   - gating without expert_gating_func is softmax (V2 and V2.5's files; sigmoid for the
//     GLM-4.7-Flash files its loader recognises by 47 or 48 blocks and 154880 tokens);
//   - expert groups (expert_group_count > 1) are scored by the sum of their two best experts for
//     either gating (DeepSeek-V2's group_limited_greedy took a group's best one);
//   - YaRN's cos/sin factor is 1 where yarn_log_multiplier is stored (the file has no mscale:
//     taken equal to mscale_all_dim), mscale(factor, 1) where not, times rope.scaling.attn_factor;
//     the softmax scale is that factor squared times mscale(factor, mscale_all_dim)^2 over
//     sqrt(qk_nope + qk_rope);
//   - the latent norms (q_a, kv_a) take attention.layer_norm_rms_epsilon (transformers builds
//     them at 1e-6: the same in every published DeepSeek config, not GLM-4.7-Flash's 1e-5);
//   - attention.temperature_scale s (Mistral Large 3's files, from conversion/mistral.py) with
//     attention.temperature_length L: every query (absorbed nope part and rope part) at position
//     p times log(floor(p / L) + 1) * s + 1, Mistral 4's / Llama 4's temperature; s without L is
//     refused (llama.cpp asserts).
// llama.cpp's `mistral4` architecture (conversion/mistral3.py's Mistral4Model, a DeepseekV2Model:
// Mistral Small 4 from its Hugging Face checkpoint) is deepseek2 under its own key prefix: the same
// loader and graph. Its converter writes no temperature keys (DeepseekV2Model's parameters only,
// no scoring function: softmax), so llama.cpp runs such a file without the temperature that
// transformers' Mistral4 applies; brigade reads the file as llama.cpp does. Its YaRN is the DSA
// archs' below (mscale 1: llama.cpp's special case names LLM_ARCH_DEEPSEEK2, not MISTRAL4).
// llama.cpp's DSA archs `deepseek32` (DeepSeek-V3.2, conversion/deepseek.py DeepseekV32Model) and
// `glm-dsa` (GLM-5, conversion/glm.py GlmMoeDsaModel) are this family plus the lightning indexer
// (models/dsa_indexer.h): blk.N.indexer.{attn_q_b, attn_k, k_norm (weight, bias), proj} as the HF
// indexer's wq_b, wk, k_norm, weights_proj (not permuted), attention.indexer.head_count /
// key_length / top_k, and glm-dsa's attention.indexer.types (true = full, false = shared); they
// become deepseek_v32 / glm_moe_dsa (sigmoid gating required). Their YaRN (and mistral4's) differs
// from deepseek2's in llama.cpp's context: mscale is taken as 1, not mscale_all_dim (its special case names
// LLM_ARCH_DEEPSEEK2 only), so the cos/sin factor is mscale(factor, 1) / mscale(factor,
// mscale_all_dim) and the softmax scale mscale(factor, 1)^2 / sqrt(qk_nope + qk_rope).
// The arch becomes deepseek_v3 for sigmoid gating, deepseek_v2 for softmax, mistral4 for
// mistral4 files. q_lora_rank, and
// which of kv_b or k_b / v_b the model loads, follow the tensors the file holds (llama.cpp picks
// q_proj by V2-Lite's layer counts). Layers past block_count - nextn_predict_layers (MTP blocks,
// written by other converters) are not loaded. Refused: files without experts, gating other than
// softmax or sigmoid, and other YaRN variants.
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "models/gguf.h"
#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

bool is_gguf_deepseek2(const std::string& gguf_arch);

// Fills the MLA and routing fields of c (c.arch the GGUF arch on entry, deepseek2 or mistral4, and
// deepseek_v2, deepseek_v3 or mistral4 on return; n_layers less the MTP blocks), the common keys
// (sizes, heads, rms eps, rope.freq_base, bos / eos) read already.
// corrupt naming the key for values missing, out of range or inconsistent; unsupported naming it
// for what brigade does not run (above).
Status read_gguf_deepseek2(const GgufFile& g, ModelConfig& c);

// The Hugging Face name (under model.layers.N.) of a deepseek2 block tensor's suffix, or "" for the
// suffixes every architecture shares: attn_k_b / attn_v_b become self_attn.k_b_proj / v_b_proj
// (not names any transformers checkpoint uses; models/deepseek.cpp loads them as kv_b_proj's K
// and V rows).
std::string gguf_deepseek2_layer_name(const std::string& suffix);

// Checks every layer's MLA and expert tensors against c (corrupt naming the GGUF tensor and the
// keys its shape follows from) and reshapes k_b_proj [H, R, nope] to [H R, nope] and v_b_proj
// [H, v, R] to [H v, R], the rows models/deepseek.cpp takes per head.
Status finish_gguf_deepseek2(const GgufFile& g, std::map<std::string, RawTensor>& tensors, const ModelConfig& c);

}  // namespace brigade
