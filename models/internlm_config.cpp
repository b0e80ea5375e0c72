#include "models/internlm_config.h"

#include <utility>

#include "models/config_json.h"
#include "models/fused_rows.h"

namespace brigade {

using nlohmann::json;

Status read_internlm(const json& j, ModelConfig& c) {
  std::string act = "silu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act != "silu") return unsupported("config.json: hidden_act '" + act + "' is not supported for " + c.arch + "; supported: silu");
  c.sliding_window = 0;
  if (c.arch == "internlm2") {
    if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null())
      return unsupported("config.json: quantization_config is not supported for internlm2 (its wqkv, fused per KV "
                         "group, is split at load, and packed or scaled weights would not follow the split)");
    bool bias = true;  // InternLM2Config's default
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "bias", bias));
    c.qkv_bias = c.o_bias = bias;
    return Status::ok();
  }
  bool qkv_bias = false, bias = false;  // InternLM3Config's defaults
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "qkv_bias", qkv_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "bias", bias));
  c.qkv_bias = qkv_bias;
  c.o_bias = c.mlp_bias = bias;
  return Status::ok();
}

namespace {

// The language model's prefix of an internlm2 tensor name ("" or InternVLChatModel's
// "language_model."), or nullptr for a tensor outside it (the vision tower, the projector).
const char* llm_prefix(const std::string& name) {
  if (name.starts_with("model.") || name == "output.weight") return "";
  if (name.starts_with("language_model.")) return "language_model.";
  return nullptr;
}

}  // namespace

Expected<std::map<std::string, RawTensor>> internlm2_tensors(const ModelConfig& c,
                                                             std::map<std::string, RawTensor> tensors,
                                                             std::vector<std::vector<uint8_t>>& arena) {
  static const std::pair<const char*, const char*> kRenames[] = {
      {"model.tok_embeddings.", "model.embed_tokens."},
      {".attention.wo.", ".self_attn.o_proj."},
      {".attention_norm.", ".input_layernorm."},
      {".ffn_norm.", ".post_attention_layernorm."},
      {".feed_forward.w1.", ".mlp.gate_proj."},
      {".feed_forward.w3.", ".mlp.up_proj."},
      {".feed_forward.w2.", ".mlp.down_proj."}};
  const int64_t hd = c.head_dim, groups = c.n_kv_heads;
  const int64_t per_group = groups > 0 ? c.n_heads / groups : 0;
  const auto parts = qkv_rows_per_kv_group(groups, per_group, hd);  // wqkv's rows [groups, per_group + 2, head_dim]
  std::map<std::string, RawTensor> out;
  for (auto& [stored, t] : tensors) {
    const char* prefix = llm_prefix(stored);
    if (prefix == nullptr) {
      out.insert_or_assign(stored, std::move(t));
      continue;
    }
    std::string name = stored;
    if (name.substr(std::string(prefix).size()) == "output.weight") name = std::string(prefix) + "lm_head.weight";
    name = renamed(std::move(name), kRenames);
    const size_t fused = name.find(".attention.wqkv.");
    if (fused == std::string::npos) {
      t.name = name;
      out.insert_or_assign(name, std::move(t));
      continue;
    }
    const bool weight = name.ends_with(".weight");
    const int64_t rows = groups * (per_group + 2) * hd;
    const std::vector<int64_t> want = weight ? std::vector<int64_t>{rows, c.hidden_size} : std::vector<int64_t>{rows};
    const bool float_type = is_float_tensor(t);
    if (t.shape != want || !float_type || per_group * groups != c.n_heads) {
      RawTensor w;
      w.shape = want;
      return corrupt(t.file + ": tensor '" + stored + "' is " + t.type_name() + " " + t.shape_string() +
                     "; internlm2 needs a float tensor " + w.shape_string() + " (wqkv: " + std::to_string(groups) +
                     " KV groups of " + std::to_string(per_group) + " query heads, a k and a v head of " +
                     std::to_string(hd) + ")");
    }
    static constexpr const char* kParts[] = {"q_proj", "k_proj", "v_proj"};
    const std::string head = name.substr(0, fused) + ".self_attn.", tail = name.substr(fused + 16);
    for (size_t p = 0; p < 3; ++p) {
      const std::string part = head + kParts[p] + "." + tail;
      out.insert_or_assign(part, take_rows(t, parts[p], part, arena));
    }
  }
  return out;
}

}  // namespace brigade
