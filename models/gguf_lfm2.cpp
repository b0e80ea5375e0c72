#include "models/gguf_lfm2.h"

#include <cmath>
#include <map>
#include <set>

#include "models/gguf_moe.h"

namespace brigade {

bool is_gguf_lfm2(const std::string& gguf_arch) { return gguf_arch == "lfm2" || gguf_arch == "lfm2moe"; }

Status read_gguf_lfm2(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c) {
  const std::string a = gguf_arch + ".";
  const bool moe = gguf_arch == "lfm2moe";
  c.arch = moe ? "lfm2_moe" : "lfm2";
  // Which blocks are short convs: those without KV heads. The attention blocks' count is the
  // model's n_kv_heads (llama.cpp's converter writes it per block; a scalar means no conv block).
  const GgufValue* kv = g.find(a + "attention.head_count_kv");
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), false);
  if (kv == nullptr) return corrupt(g.path() + ": metadata '" + a + "attention.head_count_kv' is missing");
  if (kv->type == GgufType::array) {
    if (kv->numbers.size() != static_cast<size_t>(c.n_layers))
      return corrupt(g.path() + ": metadata '" + a + "attention.head_count_kv' must hold one count per block (" +
                     std::to_string(c.n_layers) + ")");
    c.n_kv_heads = 0;
    for (int l = 0; l < c.n_layers; ++l) {
      const double n = kv->numbers[static_cast<size_t>(l)];
      if (n == 0.0) {
        c.ssm_layers[static_cast<size_t>(l)] = true;
        continue;
      }
      if (!(n > 0.0) || n > c.n_heads || n != std::floor(n) || (c.n_kv_heads > 0 && n != c.n_kv_heads))
        return corrupt(g.path() + ": metadata '" + a + "attention.head_count_kv' holds " + std::to_string(n) +
                       " for block " + std::to_string(l) + "; the attention blocks share one count of at most " +
                       std::to_string(c.n_heads));
      c.n_kv_heads = static_cast<int>(n);
    }
    if (c.n_kv_heads == 0) c.n_kv_heads = c.n_heads;  // no attention block: a count for the unused shape
  } else {
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "attention.head_count_kv", 0, c.n_kv_heads));
  }
  if (const GgufValue* w = g.find(a + "attention.sliding_window"); w != nullptr && w->integer > 0)
    return unsupported(g.path() + ": " + a + "attention.sliding_window: LFM2 with a sliding window is not supported");
  int kernel = 0;
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "shortconv.l_cache", 0, kernel));
  c.ssm.layout = SsmLayout{.n_heads = c.hidden_size, .head_dim = 1, .n_groups = 1, .state_size = 0, .conv_kernel = kernel};
  c.ssm.short_conv = true;
  c.ssm.conv_bias = c.ssm.proj_bias = false;
  c.ssm.gated_norm = false;
  c.qk_norm = true;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (!moe) return Status::ok();
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_feed_forward_length", 0, c.moe_intermediate_size));
  BRIGADE_ASSIGN_OR_RETURN(const int64_t dense, g.get_int_or(a + "leading_dense_block_count", 0));
  if (dense < 0 || dense > c.n_layers)
    return corrupt(g.path() + ": metadata '" + a + "leading_dense_block_count' (" + std::to_string(dense) +
                   ") must be within [0, block_count]");
  // llama.cpp's gating function ids: 1 softmax, 2 sigmoid (LFM2-MoE's).
  BRIGADE_ASSIGN_OR_RETURN(const int64_t gating, g.get_int_or(a + "expert_gating_func", 2));
  if (gating != 2)
    return unsupported(g.path() + ": " + a + "expert_gating_func " + std::to_string(gating) +
                       " is not supported for lfm2moe (2: sigmoid)");
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_weights_scale(g, a, c));
  c.first_k_dense_replace = static_cast<int>(dense);
  c.decoder_sparse_step = 1;
  c.moe_scoring = MoeScoring::sigmoid;
  c.moe_score_bias = true;  // exp_probs_b, which llama.cpp requires
  c.norm_topk_prob = true;  // build_moe_ffn's norm_w for lfm2moe
  return Status::ok();
}

std::string gguf_lfm2_layer_name(const std::string& suffix) {
  static const std::map<std::string, std::string> kNames = {
      {"attn_norm.weight", "operator_norm.weight"},
      {"ffn_norm.weight", "ffn_norm.weight"},
      {"shortconv.conv.weight", "conv.conv.weight"},
      {"shortconv.in_proj.weight", "conv.in_proj.weight"},
      {"shortconv.out_proj.weight", "conv.out_proj.weight"},
      {"attn_output.weight", "self_attn.out_proj.weight"},
      {"attn_q_norm.weight", "self_attn.q_layernorm.weight"},
      {"attn_k_norm.weight", "self_attn.k_layernorm.weight"},
      {"ffn_gate.weight", "feed_forward.w1.weight"},
      {"ffn_up.weight", "feed_forward.w3.weight"},
      {"ffn_down.weight", "feed_forward.w2.weight"},
      {"ffn_gate_inp.weight", "feed_forward.gate.weight"},
      {"exp_probs_b.bias", "feed_forward.expert_bias"},
      {"ffn_gate_exps.weight", "feed_forward.experts.gate_proj"},
      {"ffn_up_exps.weight", "feed_forward.experts.up_proj"},
      {"ffn_down_exps.weight", "feed_forward.experts.down_proj"}};
  auto it = kNames.find(suffix);
  return it == kNames.end() ? "" : it->second;
}

std::string gguf_lfm2_top_name(const std::string& name) {
  return name == "token_embd_norm.weight" ? "model.embedding_norm.weight" : "";
}

Status check_gguf_lfm2_tensors(const GgufFile& g, const ModelConfig& c) {
  std::set<std::string> names;
  for (const GgufTensorInfo& t : g.tensors()) names.insert(t.name);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string qkv = "blk." + std::to_string(l) + ".attn_qkv.weight";
    if (names.count(qkv) > 0)
      return unsupported(g.path() + ": tensor '" + qkv + "': LFM2 attention with q|k|v fused is not supported; convert "
                         "the model without fusing them");
  }
  return c.n_experts > 0 ? check_gguf_moe_tensors(g, c) : Status::ok();
}

}  // namespace brigade
