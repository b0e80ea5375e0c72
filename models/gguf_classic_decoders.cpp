#include "models/gguf_classic_decoders.h"

#include <cmath>
#include <map>

namespace brigade {
namespace {

// attention.layer_norm_epsilon: what llama.cpp's LayerNorm architectures read (f_norm_eps).
Status read_layer_norm_eps(const GgufFile& g, const std::string& a, ModelConfig& c) {
  BRIGADE_ASSIGN_OR_RETURN(const double eps, g.get_number(a + "attention.layer_norm_epsilon"));
  if (!(eps > 0.0) || !std::isfinite(eps))
    return corrupt(g.path() + ": metadata '" + a + "attention.layer_norm_epsilon' must be a positive number");
  c.layer_norms = c.norm_bias = true;
  c.rms_eps = static_cast<float>(eps);
  return Status::ok();
}

}  // namespace

bool is_gguf_classic_decoder(const std::string& gguf_arch) {
  return gguf_arch == "gemma" || gguf_arch == "starcoder2" || gguf_arch == "phi2" || gguf_arch == "stablelm" ||
         gguf_arch == "jais2" || gguf_arch == "nemotron" || gguf_arch == "exaone";
}

Status read_gguf_classic_decoder(const GgufFile& g, const std::string& gguf_arch, ModelConfig& c) {
  const std::string a = gguf_arch + ".";
  if (g.has_tensor("blk.0.attn_qkv.weight"))
    return unsupported(g.path() + ": a fused attn_qkv is not supported for " + gguf_arch +
                       " GGUF files; convert the checkpoint with a current convert_hf_to_gguf.py (attn_q, attn_k, attn_v)");
  c.qkv_bias = g.has_tensor("blk.0.attn_q.bias");
  c.o_bias = g.has_tensor("blk.0.attn_output.bias");
  c.sliding_window = 0;
  if (gguf_arch == "exaone") {  // llama's layer; llama3 scaling as rope_freqs (read_config)
    c.arch = "exaone";
    return Status::ok();
  }
  if (gguf_arch == "gemma") {
    c.arch = "gemma";
    c.mlp_activation = MlpActivation::gelu_tanh;
    c.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));
    return Status::ok();
  }
  BRIGADE_RETURN_IF_ERROR(read_layer_norm_eps(g, a, c));
  if (gguf_arch == "stablelm") {
    c.arch = "stablelm";
    c.qk_norm = g.has_tensor("blk.0.attn_q_norm.weight");
    c.parallel_blocks = !g.has_tensor("blk.0.ffn_norm.weight");
    return Status::ok();
  }
  c.mlp_bias = g.has_tensor("blk.0.ffn_up.bias");
  c.mlp_ungated = true;
  if (gguf_arch == "jais2" || gguf_arch == "nemotron") {  // Nemotron's norms stored as 1 + w: no offset
    c.arch = gguf_arch;
    c.mlp_activation = MlpActivation::relu2;
    return Status::ok();
  }
  c.arch = gguf_arch == "phi2" ? "phi" : "starcoder2";
  c.mlp_activation = MlpActivation::gelu_tanh;
  c.parallel_blocks = gguf_arch == "phi2";
  c.lm_head_bias = g.has_tensor("output.bias");
  return Status::ok();
}

std::string gguf_classic_decoder_name(const std::string& n) {
  if (n == "output_norm.bias") return "model.norm.bias";
  if (n == "output.bias") return "lm_head.bias";
  static const std::map<std::string, std::string> kLayer = {{"attn_norm.bias", "input_layernorm.bias"},
                                                            {"ffn_norm.bias", "post_attention_layernorm.bias"},
                                                            {"ffn_up.bias", "mlp.up_proj.bias"},
                                                            {"ffn_down.bias", "mlp.down_proj.bias"}};
  const size_t dot = n.find('.', 4);
  if (!n.starts_with("blk.") || dot == std::string::npos) return "";
  auto it = kLayer.find(n.substr(dot + 1));
  return it == kLayer.end() ? "" : "model.layers." + n.substr(4, dot - 4) + "." + it->second;
}

}  // namespace brigade
