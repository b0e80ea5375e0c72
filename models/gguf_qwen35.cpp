#include "models/gguf_qwen35.h"

#include <cmath>
#include <map>
#include <set>

#include "models/gguf_moe.h"

namespace brigade {

bool is_gguf_qwen35(const std::string& gguf_arch) {
  return gguf_arch == "qwen35" || gguf_arch == "qwen35moe" || gguf_arch == "qwen3next";
}

Status read_gguf_qwen35(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c) {
  const std::string a = gguf_arch + ".";
  const bool next = gguf_arch == "qwen3next", moe = gguf_arch != "qwen35";
  c.arch = next ? "qwen3_next" : moe ? "qwen3_5_moe_text" : "qwen3_5_text";
  // The MTP blocks newer converters append are not part of the model here.
  BRIGADE_ASSIGN_OR_RETURN(int64_t nextn, g.get_int_or(a + "nextn_predict_layers", 0));
  if (nextn < 0 || nextn >= c.n_layers)
    return corrupt(g.path() + ": metadata '" + a + "nextn_predict_layers' (" + std::to_string(nextn) +
                   ") must be below block_count (" + std::to_string(c.n_layers) + ")");
  const int blocks = c.n_layers;
  c.n_layers -= static_cast<int>(nextn);
  // The Gated DeltaNet layers: H value heads of P channels, G key heads of N.
  SsmLayout& l = c.ssm.layout;
  BRIGADE_RETURN_IF_ERROR(read_gguf_ssm_layout(g, a, l));
  l.tiled_heads = !next;  // Qwen3.5's value heads as the converter reorders them
  c.ssm.gated_delta = true;
  c.ssm.conv_bias = false;
  c.ssm.proj_bias = false;
  // Which blocks are linear attention: recurrent_layers, else all but every
  // full_attention_interval-th (llama.cpp's fallback).
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), false);
  if (const GgufValue* r = g.find(a + "attention.recurrent_layers")) {
    if (r->type != GgufType::array || r->numbers.size() != static_cast<size_t>(blocks))
      return corrupt(g.path() + ": metadata '" + a + "attention.recurrent_layers' must hold one flag per block (" +
                     std::to_string(blocks) + ")");
    for (int i = 0; i < c.n_layers; ++i) c.ssm_layers[static_cast<size_t>(i)] = r->numbers[static_cast<size_t>(i)] != 0.0;
  } else {
    int interval = 4;
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "full_attention_interval", 4, interval));
    for (int i = 0; i < c.n_layers; ++i) c.ssm_layers[static_cast<size_t>(i)] = (i + 1) % interval != 0;
  }
  // The gated attention: q/k norms, RoPE over rope.dimension_count dims of each head (read with
  // the common keys), softmax scale head_dim^-0.5.
  c.qk_norm = true;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (!moe) return Status::ok();
  // Qwen2-MoE's blocks in every layer: a sigmoid-gated shared expert, the top k renormalised
  // (build_moe_ffn's norm_w is true for these architectures).
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_feed_forward_length", 0, c.moe_intermediate_size));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_shared_feed_forward_length", 0, c.shared_expert_intermediate_size));
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_weights_scale(g, a, c));
  c.shared_gate = true;
  c.norm_topk_prob = true;
  c.decoder_sparse_step = 1;
  c.mlp_only_layers.clear();
  return Status::ok();
}

Status read_gguf_ssm_layout(const GgufFile& g, const std::string& a, SsmLayout& l) {
  int inner = 0;
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "ssm.time_step_rank", 0, l.n_heads));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "ssm.group_count", 0, l.n_groups));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "ssm.state_size", 0, l.state_size));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "ssm.conv_kernel", 0, l.conv_kernel));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "ssm.inner_size", 0, inner));
  if (inner % l.n_heads != 0 || l.n_heads % l.n_groups != 0)
    return corrupt(g.path() + ": metadata '" + a + "ssm.inner_size' (" + std::to_string(inner) +
                   ") must be a multiple of ssm.time_step_rank (" + std::to_string(l.n_heads) +
                   " heads), itself a multiple of ssm.group_count (" + std::to_string(l.n_groups) + ")");
  l.head_dim = inner / l.n_heads;
  return Status::ok();
}

std::string gguf_qwen35_layer_name(const std::string& suffix) {
  static const std::map<std::string, std::string> kNames = {
      {"post_attention_norm.weight", "post_attention_layernorm.weight"},
      {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight"},
      {"attn_gate.weight", "linear_attn.in_proj_z.weight"},
      {"ssm_beta.weight", "linear_attn.in_proj_b.weight"},
      {"ssm_alpha.weight", "linear_attn.in_proj_a.weight"},
      {"ssm_ba.weight", "linear_attn.in_proj_ba.weight"},
      {"ssm_conv1d.weight", "linear_attn.conv1d.weight"},
      {"ssm_dt.bias", "linear_attn.dt_bias"},
      {"ssm_a", "linear_attn.A_log"},  // holding -exp(A_log)
      {"ssm_norm.weight", "linear_attn.norm.weight"},
      {"ssm_out.weight", "linear_attn.out_proj.weight"}};
  if (auto it = kNames.find(suffix); it != kNames.end()) return it->second;
  return gguf_moe_layer_name(suffix);  // the router, the experts, the shared expert and its gate
}

Status check_gguf_qwen35_tensors(const GgufFile& g, const ModelConfig& c) {
  std::set<std::string> names;
  for (const GgufTensorInfo& t : g.tensors()) names.insert(t.name);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (names.count(p + "ssm_in.weight") > 0)
      return unsupported(g.path() + ": tensor '" + p + "ssm_in.weight': Qwen3-Next's unsplit in_proj_qkvz (llama.cpp's "
                         "legacy layout) is not supported; convert the model again with a current llama.cpp");
    if (names.count(p + "ffn_gate_up_exps.weight") > 0)
      return unsupported(g.path() + ": tensor '" + p + "ffn_gate_up_exps.weight': experts with gate and up fused "
                         "(--fuse-gate-up-exps) are not supported; convert the model without that option");
  }
  return c.n_experts > 0 ? check_gguf_moe_tensors(g, c) : Status::ok();
}

}  // namespace brigade
