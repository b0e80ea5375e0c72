#include "models/gguf_moe.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

namespace brigade {
Status read_gguf_count(const GgufFile& g, const std::string& key, int64_t fallback, int& out) {
  if (fallback == 0 && !g.find(key)) return corrupt(g.path() + ": metadata '" + key + "' is missing");
  BRIGADE_ASSIGN_OR_RETURN(int64_t v, g.get_int_or(key, fallback));
  if (v <= 0 || v > INT32_MAX) return corrupt(g.path() + ": metadata '" + key + "' is out of range");
  out = static_cast<int>(v);
  return Status::ok();
}

Status read_gguf_expert_counts(const GgufFile& g, const std::string& a, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_count", 0, c.n_experts));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_used_count", 0, c.n_experts_per_tok));
  if (c.n_experts_per_tok > c.n_experts)
    return corrupt(g.path() + ": metadata '" + a + "expert_used_count' (" + std::to_string(c.n_experts_per_tok) +
                   ") exceeds '" + a + "expert_count' (" + std::to_string(c.n_experts) + ")");
  return Status::ok();
}

Status read_gguf_expert_weights_scale(const GgufFile& g, const std::string& a, ModelConfig& c) {
  BRIGADE_ASSIGN_OR_RETURN(double scale, g.get_number_or(a + "expert_weights_scale", 0.0));
  if (!std::isfinite(scale) || scale < 0.0)
    return corrupt(g.path() + ": metadata '" + a + "expert_weights_scale' must be a number >= 0");
  c.routed_scaling_factor = scale == 0.0 ? 1.0f : static_cast<float>(scale);
  return Status::ok();
}

Status read_gguf_expert_groups(const GgufFile& g, const std::string& a, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_group_count", 1, c.n_group));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_group_used_count", 1, c.topk_group));
  if (c.n_experts % c.n_group != 0 || c.topk_group > c.n_group ||
      c.n_experts_per_tok > c.topk_group * (c.n_experts / c.n_group))
    return corrupt(g.path() + ": metadata '" + a + "expert_group_count' / 'expert_group_used_count' (" +
                   std::to_string(c.n_group) + ", " + std::to_string(c.topk_group) + ") do not fit " +
                   std::to_string(c.n_experts) + " experts, " + std::to_string(c.n_experts_per_tok) + " per token");
  c.moe_group_score = c.n_group > 1 ? MoeGroupScore::top2_sum : MoeGroupScore::none;
  return Status::ok();
}

Status read_gguf_shared_experts(const GgufFile& g, const std::string& a, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_feed_forward_length", 0, c.moe_intermediate_size));
  if (!g.find(a + "expert_shared_count")) return corrupt(g.path() + ": metadata '" + a + "expert_shared_count' is missing");
  BRIGADE_ASSIGN_OR_RETURN(int64_t shared, g.get_int(a + "expert_shared_count"));
  if (shared < 0 || shared > INT32_MAX / c.moe_intermediate_size)
    return corrupt(g.path() + ": metadata '" + a + "expert_shared_count' is out of range");
  c.n_shared_experts = static_cast<int>(shared);
  BRIGADE_ASSIGN_OR_RETURN(int64_t dense, g.get_int_or(a + "leading_dense_block_count", 0));
  if (dense < 0 || dense > c.n_layers)
    return corrupt(g.path() + ": metadata '" + a + "leading_dense_block_count' (" + std::to_string(dense) +
                   ") must be in [0, " + std::to_string(c.n_layers) + "]");
  c.first_k_dense_replace = static_cast<int>(dense);
  c.decoder_sparse_step = 1;
  c.mlp_only_layers.clear();
  return Status::ok();
}

