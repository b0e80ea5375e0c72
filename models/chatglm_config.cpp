#include "models/chatglm_config.h"

#include <utility>
#include <vector>

#include "models/config_json.h"
#include "models/fused_rows.h"

namespace brigade {

using nlohmann::json;

bool is_chatglm(const json& j) {
  const std::string cls = config_architecture(j);
  if (!cls.empty()) return cls == "ChatGLMModel" || cls == "ChatGLMForConditionalGeneration";
  return config_model_type(j) == "chatglm";
}

Status apply_chatglm_config(json& j) {
  if (!is_chatglm(j)) return Status::ok();
  auto flag = [&](const char* key, bool fallback) -> Expected<bool> {
    bool v = fallback;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, key, v));
    return v;
  };
  // What GlmForCausalLM's layer does not compute, with ChatGLMConfig's defaults.
  const std::pair<const char*, bool> kMust[] = {{"rmsnorm", true},
                                                {"post_layer_norm", true},
                                                {"apply_residual_connection_post_layernorm", false},
                                                {"add_bias_linear", false}};
  for (const auto& [key, want] : kMust) {
    BRIGADE_ASSIGN_OR_RETURN(const bool v, flag(key, want));
    if (v != want)
      return unsupported(std::string("config.json: ") + key + " " + (v ? "true" : "false") +
                         " is not supported for ChatGLM (brigade runs chatglm2 / chatglm3 / glm-4's layer: " + key + " " +
                         (want ? "true" : "false") + ")");
  }
  for (const char* key : {"pre_seq_len", "quantization_bit", "vision_config"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null() || (it->is_number_integer() && it->get<int64_t>() == 0)) continue;
    return unsupported(std::string("config.json: ") + key + " is not supported for ChatGLM (" +
                       (std::string(key) == "pre_seq_len"        ? "a P-tuning v2 prefix encoder"
                        : std::string(key) == "quantization_bit" ? "ChatGLM's own quantized weights"
                                                                 : "GLM-4V's vision tower") +
                       ")");
  }
  int layers = 28, vocab = 65024, hidden = 4096, ffn = 13696, kv_channels = 128, heads = 32, seq = 2048, groups = 1;
  float eps = 1e-5f, rope_ratio = 1.0f;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_layers", layers, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "padded_vocab_size", vocab, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "hidden_size", hidden, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "ffn_hidden_size", ffn, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "kv_channels", kv_channels, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_attention_heads", heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "seq_length", seq, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "multi_query_group_num", groups, false));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "layernorm_epsilon", eps));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "rope_ratio", rope_ratio));
  BRIGADE_ASSIGN_OR_RETURN(const bool mqa, flag("multi_query_attention", false));
  BRIGADE_ASSIGN_OR_RETURN(const bool qkv_bias, flag("add_qkv_bias", false));
  BRIGADE_ASSIGN_OR_RETURN(const bool tied, flag("tie_word_embeddings", false));
  if (!(rope_ratio > 0.0f)) return invalid_argument("config.json: rope_ratio must be > 0");
  j["architectures"] = json::array({"GlmForCausalLM"});
  j["num_hidden_layers"] = layers;
  j["vocab_size"] = vocab;
  j["hidden_size"] = hidden;
  j["intermediate_size"] = ffn;
  j["head_dim"] = kv_channels;
  j["num_attention_heads"] = heads;
  j["num_key_value_heads"] = mqa ? groups : heads;
  j["max_position_embeddings"] = seq;
  j["rms_norm_eps"] = eps;
  j["rope_theta"] = 10000.0 * static_cast<double>(rope_ratio);  // RotaryEmbedding's base * rope_ratio
  j["partial_rotary_factor"] = 0.5;                              // rotary_dim = kv_channels // 2
  j["attention_bias"] = qkv_bias;
  j["tie_word_embeddings"] = tied;
  j["hidden_act"] = "silu";  // swiglu
  j.erase("rope_scaling");
  j.erase("rope_parameters");
  return Status::ok();
}

Expected<std::map<std::string, RawTensor>> chatglm_tensors(int64_t q_rows, int64_t kv_rows,
                                                           std::map<std::string, RawTensor> tensors) {
  static const std::pair<const char*, const char*> kRenames[] = {
      {"transformer.embedding.word_embeddings.", "model.embed_tokens."},
      {"transformer.encoder.final_layernorm.", "model.norm."},
      {"transformer.output_layer.", "lm_head."},
      {"transformer.encoder.layers.", "model.layers."},
      {".self_attention.dense.", ".self_attn.o_proj."},
      {".mlp.dense_h_to_4h.", ".mlp.gate_up_proj."},
      {".mlp.dense_4h_to_h.", ".mlp.down_proj."}};
  std::map<std::string, RawTensor> out;
  std::vector<std::vector<uint8_t>> unused;  // single row ranges: views, never copies
  for (auto& [stored, t] : tensors) {
    if (stored.ends_with("rotary_pos_emb.inv_freq")) continue;  // a buffer some checkpoints store
    std::string name = stored;
    name = renamed(std::move(name), kRenames);
    const size_t fused = name.find(".self_attention.query_key_value.");
    if (fused == std::string::npos) {
      t.name = name;
      out.insert_or_assign(name, std::move(t));
      continue;
    }
    const bool weight = name.ends_with(".weight");
    if (t.shape.empty() || t.shape[0] != q_rows + 2 * kv_rows || t.shape.size() != (weight ? 2u : 1u))
      return corrupt(t.file + ": tensor '" + stored + "' has shape " + t.shape_string() + "; ChatGLM's query_key_value needs " +
                     std::to_string(q_rows + 2 * kv_rows) + " rows (q " + std::to_string(q_rows) + ", k and v " +
                     std::to_string(kv_rows) + " each)" + (weight ? "" : " and one dimension"));
    const std::string head = name.substr(0, fused) + ".self_attn.", tail = name.substr(fused + 32);
    const std::pair<const char*, RowRange> parts[] = {
        {"q_proj.", {0, q_rows}}, {"k_proj.", {q_rows, kv_rows}}, {"v_proj.", {q_rows + kv_rows, kv_rows}}};
    for (const auto& [part, range] : parts) out.insert_or_assign(head + part + tail, take_rows(t, {range}, head + part + tail, unused));
  }
  return out;
}

}  // namespace brigade
