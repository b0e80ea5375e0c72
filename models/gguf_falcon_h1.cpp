#include "models/gguf_falcon_h1.h"

#include <cmath>

#include "models/gguf_mamba.h"
#include "models/gguf_qwen35.h"

namespace brigade {

bool is_gguf_falcon_h1(const std::string& gguf_arch) { return gguf_arch == "falcon-h1"; }

Status read_gguf_falcon_h1(const GgufFile& g, ModelConfig& c) {
  const std::string a = "falcon-h1.";
  c.arch = "falcon_h1";
  c.parallel_attention = true;
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), true);
  BRIGADE_RETURN_IF_ERROR(read_gguf_ssm_layout(g, a, c.ssm.layout));
  c.ssm.proj_bias = false;
  c.ssm.dt_min = c.ssm.dt_max = 0.0f;  // time_step_limit (0, inf): unclamped, as llama.cpp runs it
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return Status::ok();
}

std::string gguf_falcon_h1_layer_name(const std::string& suffix) {
  static const std::map<std::string, std::string> kNames = {
      {"ffn_norm", "pre_ff_layernorm.weight"},  // (llama.cpp's loader asks for it without .weight)
      {"ffn_norm.weight", "pre_ff_layernorm.weight"},
      {"ffn_gate.weight", "feed_forward.gate_proj.weight"},
      {"ffn_up.weight", "feed_forward.up_proj.weight"},
      {"ffn_down.weight", "feed_forward.down_proj.weight"},
      {"ssm_in.bias", "mamba.in_proj.bias"},  // (refused by finish_gguf_falcon_h1)
      {"ssm_out.bias", "mamba.out_proj.bias"}};
  if (const std::string mixer = gguf_mamba2_mixer_name(suffix); !mixer.empty()) return "mamba." + mixer;  // ssm_a holds A
  auto it = kNames.find(suffix);
  return it == kNames.end() ? "" : it->second;
}

std::string gguf_falcon_h1_top_name(const std::string& name) {
  return name == "output_norm.weight" ? "model.final_layernorm.weight" : "";
}

Status finish_gguf_falcon_h1(const GgufFile& g, std::map<std::string, RawTensor>& tensors, ModelConfig& c) {
  reshape_gguf_mixer_tensors(tensors, /*a_matrix=*/false);
  // The optional pieces, as block 0 has them (every block alike, or the load names the missing one).
  c.ssm.conv_bias = tensors.count("model.layers.0.mamba.conv1d.bias") > 0;
  c.ssm.gated_norm = tensors.count("model.layers.0.mamba.norm.weight") > 0;
  if (tensors.count("model.layers.0.mamba.out_proj.bias") > 0 || tensors.count("model.layers.0.mamba.in_proj.bias") > 0)
    return unsupported(g.path() + ": falcon-h1 projection biases are not read (llama.cpp's loader has none)");
  return Status::ok();
}

}  // namespace brigade