Status read_gguf_sigmoid_gating(const GgufFile& g, const std::string& a, ModelConfig& c) {
  // llama.cpp's llama_expert_gating_func_type: 0 none (the key absent), 1 softmax, 2 sigmoid.
  constexpr int64_t kGatingNone = 0, kGatingSigmoid = 2;
  BRIGADE_ASSIGN_OR_RETURN(int64_t gating, g.get_int_or(a + "expert_gating_func", kGatingNone));
  if (gating != kGatingNone && gating != kGatingSigmoid)
    return unsupported(g.path() + ": metadata '" + a + "expert_gating_func' " + std::to_string(gating) +
                       " is not supported for " + a.substr(0, a.size() - 1) + "; supported: 2 (sigmoid)");
  c.moe_scoring = MoeScoring::sigmoid;
  return Status::ok();
}

Status read_gguf_deepseek_routing(const GgufFile& g, const std::string& a, ModelConfig& c) {
  c.moe_score_bias = g.has_tensor("blk." + std::to_string(c.first_k_dense_replace) + ".exp_probs_b.bias");
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_groups(g, a, c));
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_weights_scale(g, a, c));
  BRIGADE_ASSIGN_OR_RETURN(int64_t norm, g.get_int_or(a + "expert_weights_norm", 0));
  c.norm_topk_prob = norm != 0;
  return Status::ok();
}

namespace {

std::string dims_string(const std::vector<int64_t>& dims) {  // outermost first, as RawTensor shapes
  std::string s = "[";
  for (size_t i = dims.size(); i-- > 0;) s += std::to_string(dims[i]) + (i > 0 ? ", " : "");
  return s + "]";
}

// granitemoe (gguf_moe.h): its multipliers are read with dense granite's (gguf_checkpoint.cpp).
Status read_gguf_granite_moe(const GgufFile& g, const std::string& a, ModelConfig& c) {
  if (!g.find(a + "logit_scale"))
    return corrupt(g.path() + ": metadata '" + a + "logit_scale' is missing (llama.cpp's granitemoe requires it)");
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  c.moe_intermediate_size = c.intermediate_size;
  BRIGADE_ASSIGN_OR_RETURN(int64_t shared, g.get_int_or(a + "expert_shared_feed_forward_length", 0));
  if (shared < 0 || shared > INT32_MAX)
    return corrupt(g.path() + ": metadata '" + a + "expert_shared_feed_forward_length' is out of range");
  c.shared_expert_intermediate_size = static_cast<int>(shared);
  c.shared_gate = false;
  c.arch = shared > 0 ? "granitemoeshared" : "granitemoe";
  c.norm_topk_prob = true;
  c.decoder_sparse_step = 1;
  c.mlp_only_layers.clear();
  return Status::ok();
}

}  // namespace

bool is_gguf_moe(const std::string& gguf_arch) {
  return gguf_arch == "qwen3moe" || gguf_arch == "qwen2moe" || gguf_arch == "olmoe" || gguf_arch == "ernie4_5-moe" ||
         gguf_arch == "granitemoe";
}

Expected<bool> gguf_has_experts(const GgufFile& g, const std::string& gguf_arch) {
  const std::string key = gguf_arch + ".expert_count";
  if (!g.find(key)) return false;
  BRIGADE_ASSIGN_OR_RETURN(int64_t n, g.get_int(key));
  return n > 0;
}

