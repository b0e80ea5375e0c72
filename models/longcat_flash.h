// Meituan's LongCat-Flash (longcat_flash; transformers' LongcatFlashForCausalLM). Each of its
// num_layers layers holds two MLA blocks (DeepSeek-V3's, models/mla_block.h, always with
// q_lora_rank), two dense SwiGLU MLPs and one MoE whose input is the first MLP's and whose
// output joins the residual only at the layer's end (the "shortcut"):
//   h += attn0(in_norm0(h)); x = post_norm0(h); s = moe(x); h += mlp0(x);
//   h += attn1(in_norm1(h)); h += mlp1(post_norm1(h)) + s.
// The MoE routes over the n_routed_experts real experts and zero_expert_num "zero-computation"
// experts that return their input (ModelConfig::n_zero_experts): softmax over all E + Z router
// logits, the top k of scores + e_score_correction_bias, weights the unbiased scores times
// routed_scaling_factor (not renormalised); the zero experts' share multiplies the MoE input
// (Backend::moe_identity_experts). LongcatFlashMLA scales q (nope and rope parts) by
// sqrt(hidden / q_lora_rank) and the normed latent c by sqrt(hidden / kv_lora_rank) before c is
// cached: here the latent is scaled before write_mla_kv (so the cache holds transformers' c) and
// the query's factor joins the softmax scale (every score is linear in q). The KV pool holds
// 2 num_layers latent layers: block b of layer l is pool layer 2 l + b, transformers' cache index.
#pragma once

#include <memory>

#include "core/backend.h"
#include "models/checkpoint.h"
#include "models/model.h"

namespace brigade {

// Builds a LongCat-Flash model from an opened checkpoint (config arch longcat_flash). Refuses
// fp8 / block-quantized weights made at load, tensor parallelism, LoRA, the MTP module and
// backends without the MoE and MLA ops, with the reason.
Expected<std::unique_ptr<Model>> load_longcat_flash(const Checkpoint& checkpoint, Backend& backend,
                                                    const LoadOptions& options);

}  // namespace brigade
