#include "models/longcat_flash_config.h"

#include <algorithm>
#include <string>

#include "models/config_json.h"

namespace brigade {

using json = nlohmann::json;

bool is_longcat_flash(const json& j) {
  return config_names_class(j, {"LongcatFlashForCausalLM"}, {"longcat_flash"});
}

namespace {

// The config in DeepSeek-V3's terms: LongcatFlashConfig's defaults where a field is absent, its
// names moved to DeepSeek's, every layer sparse with no shared experts and no groups (the
// sigmoid scoring named here only passes DeepSeek-V3's reader; the caller sets the softmax).
json as_deepseek_v3(const json& j) {
  json d = j;
  const json defaults = {{"vocab_size", 131072}, {"hidden_size", 6144}, {"num_layers", 28},
                         {"num_attention_heads", 64}, {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-5},
                         {"ffn_hidden_size", 12288}, {"q_lora_rank", 1536}, {"kv_lora_rank", 512},
                         {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64}, {"v_head_dim", 128},
                         {"moe_topk", 12}, {"n_routed_experts", 512}, {"expert_ffn_hidden_size", 2048},
                         {"routed_scaling_factor", 6.0}, {"bos_token_id", 1}, {"eos_token_id", 2},
                         {"tie_word_embeddings", false}};
  for (const auto& [key, value] : defaults.items())
    if (!d.contains(key) || d[key].is_null()) d[key] = value;
  const bool theta = d.contains("rope_theta") ||
                     (d.contains("rope_parameters") && d["rope_parameters"].is_object() &&
                      d["rope_parameters"].contains("rope_theta"));
  if (!theta) d["rope_theta"] = 10000000.0;  // LongcatFlashConfig's default_theta
  const std::pair<const char*, const char*> renames[] = {{"num_layers", "num_hidden_layers"},
                                                         {"ffn_hidden_size", "intermediate_size"},
                                                         {"expert_ffn_hidden_size", "moe_intermediate_size"},
                                                         {"moe_topk", "num_experts_per_tok"}};
  for (const auto& [longcat, deepseek] : renames) d[deepseek] = d[longcat];
  // DeepSeek's reader checks k <= n_routed_experts; LongCat's k may reach E + Z (read_longcat_flash_config).
  if (d["num_experts_per_tok"].is_number_integer() && d["n_routed_experts"].is_number_integer())
    d["num_experts_per_tok"] = std::min(d["num_experts_per_tok"].get<int>(), d["n_routed_experts"].get<int>());
  d["architectures"] = json::array({"DeepseekV3ForCausalLM"});
  d["model_type"] = "deepseek_v3";
  d["num_key_value_heads"] = d["num_attention_heads"];
  d["rope_interleave"] = true;  // apply_rotary_pos_emb_interleave, always
  d["first_k_dense_replace"] = 0;
  d["n_shared_experts"] = 0;
  d["n_group"] = 1;
  d["topk_group"] = 1;
  d["norm_topk_prob"] = false;
  d["scoring_func"] = "sigmoid";
  d["topk_method"] = "noaux_tc";
  d["num_nextn_predict_layers"] = 0;
  for (const char* k : {"moe_layer_freq", "head_dim", "qk_head_dim"}) d.erase(k);
  return d;
}

// The fields transformers ignores or cannot run, refused by name (read_longcat_flash_config).
Status check_longcat_fields(const json& j) {
  auto flag = [&](const char* key, bool def, bool& out) { out = def; return read_bool(j, key, out); };
  bool v = false;
  BRIGADE_RETURN_IF_ERROR(flag("attention_bias", false, v));
  if (v) return unsupported("config.json: attention_bias = true is not supported for longcat_flash; set it to false");
  BRIGADE_RETURN_IF_ERROR(flag("router_bias", false, v));
  if (v)
    return unsupported("config.json: router_bias = true is not supported for longcat_flash (transformers' "
                       "LongcatFlashTopkRouter builds the bias and never adds it: the reference is ambiguous)");
  for (const char* key : {"mla_scale_q_lora", "mla_scale_kv_lora"}) {
    BRIGADE_RETURN_IF_ERROR(flag(key, true, v));
    if (!v)
      return unsupported(std::string("config.json: ") + key + " = false is not supported for longcat_flash "
                         "(transformers' LongcatFlashMLA always scales the latents by sqrt(hidden / rank))");
  }
  std::string s = "identity";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "zero_expert_type", s));
  if (s != "identity")
    return unsupported("config.json: zero_expert_type '" + s + "' is not supported for longcat_flash; supported: identity");
  s = "MLA";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "attention_method", s));
  if (s != "MLA")
    return unsupported("config.json: attention_method '" + s + "' is not supported for longcat_flash; supported: MLA");
  if (auto it = j.find("q_lora_rank"); it != j.end() && (it->is_null() || (it->is_number() && it->get<double>() <= 0)))
    return unsupported("config.json: q_lora_rank " + it->dump() + " is not supported for longcat_flash "
                       "(LongcatFlashMLA always runs q_a_proj -> q_a_layernorm -> q_b_proj); it must be > 0");
  int n = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_nextn_predict_layers", n, false));
  if (n > 0)
    return unsupported("config.json: num_nextn_predict_layers > 0 is not supported for longcat_flash (its MTP "
                       "module is not run; transformers skips model.mtp.*): set it to 0");
  return Status::ok();
}

}  // namespace

