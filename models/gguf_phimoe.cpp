#include "models/gguf_phimoe.h"

#include <cmath>
#include <vector>

#include "models/gguf_moe.h"

namespace brigade {

bool is_gguf_phimoe(const std::string& gguf_arch) { return gguf_arch == "phimoe"; }

Status read_gguf_phimoe(const GgufFile& g, ModelConfig& c) {
  const std::string a = "phimoe.";
  c.arch = "phimoe";
  BRIGADE_RETURN_IF_ERROR(read_gguf_expert_counts(g, a, c));
  c.moe_intermediate_size = c.intermediate_size;  // llama.cpp sizes the experts by feed_forward_length
  c.moe_scoring = MoeScoring::softmax;
  c.norm_topk_prob = true;
  c.norm_bias = true;  // after RMSNorms: layer_norms stays false
  c.qkv_bias = g.has_tensor("blk.0.attn_q.bias");
  c.o_bias = true;
  c.lm_head_bias = g.has_tensor("output.bias");
  c.sliding_window = 0;
  BRIGADE_ASSIGN_OR_RETURN(const int64_t original, g.get_int_or(a + "rope.scaling.original_context_length", 0));
  BRIGADE_ASSIGN_OR_RETURN(const double factor, g.get_number_or(a + "rope.scaling.attn_factor", 1.0));
  if (original < 0 || original > INT32_MAX || !(factor > 0.0) || !std::isfinite(factor))
    return corrupt(g.path() + ": metadata '" + a + "rope.scaling.original_context_length' or 'rope.scaling.attn_factor' "
                   "is out of range");
  c.rope_scaling.original_max_position = static_cast<int>(original);
  c.rope_scaling.attention_factor = static_cast<float>(factor);  // longrope's, once its lists are read
  return Status::ok();
}

std::string gguf_phimoe_name(const std::string& n) {
  if (n == "output_norm.bias") return "model.norm.bias";
  if (n == "output.bias") return "lm_head.bias";
  const size_t dot = n.find('.', 4);
  if (!n.starts_with("blk.") || dot == std::string::npos) return "";
  const std::string layer = "model.layers." + n.substr(4, dot - 4) + ".", suffix = n.substr(dot + 1);
  if (suffix == "attn_norm.bias") return layer + "input_layernorm.bias";
  if (suffix == "ffn_norm.bias") return layer + "post_attention_layernorm.bias";
  return "";
}

bool is_gguf_longrope_factors(const std::string& n) {
  return n == "rope_factors_long.weight" || n == "rope_factors_short.weight";
}

Status read_gguf_longrope_factors(const GgufFile& g, const std::string& n, const RawTensor& t, ModelConfig& c) {
  const int64_t want = c.rope_dims() / 2;
  if (t.shape.size() != 1 || t.shape[0] != want)
    return corrupt(g.path() + ": tensor '" + n + "' has shape " + t.shape_string() + "; expected [" +
                   std::to_string(want) + "] (the rotated dims / 2)");
  std::vector<float> f(static_cast<size_t>(want));
  for (int64_t i = 0; i < want; ++i) {
    f[static_cast<size_t>(i)] = static_cast<float>(t.at(i));
    if (!std::isfinite(f[static_cast<size_t>(i)]) || f[static_cast<size_t>(i)] <= 0.0f)
      return corrupt(g.path() + ": tensor '" + n + "' holds a factor that is not a positive number");
  }
  (n == "rope_factors_long.weight" ? c.rope_scaling.long_factor : c.rope_scaling.short_factor) = std::move(f);
  return Status::ok();
}

Status finish_gguf_phimoe(const GgufFile& g, ModelConfig& c) {
  RopeScaling& s = c.rope_scaling;
  if (s.long_factor.empty() != s.short_factor.empty())
    return corrupt(g.path() + ": tensor 'rope_factors_long.weight' or 'rope_factors_short.weight' is missing (longrope "
                   "needs both)");
  if (s.long_factor.empty()) {
    if (s.attention_factor != 1.0f)
      return unsupported(g.path() + ": metadata 'phimoe.rope.scaling.attn_factor' other than 1 without longrope's "
                         "factors is not supported");
    s.attention_factor = 0.0f;
  } else {
    if (s.original_max_position <= 0)
      return corrupt(g.path() + ": metadata 'phimoe.rope.scaling.original_context_length' is missing (longrope needs it)");
    s.type = RopeScalingType::longrope;
    s.longrope_long = c.max_position > s.original_max_position;
  }
  return check_gguf_moe_tensors(g, c);
}

}  // namespace brigade
