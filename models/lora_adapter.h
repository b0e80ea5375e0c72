// LoraAdapter: a PEFT LoRA adapter read from disk and checked against a base model's config
// (docs/architecture.md "LoRA adapters"). A directory holds adapter_config.json and
// adapter_model.safetensors with, per targeted projection of layer N,
//   base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight  [r, in]
//   base_model.model.model.layers.N.self_attn.q_proj.lora_B.weight  [out, r]
// The adapter's output for input x is scale * B (A x), scale = lora_alpha / r, or
// lora_alpha / sqrt(r) with use_rslora. Targets: q_proj, k_proj, v_proj, o_proj (self_attn.),
// gate_proj, up_proj, down_proj (mlp.) of a Llama-family decoder, in every layer.
// What PEFT can express and brigade does not run (regex target_modules, DoRA, biases,
// modules_to_save, per-layer ranks) is refused with the reason.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/model_config.h"

namespace brigade {

// One adapter to serve: a request names it by `name` (vLLM's --lora-modules name=path).
struct LoraModule {
  std::string name;
  std::string path;  // the adapter's directory
};

enum class LoraTarget : int { q, k, v, o, gate, up, down };
constexpr int kLoraTargets = 7;
const char* lora_target_name(LoraTarget t);  // "q_proj"

// adapter_config.json, what brigade reads of it.
struct LoraAdapterConfig {
  int r = 0;
  float alpha = 0.0f;
  bool use_rslora = false;
  std::array<bool, kLoraTargets> targets{};  // by LoraTarget
  std::string base_model;                     // base_model_name_or_path (informational)
  float scale() const;                        // alpha / r, or alpha / sqrt(r) with use_rslora
};

// Parses and checks adapter_config.json's text; `where` names the file in errors.
Expected<LoraAdapterConfig> parse_lora_config(const std::string& json_text, const std::string& where);

// One projection's pair, f32 on the host: a [r, in], b [out, r] (unscaled, as stored).
struct LoraPair {
  std::vector<float> a, b;
  int64_t in = 0, out = 0;
  bool empty() const { return a.empty(); }
};

struct LoraAdapter {
  std::string name;
  LoraAdapterConfig config;
  // layers[l][t]: the pair of target t in layer l; empty where the adapter does not target t.
  std::vector<std::array<LoraPair, kLoraTargets>> layers;
};

// Reads module.path against the base model `base`: every tensor's layer, projection and shape
// are checked, every targeted projection of every layer must have both A and B, and r must
// not exceed max_rank (vLLM's --max-lora-rank). Errors name the adapter, the file and the tensor.
Expected<LoraAdapter> read_lora_adapter(const LoraModule& module, const ModelConfig& base, int max_rank);

// "name=path" (vLLM's --lora-modules syntax) or its JSON form {"name": ..., "path": ...}
// (vLLM also names the key lora_path; base_model_name is accepted and ignored).
Expected<LoraModule> parse_lora_module(const std::string& spec);

// The [out, in] of target t's weight in the base model.
std::pair<int64_t, int64_t> lora_target_shape(const ModelConfig& base, LoraTarget t);

}  // namespace brigade
