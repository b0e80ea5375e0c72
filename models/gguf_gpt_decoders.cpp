#include "models/gguf_gpt_decoders.h"

#include <cmath>
#include <vector>

#include "models/gguf_classic_decoders.h"

namespace brigade {

bool is_gguf_gpt_decoder(const std::string& gguf_arch) {
  return gguf_arch == "gptneox" || gguf_arch == "gpt2" || gguf_arch == "starcoder";
}

Status read_gguf_gpt_decoder(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c) {
  const std::string a = gguf_arch + ".";
  BRIGADE_ASSIGN_OR_RETURN(const double eps, g.get_number(a + "attention.layer_norm_epsilon"));
  if (!(eps > 0.0) || !std::isfinite(eps))
    return corrupt(g.path() + ": metadata '" + a + "attention.layer_norm_epsilon' must be a positive number");
  c.rms_eps = static_cast<float>(eps);
  c.layer_norms = c.norm_bias = true;
  c.mlp_ungated = true;
  c.mlp_bias = g.has_tensor("blk.0.ffn_up.bias");
  c.qkv_bias = g.has_tensor("blk.0.attn_qkv.bias") || g.has_tensor("blk.0.attn_q.bias");
  c.o_bias = g.has_tensor("blk.0.attn_output.bias");
  c.sliding_window = 0;
  if (gguf_arch == "gptneox") {
    c.arch = "gpt_neox";
    c.mlp_activation = MlpActivation::gelu;
    const std::string key = a + "use_parallel_residual";
    const GgufValue* par = g.find(key);
    if (par == nullptr) return corrupt(g.path() + ": metadata '" + key + "' is missing (llama.cpp requires it too)");
    c.parallel_blocks = c.parallel_mlp_norm = par->integer != 0;
    return Status::ok();
  }
  c.arch = gguf_arch == "gpt2" ? "gpt2" : "gpt_bigcode";
  c.mlp_activation = MlpActivation::gelu_tanh;
  c.learned_positions = true;
  return Status::ok();
}

std::string gguf_gpt_decoder_name(const std::string& n) {
  if (n == "position_embd.weight") return "model.embed_positions.weight";
  if (n.starts_with("blk.") && n.ends_with(".attn_qkv.bias"))
    return "model.layers." + n.substr(4, n.size() - 4 - std::string(".attn_qkv.bias").size()) + ".self_attn.qkv_proj.bias";
  return gguf_classic_decoder_name(n);  // the norms', the MLP's and output's biases
}

Status finish_gguf_gpt_decoder(const GgufFile& g, std::map<std::string, RawTensor>& tensors, const ModelConfig& c) {
  const int64_t q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
  const std::vector<std::pair<const char*, std::pair<int64_t, int64_t>>> parts = {
      {"q_proj", {0, q}}, {"k_proj", {q, kv}}, {"v_proj", {q + kv, kv}}};
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string layer = "model.layers." + std::to_string(l) + ".self_attn.";
    for (const char* kind : {"weight", "bias"}) {
      auto it = tensors.find(layer + "qkv_proj." + kind);
      if (it == tensors.end()) continue;  // separate attn_q / attn_k / attn_v, or no bias
      const RawTensor t = it->second;
      tensors.erase(it);
      const bool weight = std::string(kind) == "weight";
      if (t.shape.empty() || t.shape[0] != q + 2 * kv || (weight && t.shape.size() != 2) || (!weight && t.shape.size() != 1))
        return corrupt(g.path() + ": tensor 'blk." + std::to_string(l) + ".attn_qkv." + kind + "' has shape " +
                       t.shape_string() + "; " + std::to_string(c.n_heads) + " q and " + std::to_string(c.n_kv_heads) +
                       " k/v heads of " + std::to_string(c.head_dim) + " need " + std::to_string(q + 2 * kv) + " rows");
      const size_t row = t.row_bytes(weight ? t.shape[1] : 1);
      for (const auto& [name, range] : parts) {
        RawTensor p = t;
        p.name = layer + name + "." + kind;
        p.shape[0] = range.second;
        p.bytes = t.bytes.subspan(static_cast<size_t>(range.first) * row, static_cast<size_t>(range.second) * row);
        tensors.insert_or_assign(p.name, std::move(p));
      }
    }
  }
  return Status::ok();
}

}  // namespace brigade
