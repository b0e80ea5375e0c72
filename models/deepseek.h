// DeepSeek-V2 / V3 (deepseek_v2, deepseek_v3): multi-head latent attention (MLA) and the MoE with
// shared experts (models/moe_block.h), dense MLPs before first_k_dense_replace.
//
// MLA per layer (transformers' DeepseekV3Attention; H heads, R = kv_lora_rank, dn / dr / dv =
// qk_nope / qk_rope / v head dims):
//   q = q_b(norm(q_a(x))) or q_proj(x), per head [q_nope dn | q_pe dr]
//   [c | k_pe] = kv_a_proj_with_mqa(x); c = kv_a_layernorm(c); q_pe, k_pe rotated (RoPE over dr)
//   the KV cache holds [c | k_pe] per token (KvLayout::latent: R + dr values, no V);
//   attention is absorbed for every step, prefill and decode alike: kv_b_proj's per-head K rows
//   W_UK [dn, R] fold into the query (q_lat = q_nope · W_UK), scores are q_lat · c + q_pe · k_pe,
//   the output latent o = softmax · c is mapped out by the V rows W_UV [dv, R], then o_proj.
//   This is transformers' decompressed attention reassociated, never materialising per-head K/V.
//   The weights and the steps but RoPE and the attention itself are models/mla_block.h's (which
//   Kimi Linear's RoPE-free MLA layers share).
//   Mistral Small 4 (mistral4) and Mistral Large 3's GGUF files scale every query by a temperature
//   growing with its position (ModelConfig::attn_temperature_*): q_lat and q_pe alike, which is
//   transformers' scaling of the whole query cat(q_nope, q_pe) through the linear W_UK.
//   GLM-4.7-Flash (glm4_moe_lite) is this layer with GLM-4.5's routing.
#pragma once

#include <memory>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/model.h"

namespace brigade {

// Builds a DeepSeek model from an opened checkpoint (config arch deepseek_v2 / deepseek_v3 /
// mistral4 / glm4_moe_lite).
// Refuses fp8 weights, tensor parallelism and backends without the MoE and MLA ops, with the
// reason. The MTP module (num_nextn_predict_layers; weights model.layers.{num_hidden_layers}.*) is
// loaded with LoadOptions::mtp and runs in forward_mtp (models/model.h): deepseek_v2 / v3,
// glm4_moe_lite, deepseek_v32 and glm_moe_dsa (its layer with its own DSA indexer).
Expected<std::unique_ptr<Model>> load_deepseek(const Checkpoint& checkpoint, Backend& backend,
                                               const LoadOptions& options);

}  // namespace brigade
