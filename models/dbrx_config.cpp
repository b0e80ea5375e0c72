#include "models/dbrx_config.h"

#include <cmath>
#include <utility>
#include <vector>

#include "models/config_json.h"
#include "models/fused_rows.h"

namespace brigade {

using nlohmann::json;

bool is_dbrx(const json& j) {
  return config_names_class(j, {"DbrxForCausalLM"}, {"dbrx"});
}

namespace {

// config.json's sub-object `key` (attn_config, ffn_config), or an empty one where absent or not an object
// (read_dbrx refuses the latter).
const json& sub(const json& j, const char* key) {
  static const json kEmpty = json::object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}

}  // namespace

void apply_dbrx_config_names(json& j) {
  if (!j.is_object() || !is_dbrx(j)) return;
  const json attn = sub(j, "attn_config"), ffn = sub(j, "ffn_config");  // copies: j changes below
  // Each DBRX field under the common name, where that is absent: its value, else DbrxConfig's default.
  auto copy = [&](const json& from, const char* hub, const json& fallback, const char* ours) {
    if (j.contains(ours)) return;
    auto it = from.find(hub);
    j[ours] = it != from.end() ? *it : fallback;
  };
  copy(j, "d_model", 2048, "hidden_size");
  copy(j, "n_heads", 16, "num_attention_heads");
  copy(j, "n_layers", 24, "num_hidden_layers");
  copy(j, "max_seq_len", 2048, "max_position_embeddings");
  copy(attn, "kv_n_heads", 1, "num_key_value_heads");
  copy(ffn, "ffn_hidden_size", 3584, "intermediate_size");
  if (!j.contains("vocab_size")) j["vocab_size"] = 32000;
  // The trained base wins over rope_parameters (above: transformers 5 drops attn_config.rope_theta).
  if (auto theta = attn.find("rope_theta"); theta != attn.end()) {
    j["rope_theta"] = *theta;
    if (auto p = j.find("rope_parameters"); p != j.end() && p->is_object()) (*p)["rope_theta"] = *theta;
  }
}

Status read_dbrx(const json& j, ModelConfig& c) {
  for (const char* key : {"attn_config", "ffn_config"})
    if (auto it = j.find(key); it != j.end() && !it->is_null() && !it->is_object())
      return corrupt(std::string("config.json: ") + key + " must be an object");
  const json& attn = sub(j, "attn_config");
  const json& ffn = sub(j, "ffn_config");
  if (c.tie_embeddings) return unsupported("config.json: tie_word_embeddings is not part of dbrx (DbrxConfig refuses it)");
  if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null())
    return unsupported("config.json: quantization_config is not supported for dbrx (its fused Wqkv and experts are "
                       "split at load, which a quantized checkpoint's scales do not follow); use its bf16 weights");
  c.layer_norms = true;  // nn.LayerNorm(d_model, bias=False)
  c.rms_eps = 1e-5f;
  c.qkv_bias = c.o_bias = false;
  c.sliding_window = 0;
  if (auto clip = attn.find("clip_qkv"); clip != attn.end() && !clip->is_null()) {
    if (!clip->is_number() || !(clip->get<double>() > 0.0) || !std::isfinite(clip->get<double>()))
      return invalid_argument("config.json: attn_config.clip_qkv must be a positive number or null, not " + clip->dump());
    c.clip_qkv = clip->get<float>();
  }
  std::string act = "silu";
  if (auto fn = ffn.find("ffn_act_fn"); fn != ffn.end() && !fn->is_null()) {
    auto name = fn->is_object() ? fn->find("name") : fn->end();
    if (!fn->is_object() || name == fn->end() || !name->is_string())
      return corrupt("config.json: ffn_config.ffn_act_fn must be an object with a string 'name'");
    act = name->get<std::string>();
    if (fn->size() > 1)
      return unsupported("config.json: ffn_config.ffn_act_fn " + fn->dump() +
                         " carries arguments, which dbrx here does not take; supported: {\"name\": \"silu\"}");
  }
  if (act != "silu")
    return unsupported("config.json: ffn_config.ffn_act_fn '" + act + "' is not supported for dbrx; supported: silu");
  c.n_experts = 4;
  c.n_experts_per_tok = 1;
  BRIGADE_RETURN_IF_ERROR(read_int(ffn, "moe_num_experts", c.n_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(ffn, "moe_top_k", c.n_experts_per_tok, false));
  c.moe_intermediate_size = c.intermediate_size;
  c.norm_topk_prob = true;  // moe_normalize_expert_weights 1 (the default): the top k over their sum
  if (auto p = ffn.find("moe_normalize_expert_weights"); p != ffn.end()) {
    if (p->is_null()) {
      c.norm_topk_prob = false;
    } else if (!p->is_number() || p->get<double>() != 1.0) {
      return unsupported("config.json: ffn_config.moe_normalize_expert_weights " + p->dump() +
                         " is not supported for dbrx; supported: 1 (the top k weights over their sum) or null");
    }
  }
  if (c.n_experts < 1 || c.n_experts_per_tok < 1 || c.n_experts_per_tok > c.n_experts)
    return invalid_argument("config.json: ffn_config needs 1 <= moe_top_k (" + std::to_string(c.n_experts_per_tok) +
                            ") <= moe_num_experts (" + std::to_string(c.n_experts) + ")");
  c.first_k_dense_replace = 0;
  c.decoder_sparse_step = 1;
  return Status::ok();
}

namespace {

// The rows [row0, row0 + rows) of a row-major float tensor t [.., cols], as a tensor of its own.
RawTensor rows_of(const RawTensor& t, std::string name, int64_t row0, std::vector<int64_t> shape) {
  RawTensor v = t;
  v.name = std::move(name);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const size_t row = static_cast<size_t>(t.shape.back()) * dtype_size(t.dtype);
  v.bytes = t.bytes.subspan(static_cast<size_t>(row0) * row, static_cast<size_t>(n / t.shape.back()) * row);
  v.shape = std::move(shape);
  return v;
}

}  // namespace

Expected<std::map<std::string, RawTensor>> dbrx_tensors(const ModelConfig& c, std::map<std::string, RawTensor> tensors) {
  const int64_t hidden = c.hidden_size, q = int64_t{c.n_heads} * c.head_dim, kv = int64_t{c.n_kv_heads} * c.head_dim;
  const int64_t experts = c.n_experts, inter = c.moe_intermediate_size;
  static const std::pair<const char*, const char*> kRenames[] = {
      {"transformer.wte.", "model.embed_tokens."},
      {"transformer.norm_f.", "model.norm."},
      {"transformer.blocks.", "model.layers."},
      {".norm_attn_norm.norm_1.", ".input_layernorm."},
      {".norm_attn_norm.norm_2.", ".post_attention_layernorm."},
      {".norm_attn_norm.attn.out_proj.", ".self_attn.o_proj."},
      {".ffn.router.layer.", ".mlp.gate."}};
  std::map<std::string, RawTensor> out;
  for (auto& [stored, t] : tensors) {
    std::string name = stored;
    name = renamed(std::move(name), kRenames);
    const bool float_type = is_float_tensor(t);
    auto expect = [&](std::vector<int64_t> shape) -> Status {
      if (float_type && t.shape == shape) return Status::ok();
      RawTensor want;
      want.shape = std::move(shape);
      return corrupt(t.file + ": tensor '" + stored + "' is " + t.type_name() + " " + t.shape_string() +
                     "; dbrx needs a float tensor " + want.shape_string());
    };
    if (const size_t at = name.find(".norm_attn_norm.attn.Wqkv.weight"); at != std::string::npos) {
      BRIGADE_RETURN_IF_ERROR(expect({q + 2 * kv, hidden}));
      const std::string attn = name.substr(0, at) + ".self_attn.";
      out.emplace(attn + "q_proj.weight", rows_of(t, attn + "q_proj.weight", 0, {q, hidden}));
      out.emplace(attn + "k_proj.weight", rows_of(t, attn + "k_proj.weight", q, {kv, hidden}));
      out.emplace(attn + "v_proj.weight", rows_of(t, attn + "v_proj.weight", q + kv, {kv, hidden}));
      continue;
    }
    const size_t at = name.find(".ffn.experts.mlp.");
    if (at == std::string::npos) {
      t.name = name;
      out.emplace(name, std::move(t));
      continue;
    }
    const std::string mlp = name.substr(0, at) + ".mlp.experts.", part = name.substr(at + 17);
    BRIGADE_RETURN_IF_ERROR(expect({experts * inter, hidden}));
    if (part == "w2") {  // each expert's [F, hidden]: its down_proj transposed (x · w2)
      RawTensor stack = t;
      stack.name = mlp + "down_proj";
      stack.shape = {experts, inter, hidden};
      out.emplace(stack.name, std::move(stack));
      continue;
    }
    if (part != "w1" && part != "v1") return corrupt(t.file + ": tensor '" + stored + "' is not part of dbrx's experts");
    for (int64_t e = 0; e < experts; ++e) {
      const std::string each = mlp + std::to_string(e) + (part == "w1" ? ".gate_proj.weight" : ".up_proj.weight");
      out.emplace(each, rows_of(t, each, e * inter, {inter, hidden}));
    }
  }
  return out;
}

}  // namespace brigade
