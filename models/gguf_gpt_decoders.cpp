#include "models/gguf_gpt_decoders.h"

#include <cmath>
#include <vector>

#include "models/gguf_classic_decoders.h"
#include "models/gpt_decoders_config.h"

namespace brigade {

bool is_gguf_gpt_decoder(const std::string& gguf_arch) {
  return gguf_arch == "gptneox" || gguf_arch == "gpt2" || gguf_arch == "starcoder" || gguf_arch == "falcon" ||
         gguf_arch == "bloom" || gguf_arch == "mpt";
}

namespace {

// llama.cpp's falcon: the attention and the MLP side by side, on attn_norm alone (Falcon-7B) or with
// attn_norm_2 (Falcon-40B's ln_attn, its attn_norm then being ln_mlp: parallel_mlp_norm); no biases;
// the exact GELU of FalconConfig's "gelu" (llama.cpp runs its tanh GELU).
void read_falcon(const GgufFile& g, ModelConfig& c) {
  c.arch = "falcon";
  c.mlp_activation = MlpActivation::gelu;
  c.parallel_blocks = true;
  c.parallel_mlp_norm = g.has_tensor("blk.0.attn_norm_2.weight");
}

// llama.cpp's mpt: ALiBi (attention.max_alibi_bias: 8, transformers' MptModel's; 0, no ALiBi, and
// other values refused as for config.json), attention.clamp_kqv as clip_qkv, LayerNorms with a
// weight only unless the file has their biases, the exact GELU (llama.cpp: tanh), and no q/k norms.
Status read_mpt(const GgufFile& g, ModelConfig& c) {
  c.arch = "mpt";
  c.mlp_activation = MlpActivation::gelu;
  c.norm_bias = g.has_tensor("blk.0.attn_norm.bias");
  BRIGADE_ASSIGN_OR_RETURN(const double bias_max, g.get_number_or("mpt.attention.max_alibi_bias", 0.0));
  if (bias_max != 8.0)
    return unsupported(g.path() + ": mpt.attention.max_alibi_bias " + std::to_string(bias_max) +
                       " is not supported (transformers' MptModel runs ALiBi with 8; a file without ALiBi has no positions "
                       "brigade runs)");
  BRIGADE_ASSIGN_OR_RETURN(const double clamp, g.get_number_or("mpt.attention.clamp_kqv", 0.0));
  if (clamp < 0.0 || !std::isfinite(clamp)) return corrupt(g.path() + ": mpt.attention.clamp_kqv must be a number >= 0");
  c.clip_qkv = static_cast<float>(clamp);
  for (const char* t : {"blk.0.attn_q_norm.weight", "blk.0.ffn_act.scales"})
    if (g.has_tensor(t))
      return unsupported(g.path() + ": tensor '" + t + "' (MPT's qk_ln / its activation scales) is not supported");
  // (llama.cpp takes BLOOM's slopes for every head count; transformers' MPT reorders them for a
  // count that is not a power of two, as brigade does from config.json.)
  c.alibi_slopes = mpt_alibi_slopes(c.n_heads, 8.0f);
  return Status::ok();
}

}  // namespace

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
  if (gguf_arch == "falcon") {
    read_falcon(g, c);
    return Status::ok();
  }
  if (gguf_arch == "mpt") return read_mpt(g, c);
  if (gguf_arch == "bloom") {  // llama.cpp's bloom: the embeddings' LayerNorm, ALiBi (8), bloom_gelu
    c.arch = "bloom";
    c.mlp_activation = MlpActivation::gelu_tanh;
    c.embed_norm = true;
    c.alibi_slopes = bloom_alibi_slopes(c.n_heads);
    if (!g.has_tensor("token_embd_norm.weight"))
      return corrupt(g.path() + ": tensor 'token_embd_norm.weight' is missing (bloom's word_embeddings_layernorm; "
                     "llama.cpp requires it too)");
    return Status::ok();
  }
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
  if (n == "token_embd_norm.weight" || n == "token_embd_norm.bias") return "model.embed_norm." + n.substr(16);  // bloom
  if (n.starts_with("blk.") && (n.ends_with(".attn_norm_2.weight") || n.ends_with(".attn_norm_2.bias"))) {
    const size_t dot = n.find('.', 4);  // falcon-40b's ln_attn, put in place by finish_gguf_gpt_decoder
    return "model.layers." + n.substr(4, dot - 4) + ".attn_norm_2." + n.substr(n.rfind('.') + 1);
  }
  if (n.starts_with("blk.") && n.ends_with(".attn_qkv.bias"))
    return "model.layers." + n.substr(4, n.size() - 4 - std::string(".attn_qkv.bias").size()) + ".self_attn.qkv_proj.bias";
  return gguf_classic_decoder_name(n);  // the norms', the MLP's and output's biases
}

Status finish_gguf_gpt_decoder(const GgufFile& g, std::map<std::string, RawTensor>& tensors, const ModelConfig& c) {
  // Falcon-40B's files: attn_norm is ln_mlp (the MLP's norm) and attn_norm_2 ln_attn (the attention's).
  for (int l = 0; c.arch == "falcon" && c.parallel_mlp_norm && l < c.n_layers; ++l) {
    const std::string layer = "model.layers." + std::to_string(l) + ".";
    for (const char* kind : {"weight", "bias"}) {
      auto attn = tensors.find(layer + "attn_norm_2." + kind);
      auto in = tensors.find(layer + "input_layernorm." + kind);
      if (attn == tensors.end() || in == tensors.end()) continue;  // (no biases: the decoder asks by name)
      RawTensor mlp = in->second, first = attn->second;
      tensors.erase(attn);
      tensors.erase(layer + "input_layernorm." + kind);
      mlp.name = layer + "post_attention_layernorm." + kind;
      first.name = layer + "input_layernorm." + kind;
      tensors.insert_or_assign(mlp.name, std::move(mlp));
      tensors.insert_or_assign(first.name, std::move(first));
    }
  }
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