Expected<ModelConfig> read_longcat_flash_config(const json& j) {
  BRIGADE_RETURN_IF_ERROR(check_longcat_fields(j));
  const json d = as_deepseek_v3(j);
  BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(d.dump()));
  int zero = 256, head_dim = c.qk_rope_head_dim, qk_head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "zero_expert_num", zero, false));
  if (auto it = j.find("zero_expert_num"); it != j.end() && it->is_null()) zero = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "head_dim", head_dim, false));
  if (j.contains("head_dim") && j["head_dim"].is_null()) head_dim = c.qk_rope_head_dim;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "qk_head_dim", qk_head_dim, false));
  if (j.contains("qk_head_dim") && j["qk_head_dim"].is_null()) qk_head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
  if (head_dim != c.qk_rope_head_dim)
    return unsupported("config.json: head_dim " + std::to_string(head_dim) + " other than qk_rope_head_dim (" +
                       std::to_string(c.qk_rope_head_dim) + ") is not supported for longcat_flash (transformers "
                       "takes head_dim as the RoPE width of the qk_rope_head_dim dims it rotates)");
  if (qk_head_dim != c.qk_nope_head_dim + c.qk_rope_head_dim)
    return unsupported("config.json: qk_head_dim " + std::to_string(qk_head_dim) +
                       " must be qk_nope_head_dim + qk_rope_head_dim (" +
                       std::to_string(c.qk_nope_head_dim + c.qk_rope_head_dim) + ") for longcat_flash");
  if (zero < 0) return invalid_argument("config.json: zero_expert_num must be >= 0 (got " + std::to_string(zero) + ")");
  const json& k = j.contains("moe_topk") ? j["moe_topk"] : json(12);
  if (!k.is_number_integer() || k.get<int>() < 1 || k.get<int>() > c.n_experts + zero)
    return invalid_argument("config.json: moe_topk must be in [1, n_routed_experts + zero_expert_num = " +
                            std::to_string(c.n_experts + zero) + "] (got " + k.dump() + ")");
  c.n_experts_per_tok = k.get<int>();
  c.arch = "longcat_flash";
  c.n_zero_experts = zero;
  c.moe_scoring = MoeScoring::softmax;  // LongcatFlashTopkRouter: softmax over all E + Z logits
  c.moe_score_bias = true;              // router.e_score_correction_bias [E + Z] selects
  c.moe_group_score = MoeGroupScore::none;
  return c;
}

}  // namespace brigade