Status read_gguf_moe(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c) {
  const std::string a = gguf_arch + ".";
  if (gguf_arch == "granitemoe") return read_gguf_granite_moe(g, a, c);
  const bool mixtral = gguf_arch == "llama", qwen2 = gguf_arch == "qwen2moe", olmoe = gguf_arch == "olmoe";
  c.arch = mixtral ? "mixtral" : qwen2 ? "qwen2_moe" : olmoe ? "olmoe" : "qwen3_moe";
  c.qk_norm = !mixtral && !qwen2;
  c.qk_norm_whole = olmoe;  // OLMoE's norms span the whole q and k projections
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  if (mixtral || olmoe)  // llama.cpp's llama and olmoe experts are feed_forward_length wide
    c.moe_intermediate_size = c.intermediate_size;
  else
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_feed_forward_length",
                                       std::max(1, c.intermediate_size / c.n_experts_per_tok), c.moe_intermediate_size));
  if (qwen2) {  // one shared expert, feed_forward_length wide unless the file says otherwise
    BRIGADE_RETURN_IF_ERROR(read_gguf_count(g, a + "expert_shared_feed_forward_length", c.intermediate_size,
                                       c.shared_expert_intermediate_size));
    c.shared_gate = true;
  }
  for (const char* shared : {"expert_shared_count", "expert_shared_feed_forward_length"}) {
    BRIGADE_ASSIGN_OR_RETURN(int64_t n, g.get_int_or(a + shared, 0));
    if (n != 0 && !qwen2)
      return unsupported(g.path() + ": metadata '" + a + shared + "' names shared experts, which " + gguf_arch +
                         " does not have (Qwen2-MoE's are in qwen2moe files)");
  }
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_weights_scale(g, a, c));
  c.norm_topk_prob = !qwen2 && !olmoe;  // llama.cpp's build_moe_ffn norm_w: false for qwen2moe and olmoe
  c.decoder_sparse_step = 1;
  c.mlp_only_layers.clear();
  return Status::ok();
}

std::string gguf_moe_layer_name(const std::string& suffix, bool gated_shared_expert) {
  static const std::map<std::string, std::string> kUngatedShared = {
      {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"},
      {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"},
      {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"}};
  if (auto it = kUngatedShared.find(suffix); !gated_shared_expert && it != kUngatedShared.end()) return it->second;
  static const std::map<std::string, std::string> kNames = {
      {"ffn_gate_inp.weight", "mlp.gate.weight"},
      {"ffn_gate_exps.weight", "mlp.experts.gate_proj"},
      {"ffn_up_exps.weight", "mlp.experts.up_proj"},
      {"ffn_down_exps.weight", "mlp.experts.down_proj"},
      {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"},  // qwen2moe
      {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
      {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
      {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"}};
  auto it = kNames.find(suffix);
  return it == kNames.end() ? "" : it->second;
}

Status check_gguf_moe_tensors(const GgufFile& g, const ModelConfig& c) {
  std::map<std::string, const GgufTensorInfo*> by_name;
  for (const GgufTensorInfo& t : g.tensors()) by_name[t.name] = &t;
  const int64_t hidden = c.hidden_size, inter = c.moe_intermediate_size, e = c.n_experts;
  // ggml dims, innermost first.
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
      {"ffn_gate_inp.weight", {hidden, e}},
      {"ffn_gate_exps.weight", {hidden, inter, e}},
      {"ffn_up_exps.weight", {hidden, inter, e}},
      {"ffn_down_exps.weight", {inter, hidden, e}}};
  for (int l = 0; l < c.n_layers; ++l) {
    if (!c.is_moe_layer(l)) continue;  // glm4moe's leading dense layers
    // llama.cpp's converter wrote Mixtral's experts one tensor each before it stacked them.
    if (const std::string old = "blk." + std::to_string(l) + ".ffn_gate.0.weight"; by_name.count(old) > 0)
      return unsupported(g.path() + ": tensor '" + old + "': experts stored one tensor each (llama.cpp's layout "
                         "before ffn_gate_exps) are not supported; convert the model again with a current llama.cpp");
    for (const auto& [suffix, dims] : want) {
      const std::string name = "blk." + std::to_string(l) + "." + suffix;
      auto it = by_name.find(name);
      if (it == by_name.end())
        return corrupt(g.path() + ": tensor '" + name + "' is missing (every " + c.arch + " layer has its experts)");
      if (it->second->dims != dims)
        return corrupt(g.path() + ": tensor '" + name + "' has shape " + dims_string(it->second->dims) + "; expected " +
                       dims_string(dims) + " from expert_count " + std::to_string(e) + ", embedding_length " +
                       std::to_string(hidden) + " and expert_feed_forward_length " + std::to_string(inter));
    }
  }
  return Status::ok();
}

}  // namespace brigade
