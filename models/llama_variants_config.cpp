#include "models/llama_variants_config.h"

#include <algorithm>
#include <cmath>

#include "models/arcee_config.h"
#include "models/classic_decoders_config.h"
#include "models/config_json.h"
#include "models/dbrx_config.h"
#include "models/deepseek_config.h"
#include "models/internlm_config.h"
#include "models/gemma_config.h"
#include "models/mimo_exaone_config.h"
#include "models/phimoe_config.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// The sliding layers of OLMo 3 and EXAONE 4: layer_types, or without it EXAONE's
// sliding_window_pattern as a string of L (local) and G (global) repeating over the layers, or
// an integer n (every n-th layer global), as read_layer_types reads it.
Status read_sliding_layers(const json& j, ModelConfig& c, int default_pattern) {
  auto pattern = j.find("sliding_window_pattern");
  if (j.contains("layer_types") || pattern == j.end() || !pattern->is_string())
    return read_layer_types(j, c, default_pattern);
  const std::string p = pattern->get<std::string>();
  if (p.empty() || p.find_first_not_of("LG") != std::string::npos)
    return invalid_argument("config.json: sliding_window_pattern '" + p + "' must be letters L (sliding) and G (full)");
  c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (size_t l = 0; l < c.sliding_layers.size(); ++l) c.sliding_layers[l] = p[l % p.size()] == 'L';
  return Status::ok();
}

Status read_olmo(const json& j, ModelConfig& c) {
  c.qkv_bias = c.o_bias = c.attention_bias;  // Olmo2Attention: attention_bias on q/k/v and o
  c.qk_norm = c.qk_norm_whole = true;
  c.post_norms = true;
  if (c.arch == "olmo2" || c.arch == "flex_olmo") {  // FlexOlmo: OLMo 2's layer, OLMoE's experts (read_moe)
    c.sliding_window = 0;
    return Status::ok();
  }
  // OLMo 3: Olmo3Config's window (4096) and layer types (every 4th layer full) when absent; the
  // sliding layers rotate unscaled (a flat rope_scaling is the full layers'), or as
  // transformers 5's rope_parameters {"full_attention": ..., "sliding_attention": ...} say.
  c.sliding_window = 4096;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c, 4));
  c.rope_local_theta = c.rope_theta;
  return read_rope_by_layer_type(j, c);
}

Status read_exaone4(const json& j, ModelConfig& c) {
  c.qk_norm = true;  // Exaone4Attention: per-head q/k norms, no biases
  c.post_norms = true;
  c.sliding_window = 4096;  // Exaone4Config's default; null = every layer full, all with RoPE
  if (auto it = j.find("sliding_window"); it != j.end() && it->is_null()) {
    c.sliding_window = 0;
    return Status::ok();
  }
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  if (c.sliding_window <= 0) return invalid_argument("config.json: sliding_window must be > 0 or null");
  BRIGADE_RETURN_IF_ERROR(read_sliding_layers(j, c, 4));
  nope_on_full_layers(c);  // with a window only
  return Status::ok();
}

}  // namespace

Status read_experts_beside_shared(const json& j, ModelConfig& c, int experts, int k, int inter, int shared) {
  c.n_experts = experts;
  c.n_experts_per_tok = k;
  c.moe_intermediate_size = inter;
  c.shared_expert_intermediate_size = shared;
  BRIGADE_RETURN_IF_ERROR(read_int(j, j.contains("num_experts") ? "num_experts" : "num_local_experts", c.n_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "moe_intermediate_size", c.moe_intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "shared_expert_intermediate_size", c.shared_expert_intermediate_size, false));
  if (c.shared_expert_intermediate_size <= 0)
    return invalid_argument("config.json: shared_expert_intermediate_size must be > 0 (" + c.arch + "'s shared expert)");
  return Status::ok();
}

Status read_required_window(const json& j, ModelConfig& c, int fallback) {
  BRIGADE_RETURN_IF_ERROR(read_window_or_null(j, c, fallback));
  if (c.sliding_window <= 0)
    return invalid_argument("config.json: sliding_window must be > 0 for " + c.arch + " (transformers' model builds "
                            "its sliding mask from it)");
  return Status::ok();
}

// RecursiveSI Flint (FlintAttention: Qwen3-MoE's attention): per-head q/k norms before RoPE, q/k/v
// and o biases with attention_bias, a learned sink logit per head on every layer (the Hub's
// self_attn.softmax_offset), sliding_window (513 by default; required: FlintModel builds the
// sliding mask from it) on the layers layer_types calls sliding, by default all but layers 0, 1,
// every fourth from 1 and the last; the full layers without RoPE. Its experts: read_flint_moe
// (models/model_config.cpp).
Status read_flint(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "silu"));
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.qk_norm = true;
  c.attn_sinks = true;
  BRIGADE_RETURN_IF_ERROR(read_required_window(j, c, 513));
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c, 1));
  } else {
    c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
    for (int l = 0; l < c.n_layers; ++l)
      c.sliding_layers[static_cast<size_t>(l)] = !(l < 2 || l % 4 == 1 || l == c.n_layers - 1);
  }
  nope_on_full_layers(c);  // only the sliding layers rotate
  return Status::ok();
}

// BitNet b1.58 (BitNetForCausalLM, microsoft/bitnet-b1.58-2B-4T): Llama's layer with an RMSNorm
// of the attention output before o_proj (attn_sub_norm, hidden_size wide, so the q width must be
// hidden_size) and of relu2(gate) * up before down_proj (ffn_sub_norm); its linears ternary under
// quant_method bitnet (models/quant_config.h), else plain as transformers runs them.
Status read_bitnet(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "relu2"));
  c.mlp_activation = MlpActivation::relu2_glu;
  c.sub_norms = true;
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.sliding_window = 0;
  if (int64_t{c.n_heads} * c.head_dim != c.hidden_size)
    return invalid_argument("config.json: num_attention_heads * head_dim (" + std::to_string(int64_t{c.n_heads} * c.head_dim) +
                            ") must equal hidden_size (" + std::to_string(c.hidden_size) +
                            ") for bitnet: its attn_sub_norm, hidden_size wide, norms the attention's output");
  return Status::ok();
}

// JetBrains Mellum (MellumForCausalLM, JetBrains/Mellum2-12B-A2.5B): Qwen3-MoE's attention (per-head
// q/k norms before RoPE, q/k/v and o biases with attention_bias) with sliding_window (1024; null
// only without sliding layers) on the layers layer_types calls sliding (default none), and RoPE per layer type:
// rope_parameters' full_attention and sliding_attention, MellumConfig's 500000 and 10000 when
// absent (a flat rope_parameters is refused: MellumRotaryEmbedding reads it per type), whole heads
// rotated. Its experts: read_mellum_moe (models/model_config.cpp).
Status read_mellum(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "silu"));
  c.qk_norm = true;
  c.qkv_bias = c.o_bias = c.attention_bias;
  BRIGADE_RETURN_IF_ERROR(read_window_or_null(j, c, 1024));
  BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c, 1));  // absent: every layer full
  const auto rope = j.find("rope_parameters");
  if (rope == j.end() || rope->is_null()) {
    c.rope_theta = 500000.0f;
    c.rope_local_theta = 10000.0f;
  } else {
    if (!rope->is_object() || !rope->contains("full_attention") || !rope->contains("sliding_attention"))
      return invalid_argument("config.json: rope_parameters must hold full_attention and sliding_attention for mellum "
                              "(MellumRotaryEmbedding reads one per layer type)");
    BRIGADE_RETURN_IF_ERROR(read_rope_by_layer_type(j, c));
    for (const char* type : {"full_attention", "sliding_attention"}) {
      float factor = 1.0f;
      BRIGADE_RETURN_IF_ERROR(read_float((*rope)[type], "partial_rotary_factor", factor));
      if (factor != 1.0f)  // MellumRotaryEmbedding would make narrower tables than its attention rotates
        return unsupported(std::string("config.json: rope_parameters.") + type + ".partial_rotary_factor " +
                           std::to_string(factor) + " is not supported for mellum: MellumAttention rotates whole heads");
    }
  }
  const bool sliding = std::find(c.sliding_layers.begin(), c.sliding_layers.end(), true) != c.sliding_layers.end();
  if (c.sliding_window == 0 && sliding)  // transformers' sliding cache layers need one
    return invalid_argument("config.json: sliding_window must be > 0 for mellum's sliding layers (layer_types)");
  return Status::ok();
}

std::string llama_variant_arch(const std::string& class_name, const std::string& model_type) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"DbrxForCausalLM", "dbrx"},         {"OlmoForCausalLM", "olmo"},         {"Olmo2ForCausalLM", "olmo2"},       {"Olmo3ForCausalLM", "olmo3"},
      {"Exaone4ForCausalLM", "exaone4"},   {"Glm4ForCausalLM", "glm4"},
      {"GlmForCausalLM", "glm"},           {"HeliumForCausalLM", "helium"},
      {"SeedOssForCausalLM", "seed_oss"},  {"Ernie4_5ForCausalLM", "ernie4_5"},
      {"HunYuanDenseV1ForCausalLM", "hunyuan_v1_dense"}, {"HunYuanMoEV1ForCausalLM", "hunyuan_v1_moe"},
      {"OlmoeForCausalLM", "olmoe"},
      {"ApertusForCausalLM", "apertus"},          {"Ernie4_5_MoeForCausalLM", "ernie4_5_moe"},
      {"Llama4ForCausalLM", "llama4_text"},       {"MiniMaxM2ForCausalLM", "minimax_m2"},
      {"CohereForCausalLM", "cohere"},            {"Cohere2ForCausalLM", "cohere2"},
      {"Dots1ForCausalLM", "dots1"},              {"Ministral3ForCausalLM", "ministral3"},
      {"MinistralForCausalLM", "ministral"},      {"Cohere2MoeForCausalLM", "cohere2_moe"},
      {"PhimoeForCausalLM", "phimoe"},            {"PhiMoEForCausalLM", "phimoe"},  // transformers', the Hub's
      {"AfmoeForCausalLM", "afmoe"},              {"ArceeForCausalLM", "arcee"},
      {"GemmaForCausalLM", "gemma"},              {"Starcoder2ForCausalLM", "starcoder2"},  // classic_decoders_config.h
      {"PhiForCausalLM", "phi"},                  {"StableLmForCausalLM", "stablelm"},
      {"Jais2ForCausalLM", "jais2"},              {"NemotronForCausalLM", "nemotron"},
      {"ExaoneForCausalLM", "exaone"},            {"FlexOlmoForCausalLM", "flex_olmo"},
      {"GPTNeoXForCausalLM", "gpt_neox"},         {"GPTJForCausalLM", "gptj"},  // gpt_decoders_config.h
      {"GPT2LMHeadModel", "gpt2"},                {"GPTBigCodeForCausalLM", "gpt_bigcode"},
      {"FalconForCausalLM", "falcon"},            {"RWForCausalLM", "falcon"},  // (the RW remote code's)
      {"BloomForCausalLM", "bloom"},              {"OPTForCausalLM", "opt"},
      {"GPTNeoForCausalLM", "gpt_neo"},           {"CodeGenForCausalLM", "codegen"},
      {"MptForCausalLM", "mpt"},                  {"MPTForCausalLM", "mpt"},  // (transformers', the Hub's remote code's)
      {"MiMoV2FlashForCausalLM", "mimo_v2_flash"}, {"ExaoneMoeForCausalLM", "exaone_moe"},
      {"ExaoneMoEForCausalLM", "exaone_moe"},    {"Kolibri1ForCausalLM", "kolibri1"},
      {"FlintForCausalLM", "flint"},              {"BitNetForCausalLM", "bitnet"},
      {"MellumForCausalLM", "mellum"},
      {"InternLM2ForCausalLM", "internlm2"},      {"InternLM3ForCausalLM", "internlm3"},  // internlm_config.h
      {"MiniCPMForCausalLM", "minicpm"},          {"CwmForCausalLM", "cwm"},
      {"NanoChatForCausalLM", "nanochat"},       {"HyperCLOVAXForCausalLM", "hyperclovax"}};  // (model_config.cpp's read_hyperclovax)  // (mimo_exaone_config.h; K-EXAONE's first configs' spelling)
  for (const auto& [cls, type] : kNames)
    if (class_name == cls || (class_name.empty() && model_type == type)) return type;
  return {};
}

bool is_llama_variant(const std::string& arch) { return !llama_variant_arch("", arch).empty(); }

namespace {

// clip_qkv (OlmoConfig's, OlmoeConfig's): null, or the bound q, k and v are clamped to.
Status read_clip_qkv(const json& j, ModelConfig& c) {
  auto clip = j.find("clip_qkv");
  if (clip == j.end() || clip->is_null()) return Status::ok();
  if (!clip->is_number() || !(clip->get<double>() > 0.0) || !std::isfinite(clip->get<double>()))
    return invalid_argument("config.json: clip_qkv must be a positive number or null, not " + clip->dump());
  c.clip_qkv = clip->get<float>();
  return Status::ok();
}

}  // namespace

Status read_exaone_sliding_layers(const json& j, ModelConfig& c) { return read_sliding_layers(j, c, 4); }

namespace {

// Ministral (MinistralForCausalLM): MinistralAttention is Qwen2's without biases (q/k/v and o bare,
// whatever attention_bias says, as transformers builds it); MistralConfig's window (4096; null:
// none) on the layers layer_types calls sliding, every layer without layer_types.
Status read_ministral(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "silu"));
  c.qkv_bias = c.o_bias = false;
  BRIGADE_RETURN_IF_ERROR(read_window_or_null(j, c, 4096));
  c.sliding_layers.clear();  // every layer slides
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) return read_layer_types(j, c, 1);
  return Status::ok();
}

}  // namespace

Status require_act(const json& j, const ModelConfig& c, const char* want) {
  std::string act = want;
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act != want)
    return unsupported("config.json: hidden_act '" + act + "' is not supported for " + c.arch + "; supported: " + want);
  return Status::ok();
}

void nope_on_full_layers(ModelConfig& c) {
  c.nope_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (int l = 0; l < c.n_layers; ++l) c.nope_layers[static_cast<size_t>(l)] = c.layer_window(l) == 0;
}

bool is_mistral3(const json& j) { return config_names_class(j, {"Mistral3ForConditionalGeneration"}, {"mistral3"}); }

// A wrapper's (`wrapper`: the class name, for messages) language model config: its text_config
// over `defaults`, whose model_type must be `type` (another refused by name), the top level's
// bos/eos ids and dtype where text_config has none, the top level's tie_word_embeddings (`tie`,
// the wrapper class's default, when absent: transformers ties by the top level's), and
// architectures [text_class]. corrupt without a text_config object.
Expected<json> wrapped_text_config(const json& j, const char* wrapper, json defaults, const char* type,
                                   const char* text_class, bool tie) {
  auto it = j.find("text_config");
  if (it == j.end() || !it->is_object())
    return corrupt(std::string("config.json: ") + wrapper + " without a text_config object; brigade serves its " +
                   "language model (text_config) text-only");
  json t = std::move(defaults);
  t["model_type"] = type;
  t.update(*it);
  const std::string got = t["model_type"].is_string() ? t["model_type"].get<std::string>() : t["model_type"].dump();
  if (got != type)
    return unsupported("config.json: text_config.model_type '" + got + "' of " + wrapper +
                       " is not supported; supported: " + type);
  for (const char* key : {"bos_token_id", "eos_token_id", "torch_dtype", "dtype"})
    if (j.contains(key) && !it->contains(key)) t[key] = j[key];
  t["tie_word_embeddings"] = tie;
  if (auto top = j.find("tie_word_embeddings"); top != j.end() && top->is_boolean()) t["tie_word_embeddings"] = *top;
  t["architectures"] = json::array({text_class});
  return t;
}

Expected<json> mistral3_text_config(const json& j) {
  auto t = j.find("text_config");
  const std::string type = t != j.end() && t->is_object() && t->contains("model_type") ? (*t)["model_type"].dump() : "";
  if (!type.empty() && type != "\"mistral\"" && type != "\"ministral3\"" && type != "\"mistral4\"")
    return unsupported("config.json: text_config.model_type " + type +
                       " of Mistral3ForConditionalGeneration is not supported; supported: mistral, ministral3, mistral4");
  if (type == "\"mistral4\"") {
    // Mistral Small 4's language model (MLA and experts: models/deepseek_config.h): Mistral4Config's
    // defaults for the common fields (read_deepseek has its MLA and routing ones).
    json defaults = {{"hidden_size", 4096},  {"intermediate_size", 12288},         {"max_position_embeddings", 1048576},
                     {"num_attention_heads", 32}, {"num_hidden_layers", 36}, {"num_key_value_heads", 32},
                     {"rms_norm_eps", 1e-6},  {"vocab_size", 131072}};
    return wrapped_text_config(j, "Mistral3ForConditionalGeneration", std::move(defaults), "mistral4",
                               "Mistral4ForCausalLM", /*tie=*/true);
  }
  if (type == "\"ministral3\"") {
    // Ministral 3's (and Devstral Small 2's) language model: Ministral3Config's defaults (the 8B's
    // shape; its rope_parameters, which carry the query temperature, are not defaulted: read_llama4_scaling_beta).
    json defaults = {{"head_dim", 128},          {"hidden_size", 4096},         {"intermediate_size", 14336},
                     {"max_position_embeddings", 262144}, {"num_attention_heads", 32}, {"num_hidden_layers", 34},
                     {"num_key_value_heads", 8}, {"rms_norm_eps", 1e-5},        {"sliding_window", nullptr},
                     {"vocab_size", 131072}};
    return wrapped_text_config(j, "Mistral3ForConditionalGeneration", std::move(defaults), "ministral3",
                               "Ministral3ForCausalLM", /*tie=*/true);
  }
  // Mistral3Config's text_config defaults (Mistral Small 3.1's shape), which configs may leave out.
  json defaults = {{"head_dim", 128},        {"hidden_size", 5120},        {"intermediate_size", 32768},
                   {"max_position_embeddings", 131072}, {"num_attention_heads", 32}, {"num_hidden_layers", 40},
                   {"num_key_value_heads", 8}, {"rms_norm_eps", 1e-5},      {"rope_theta", 1000000000.0},
                   {"sliding_window", nullptr}, {"vocab_size", 131072}};
  return wrapped_text_config(j, "Mistral3ForConditionalGeneration", std::move(defaults), "mistral", "MistralForCausalLM",
                             /*tie=*/true);
}

bool is_llama4(const json& j) { return config_names_class(j, {"Llama4ForConditionalGeneration"}, {"llama4"}); }

Expected<json> llama4_text_config(const json& j) {
  return wrapped_text_config(j, "Llama4ForConditionalGeneration", json::object(), "llama4_text", "Llama4ForCausalLM",
                             /*tie=*/false);
}

Expected<double> read_ntk_alpha(const json& scaling) {
  auto alpha = scaling.find("alpha");
  if (alpha == scaling.end() || alpha->is_null()) return 0.0;
  std::string type;
  for (const char* key : {"rope_type", "type"})
    if (auto t = scaling.find(key); t != scaling.end() && t->is_string()) type = t->get<std::string>();
  if (type != "dynamic") return 0.0;
  if (!alpha->is_number() || !(alpha->get<double>() > 0.0) || !std::isfinite(alpha->get<double>()))
    return invalid_argument("config.json: rope scaling 'alpha' must be a positive number");
  return alpha->get<double>();
}

Status stretch_rope_base(double alpha, ModelConfig& c) {
  if (c.head_dim <= 2) return invalid_argument("config.json: NTK-alpha RoPE needs head_dim > 2");
  const double d = c.head_dim;
  c.rope_theta = static_cast<float>(static_cast<double>(c.rope_theta) * std::pow(alpha, d / (d - 2.0)));
  return Status::ok();
}

namespace {

// Apertus: per-head q/k norms, q/k/v/o biases with attention_bias, the ungated xIELU MLP
// (hidden_act xielu, ApertusConfig's default; another is refused by name), and without any RoPE
// field ApertusConfig's default: llama3 scaling x8 over 8192 positions on base 1.2e7.
Status read_apertus(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "xielu"));
  c.mlp_activation = MlpActivation::xielu;
  c.qk_norm = true;
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.sliding_window = 0;
  if (j.contains("rope_theta") || j.contains("rope_scaling") || j.contains("rope_parameters")) return Status::ok();
  c.rope_theta = 12000000.0f;
  c.rope_scaling.type = RopeScalingType::llama3;
  c.rope_scaling.factor = 8.0f;
  c.rope_scaling.low_freq_factor = 1.0f;
  c.rope_scaling.high_freq_factor = 4.0f;
  c.rope_scaling.original_max_position = 8192;
  return Status::ok();
}

// A list of one int per layer (at least n_layers of them: Llama4TextConfig allows more), or absent.
Status read_layer_ints(const json& j, const char* key, int n_layers, std::vector<int>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return invalid_argument(std::string("config.json: ") + key + " must be a list");
  out.clear();
  for (const json& v : *it) {
    if (!v.is_number_integer()) return invalid_argument(std::string("config.json: ") + key + " must list integers");
    out.push_back(v.get<int>());
  }
  if (static_cast<int>(out.size()) < n_layers)
    return invalid_argument(std::string("config.json: ") + key + " lists " + std::to_string(out.size()) +
                            " layers for num_hidden_layers = " + std::to_string(n_layers));
  return Status::ok();
}

// Llama 4's language model (Llama4TextConfig; its defaults are Llama-4-Scout's): RoPE of
// adjacent pairs on the layers no_rope_layers marks 1 (every no_rope_layer_interval-th has none),
// weightless per-head q/k RMSNorms after it there (use_qk_norm), chunked attention on the
// "chunked_attention" layers (layer_types; without it, the RoPE layers when
// attention_chunk_size is set), the NoPE layers' query temperature (attn_temperature_tuning:
// floor_scale, attn_scale); sparse layers (moe_layers, or every interleave_moe_layer_step-th) of
// num_local_experts experts of intermediate_size, top num_experts_per_tok by sigmoid, the score
// applied to the expert's input, beside a shared expert of intermediate_size; the other layers'
// dense MLP of intermediate_size_mlp.
Status read_llama4(const json& j, ModelConfig& c) {
  std::string act = "silu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act != "silu") return unsupported("config.json: hidden_act '" + act + "' is not supported for llama4; supported: silu");
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.rope_style = RopeStyle::interleaved;
  c.sliding_window = 0;
  if (!j.contains("rope_theta") && !j.contains("rope_parameters")) c.rope_theta = 500000.0f;  // default_theta
  // RoPE and NoPE layers.
  int interval = 4;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "no_rope_layer_interval", interval, false));
  if (interval < 1) return invalid_argument("config.json: no_rope_layer_interval must be >= 1");
  std::vector<int> use_rope;
  for (int l = 0; l < c.n_layers; ++l) use_rope.push_back((l + 1) % interval != 0 ? 1 : 0);
  if (auto it = j.find("no_rope_layers"); it != j.end() && it->is_array() && it->empty()) {
    // an empty list takes the interval's, as Llama4TextConfig does
  } else {
    BRIGADE_RETURN_IF_ERROR(read_layer_ints(j, "no_rope_layers", c.n_layers, use_rope));
  }
  c.nope_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (int l = 0; l < c.n_layers; ++l) c.nope_layers[static_cast<size_t>(l)] = use_rope[static_cast<size_t>(l)] == 0;
  // Chunked attention.
  c.attention_chunk = 8192;
  if (auto it = j.find("attention_chunk_size"); it != j.end() && it->is_null()) c.attention_chunk = 0;
  else BRIGADE_RETURN_IF_ERROR(read_int(j, "attention_chunk_size", c.attention_chunk, false));
  if (c.attention_chunk < 0) return invalid_argument("config.json: attention_chunk_size must be > 0 or null");
  c.chunked_layers.assign(static_cast<size_t>(c.n_layers), false);
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != static_cast<size_t>(c.n_layers))
      return invalid_argument("config.json: layer_types must list one type per layer (num_hidden_layers = " +
                              std::to_string(c.n_layers) + ")");
    for (size_t l = 0; l < it->size(); ++l) {
      const std::string name = (*it)[l].is_string() ? (*it)[l].get<std::string>() : std::string();
      if (name == "chunked_attention") c.chunked_layers[l] = true;
      else if (name != "full_attention")
        return unsupported("config.json: layer_types[" + std::to_string(l) + "] = " + (*it)[l].dump() +
                           " is not supported for llama4; supported: chunked_attention, full_attention");
    }
    if (c.attention_chunk == 0 && std::find(c.chunked_layers.begin(), c.chunked_layers.end(), true) != c.chunked_layers.end())
      return invalid_argument("config.json: layer_types has chunked_attention layers but attention_chunk_size is null");
  } else if (c.attention_chunk > 0) {
    for (int l = 0; l < c.n_layers; ++l) c.chunked_layers[static_cast<size_t>(l)] = !c.nope_layers[static_cast<size_t>(l)];
  }
  // q/k norms and the NoPE layers' temperature.
  bool qk_norm = true, tuning = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_qk_norm", qk_norm));
  c.qk_norm = c.qk_norm_weightless = c.qk_norm_after_rope = qk_norm;
  // The Hub's Scout and Maverick configs write attn_temperature_tuning as a number (4: the first
  // Llama4TextConfig typed it float), which transformers takes by its truth.
  if (auto t = j.find("attn_temperature_tuning"); t != j.end() && t->is_number()) tuning = t->get<double>() != 0.0;
  else BRIGADE_RETURN_IF_ERROR(read_bool(j, "attn_temperature_tuning", tuning));
  if (tuning) {
    c.attn_temperature_floor = 8192.0f;
    c.attn_temperature_scale = 0.1f;
    BRIGADE_RETURN_IF_ERROR(read_float(j, "floor_scale", c.attn_temperature_floor));
    BRIGADE_RETURN_IF_ERROR(read_float(j, "attn_scale", c.attn_temperature_scale));
    if (!(c.attn_temperature_floor > 0.0f) || !std::isfinite(c.attn_temperature_floor) ||
        !std::isfinite(c.attn_temperature_scale))
      return invalid_argument("config.json: floor_scale must be a positive number and attn_scale a number");
  }
  // The experts (intermediate_size) and the dense layers (intermediate_size_mlp).
  c.moe_intermediate_size = c.shared_expert_intermediate_size = c.intermediate_size;
  c.intermediate_size = 16384;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "intermediate_size_mlp", c.intermediate_size, false));
  c.n_experts = 16;
  c.n_experts_per_tok = 1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_local_experts", c.n_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, false));
  int step = 1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "interleave_moe_layer_step", step, false));
  if (step < 1) return invalid_argument("config.json: interleave_moe_layer_step must be >= 1");
  std::vector<int> moe_layers;
  for (int l = step - 1; l < c.n_layers; l += step) moe_layers.push_back(l);
  if (auto it = j.find("moe_layers"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return invalid_argument("config.json: moe_layers must be a list of layer indices");
    moe_layers.clear();
    for (const json& v : *it) {
      if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() >= c.n_layers)
        return invalid_argument("config.json: moe_layers entry " + v.dump() + " is not a layer index in [0, " +
                                std::to_string(c.n_layers) + ")");
      moe_layers.push_back(v.get<int>());
    }
  }
  c.decoder_sparse_step = 1;
  c.mlp_only_layers.clear();
  for (int l = 0; l < c.n_layers; ++l)
    if (std::find(moe_layers.begin(), moe_layers.end(), l) == moe_layers.end()) c.mlp_only_layers.push_back(l);
  c.moe_scoring = MoeScoring::sigmoid;
  c.norm_topk_prob = false;
  c.moe_weight_on_input = true;
  c.experts_transposed = true;  // feed_forward.experts.gate_up_proj [E, hidden, 2 I], down_proj [E, I, hidden]
  return Status::ok();
}

// MiniMax-M2 (MiniMaxM2Config; the Hub's configs also carry the fields of MiniMax's own code,
// refused by name where they say something else than what transformers runs): q/k norms over the
// whole projections (qk_norm_type per_layer) before a partial RoPE of rotary_dim (or
// partial_rotary_factor) dims; every layer num_local_experts (256) experts of intermediate_size,
// top num_experts_per_tok (8) chosen on sigmoid + e_score_correction_bias (use_routing_bias) and
// renormalised; no biases, no window. Its MTP modules (num_mtp_modules) are not loaded.
Status read_minimax_m2(const json& j, ModelConfig& c) {
  std::string norm = "per_layer", scoring = "sigmoid", act = "silu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "qk_norm_type", norm));
  BRIGADE_RETURN_IF_ERROR(read_string(j, "scoring_func", scoring));
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (norm != "per_layer")
    return unsupported("config.json: qk_norm_type '" + norm + "' is not supported for minimax_m2; supported: per_layer");
  if (scoring != "sigmoid")
    return unsupported("config.json: scoring_func '" + scoring + "' is not supported for minimax_m2; supported: sigmoid");
  if (act != "silu") return unsupported("config.json: hidden_act '" + act + "' is not supported for minimax_m2; supported: silu");
  if (c.attention_bias) return unsupported("config.json: attention_bias = true is not supported for minimax_m2");
  // MiniMax's own fields that would mean another model: a shared expert, or lightning-attention
  // layers (attn_type_list 0, MiniMax-Text-01's): M2 has neither.
  if (auto shared = j.find("shared_intermediate_size"); shared != j.end() && shared->is_number() && shared->get<double>() > 0)
    return unsupported("config.json: shared_intermediate_size > 0 (a shared expert) is not supported for minimax_m2");
  if (auto types = j.find("attn_type_list"); types != j.end() && types->is_array())
    for (const json& t : *types)
      if (!t.is_number() || t.get<double>() != 1.0)
        return unsupported("config.json: attn_type_list entry " + t.dump() +
                           " is not supported for minimax_m2; supported: 1 (softmax attention on every layer)");
  c.qk_norm = c.qk_norm_whole = true;
  c.sliding_window = 0;
  if (j.contains("rotary_dim") && !j["rotary_dim"].is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_int(j, "rotary_dim", c.rotary_dim, false));
    if (c.rotary_dim <= 0) return invalid_argument("config.json: rotary_dim must be > 0");
  }
  c.moe_scoring = MoeScoring::sigmoid;  // the experts' count, k and width: read_moe
  c.moe_score_bias = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_routing_bias", c.moe_score_bias));
  c.norm_topk_prob = true;
  return Status::ok();
}

// Cohere's Command R family (CohereConfig, Cohere2Config): LayerNorms without bias
// (layer_norm_eps, 1e-5 by default) in place of RMSNorms, one per layer before the attention and
// the MLP side by side, RoPE of adjacent pairs, q/k/v and o biases with attention_bias, tied
// embeddings by default, the logits times logit_scale (0.0625 by default). cohere (Command R,
// R+): use_qk_norm's per-head q/k LayerNorms, each head with its own weights. cohere2 (Command
// R7B, Command A): head_dim always hidden_size / num_attention_heads, sliding_window (4096) on the
// "sliding_attention" layers (layer_types; without it, all but every sliding_window_pattern-th
// layer, 4 by default), which alone have RoPE.
namespace {

// Cohere2 MoE (Cohere2MoeConfig; read_cohere did Cohere's common part): its head_dim (128 when
// absent); an RMSNorm where rms_norm_eps is set, else Cohere's LayerNorm; the window (4096) on the
// sliding layers of layer_types (absent: the config class's rule from first_k_dense_replace,
// prefix_dense_sliding_window_pattern and sliding_window_pattern), RoPE on the sliding layers and,
// with prefix_dense_sliding_window_pattern 1, on the dense ones (force_rope), none on the others;
// dense layers (mlp_layer_types, else the first first_k_dense_replace) a SwiGLU of
// prefix_dense_intermediate_size (intermediate_size when null); the others num_experts experts of
// intermediate_size, the top num_experts_per_tok by their logits, weighted by the softmax of those
// logits or (expert_selection_fn sigmoid) their sigmoids, renormalised with norm_topk_prob; and
// num_shared_experts shared experts (one SwiGLU of num_shared_experts * intermediate_size) summed
// with them, or averaged: (routed + shared) / 2, the 1/2 as routed_scaling_factor, which the
// block also applies to the shared half (moe_block.cpp).
Status read_cohere2_moe(const json& j, ModelConfig& c) {
  if (!j.contains("head_dim") || j["head_dim"].is_null()) c.head_dim = 128;
  if (auto it = j.find("rms_norm_eps"); it != j.end() && !it->is_null()) {
    c.layer_norms = false;
    BRIGADE_RETURN_IF_ERROR(read_float(j, "rms_norm_eps", c.rms_eps));
  }
  int first_dense = 0, prefix_pattern = 1, pattern = 4;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "first_k_dense_replace", first_dense, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "prefix_dense_sliding_window_pattern", prefix_pattern, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window_pattern", pattern, false));
  if (first_dense < 0 || prefix_pattern < 1 || pattern < 1)
    return invalid_argument("config.json: first_k_dense_replace must be >= 0 and the sliding window patterns >= 1");
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c, 1));
  } else {  // Cohere2MoeConfig.__post_init__'s rule
    c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
    for (int l = 0; l < c.n_layers; ++l) {
      const bool prefix = l < first_dense;
      const int i = prefix ? l : l - first_dense;
      c.sliding_layers[static_cast<size_t>(l)] = (i + 1) % (prefix ? prefix_pattern : pattern) != 0;
    }
  }
  // Experts (validate_moe checks them) and which layers are dense.
  c.moe_intermediate_size = c.intermediate_size;  // (the experts' width; the dense prefix's below)
  BRIGADE_RETURN_IF_ERROR(read_int(j, "prefix_dense_intermediate_size", c.intermediate_size, false));
  c.n_experts = 8;
  c.n_experts_per_tok = 2;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts", c.n_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_shared_experts", c.n_shared_experts, false));
  if (c.n_shared_experts < 0) return invalid_argument("config.json: num_shared_experts must be >= 0");
  BRIGADE_RETURN_IF_ERROR(read_dense_mlp_layers(j, c, first_dense));
  std::string selection = "softmax", combination = "average";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "expert_selection_fn", selection));
  BRIGADE_RETURN_IF_ERROR(read_string(j, "shared_expert_combination_strategy", combination));
  c.norm_topk_prob = true;
  if (selection == "softmax") {  // the softmax of the k logits: the softmax over all, renormalised over the k
    c.moe_scoring = MoeScoring::softmax;
  } else if (selection == "sigmoid") {
    c.moe_scoring = MoeScoring::sigmoid;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "norm_topk_prob", c.norm_topk_prob));
  } else {
    return unsupported("config.json: expert_selection_fn '" + selection + "' is not supported; supported: softmax, sigmoid");
  }
  if (combination != "average" && combination != "sum")
    return unsupported("config.json: shared_expert_combination_strategy '" + combination +
                       "' is not supported; supported: average, sum");
  c.routed_scaling_factor = combination == "average" && c.n_shared_experts > 0 ? 0.5f : 1.0f;
  // NoPE on the full layers, but on the dense ones when the dense prefix's pattern is 1.
  c.nope_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (int l = 0; l < c.n_layers; ++l)
    c.nope_layers[static_cast<size_t>(l)] = c.layer_window(l) == 0 && (c.is_moe_layer(l) || prefix_pattern != 1);
  return Status::ok();
}

}  // namespace

Status read_cohere(const json& j, ModelConfig& c) {
  std::string act = "silu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act != "silu") return unsupported("config.json: hidden_act '" + act + "' is not supported for " + c.arch + "; supported: silu");
  c.layer_norms = c.parallel_blocks = true;
  c.rms_eps = 1e-5f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "layer_norm_eps", c.rms_eps));
  c.rope_style = RopeStyle::interleaved;
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.logit_scale = 0.0625f;
  if (auto it = j.find("logit_scale"); it != j.end() && it->is_null()) c.logit_scale = 0.0f;  // CohereConfig allows None
  else BRIGADE_RETURN_IF_ERROR(read_float(j, "logit_scale", c.logit_scale));
  if (!std::isfinite(c.logit_scale) || c.logit_scale < 0.0f)
    return invalid_argument("config.json: logit_scale must be a positive number or null");
  if (!j.contains("tie_word_embeddings")) c.tie_embeddings = true;
  if (c.arch == "cohere") {
    c.sliding_window = 0;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_qk_norm", c.qk_norm));
    return Status::ok();
  }
  c.sliding_window = 4096;  // Cohere2Config's and Cohere2MoeConfig's
  if (auto it = j.find("sliding_window"); it != j.end() && it->is_null())
    return unsupported("config.json: sliding_window null is not supported for " + c.arch +
                       " (its sliding layers need a window)");
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  if (c.sliding_window <= 0) return invalid_argument("config.json: sliding_window must be > 0");
  if (c.arch == "cohere2_moe") return read_cohere2_moe(j, c);
  if (c.n_heads > 0) c.head_dim = c.hidden_size / c.n_heads;  // Cohere2Config ignores a head_dim field
  BRIGADE_RETURN_IF_ERROR(read_layer_types(j, c, 4));
  nope_on_full_layers(c);
  return Status::ok();
}

// rednote-hilab dots.llm1 (Dots1Config): Qwen3's attention (per-head q/k norms, attention_bias on
// q/k/v and o) with Dots1Config's windows: sliding_window (4096; null: none) on the
// "sliding_attention" layers of layer_types, which without it are the layers from
// max_window_layers (62) on. transformers ignores use_sliding_window (the Hub's configs write
// false), and so does brigade. The experts and routing: read_dots1 (models/deepseek_config.h).
Status read_dots1_attention(const json& j, ModelConfig& c) {
  c.qk_norm = true;
  c.qkv_bias = c.o_bias = c.attention_bias;
  BRIGADE_RETURN_IF_ERROR(read_window_or_null(j, c, 4096));
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) return read_layer_types(j, c, 1);
  int max_window_layers = 62;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "max_window_layers", max_window_layers, false));
  c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (int l = std::max(max_window_layers, 0); l < c.n_layers; ++l) c.sliding_layers[static_cast<size_t>(l)] = true;
  return Status::ok();
}

}  // namespace

Status read_llama4_scaling_beta(const json& j, ModelConfig& c) {
  const json* rope = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (auto it = j.find(key); it != j.end() && it->is_object()) rope = &*it;
  if (rope == nullptr)
    return unsupported("config.json: " + c.arch + " without rope_parameters is not supported (its config class's "
                       "default YaRN and query temperature are not applied); the released checkpoints write them");
  float beta = 0.0f;
  BRIGADE_RETURN_IF_ERROR(read_float(*rope, "llama_4_scaling_beta", beta));
  if (!std::isfinite(beta)) return invalid_argument("config.json: llama_4_scaling_beta must be a number");
  if (beta == 0.0f) return Status::ok();
  float floor_scale = 0.0f;
  BRIGADE_RETURN_IF_ERROR(read_float(*rope, "original_max_position_embeddings", floor_scale));
  if (!(floor_scale > 0.0f) || !std::isfinite(floor_scale))
    return invalid_argument("config.json: llama_4_scaling_beta needs the rope parameters' "
                            "original_max_position_embeddings > 0 (its positions' unit)");
  c.attn_temperature_floor = floor_scale;
  c.attn_temperature_scale = beta;
  c.attn_temperature_offset = 0.0f;
  c.attn_temperature_all_layers = true;
  return Status::ok();
}

// MiniCPM 1 / 2 / 4 (MiniCPMForCausalLM, remote code: MiniCPM-1B-sft, MiniCPM-2B-sft / dpo, MiniCPM4-0.5B /
// 8B): Llama's layer with muP scalings, which are Granite's multipliers: the embeddings times scale_emb,
// each sublayer's output times scale_depth / sqrt(num_hidden_layers) before its residual add, the final
// hidden state divided by hidden_size / dim_model_base before lm_head (MiniCPMConfig's defaults 1);
// q/k/v and o biases with attention_bias. MiniCPM4's sparse_config (InfLLM v2's sparse attention for
// long inputs) is not applied: attention stays dense, as vLLM runs it. use_mup false (no scalings
// at all in some MiniCPM4 derivatives' code) is refused by name.
Status read_minicpm(const json& j, ModelConfig& c) {
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.sliding_window = 0;
  bool mup = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_mup", mup));
  if (!mup) return unsupported("config.json: use_mup false is not supported for minicpm (brigade runs MiniCPM's muP scalings)");
  float scale_emb = 1.0f, scale_depth = 1.0f, dim_model_base = 1.0f;
  for (auto [key, v] : {std::pair{"scale_emb", &scale_emb}, {"scale_depth", &scale_depth}, {"dim_model_base", &dim_model_base}}) {
    BRIGADE_RETURN_IF_ERROR(read_float(j, key, *v));
    if (!(*v > 0.0f) || !std::isfinite(*v))
      return invalid_argument(std::string("config.json: ") + key + " must be a positive number");
  }
  c.embedding_multiplier = scale_emb;
  c.residual_multiplier = scale_depth / std::sqrt(static_cast<float>(c.n_layers));
  c.logits_scaling = static_cast<float>(c.hidden_size) / dim_model_base;
  return Status::ok();
}

// Meta's Code World Model (CwmForCausalLM: facebook/cwm; CwmConfig): Llama's layer without
// attention biases, sliding_window (8192) on the layers layer_types calls sliding, and by default
// (no layer_types) every 4th layer from layer 0 full, the others sliding; null: no window.
Status read_cwm(const json& j, ModelConfig& c) {
  c.qkv_bias = c.o_bias = false;  // CwmAttention: q/k/v/o without biases whatever attention_bias says
  c.sliding_window = 8192;
  if (auto it = j.find("sliding_window"); it != j.end() && (it->is_null() || *it == json(0))) {
    c.sliding_window = 0;
  } else {
    BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
    if (c.sliding_window < 0) return invalid_argument("config.json: sliding_window must be > 0, 0 or null");
  }
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) return read_layer_types(j, c, 4);
  c.sliding_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (int l = 0; l < c.n_layers; ++l) c.sliding_layers[static_cast<size_t>(l)] = l % 4 != 0;
  return Status::ok();
}

// Karpathy's nanochat (NanoChatForCausalLM: karpathy/nanochat-d32; NanoChatConfig): every RMSNorm
// without a weight (the layers', the final one and one over the embeddings before layer 0), RoPE
// with rotate_half's halves swapped and negated (cat(x2, -x1): the rotation by minus the angle),
// weightless per-head q/k norms after it, an ungated relu² MLP (mlp.fc1, mlp.fc2), the logits
// soft-capped (final_logit_softcapping, 15 by default).
Status read_nanochat(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "relu2"));
  c.mlp_activation = MlpActivation::relu2;
  c.qkv_bias = c.o_bias = c.attention_bias;  // Qwen3Attention's
  c.norms_weightless = true;
  c.qk_norm = c.qk_norm_weightless = c.qk_norm_after_rope = true;
  c.embed_norm = true;
  c.rope_reversed = true;
  c.sliding_window = 0;
  c.final_softcap = 15.0f;
  if (auto it = j.find("final_logit_softcapping"); it != j.end() && it->is_null()) c.final_softcap = 0.0f;
  else BRIGADE_RETURN_IF_ERROR(read_float(j, "final_logit_softcapping", c.final_softcap));
  if (!(c.final_softcap >= 0.0f) || !std::isfinite(c.final_softcap))
    return invalid_argument("config.json: final_logit_softcapping must be a positive number or null");
  return Status::ok();
}

Status read_llama_variant(const json& j, ModelConfig& c) {
  if (c.arch == "nanochat") return read_nanochat(j, c);
  if (c.arch == "phimoe") return read_phimoe(j, c);  // models/phimoe_config.h
  if (c.arch == "afmoe" || c.arch == "arcee") return read_arcee_family(j, c);  // models/arcee_config.h
  if (c.arch == "mimo_v2_flash" || c.arch == "exaone_moe" || c.arch == "kolibri1") return read_mimo_exaone(j, c);  // models/mimo_exaone_config.h
  if (is_classic_decoder(c.arch)) return read_classic_decoder(j, c);  // models/classic_decoders_config.h
  if (c.arch == "ministral3") return read_llama4_scaling_beta(j, c);
  if (c.arch == "ministral") return read_ministral(j, c);
  if (c.arch == "dots1") return read_dots1_attention(j, c);
  if (c.arch == "cohere" || c.arch == "cohere2" || c.arch == "cohere2_moe") return read_cohere(j, c);
  if (c.arch == "llama4_text") return read_llama4(j, c);
  if (c.arch == "minimax_m2") return read_minimax_m2(j, c);
  if (c.arch == "apertus") return read_apertus(j, c);
  if (c.arch == "olmo2" || c.arch == "olmo3" || c.arch == "flex_olmo") return read_olmo(j, c);
  if (c.arch == "dbrx") return read_dbrx(j, c);  // models/dbrx_config.h
  if (c.arch == "internlm2" || c.arch == "internlm3") return read_internlm(j, c);  // models/internlm_config.h
  if (c.arch == "minicpm") return read_minicpm(j, c);
  if (c.arch == "cwm") return read_cwm(j, c);
  if (c.arch == "olmo") {  // OlmoForCausalLM (OLMo 1): Llama's layers, LayerNorms without weights
    c.qkv_bias = c.o_bias = c.attention_bias;
    c.layer_norms = c.norms_weightless = true;
    c.rms_eps = 1e-5f;  // OlmoLayerNorm's, fixed (OlmoConfig has no eps)
    c.sliding_window = 0;
    return read_clip_qkv(j, c);
  }
  if (c.arch == "olmoe") {  // OlmoeAttention: pre-norm layers, OLMo 2's whole-projection q/k norms
    BRIGADE_RETURN_IF_ERROR(read_clip_qkv(j, c));
    c.qkv_bias = c.o_bias = c.attention_bias;
    c.qk_norm = c.qk_norm_whole = true;
    c.sliding_window = 0;
    return Status::ok();
  }
  if (c.arch == "exaone4") return read_exaone4(j, c);
  if (c.arch == "flint") return read_flint(j, c);
  if (c.arch == "bitnet") return read_bitnet(j, c);
  if (c.arch == "mellum") return read_mellum(j, c);
  c.sliding_window = 0;  // none of the others slides
  if (c.arch == "glm4" || c.arch == "glm") {  // Glm4Attention / GlmAttention: q/k/v biases (attention_bias,
    c.attention_bias = true;                     // true by default), o without; RoPE of adjacent pairs
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", c.attention_bias));
    c.qkv_bias = c.attention_bias;
    c.sandwich_norms = c.arch == "glm4";  // GLM-4-0414's four norms; GlmDecoderLayer (GLM-4-9B, GLM-Edge) has Llama's two
    c.rope_style = RopeStyle::interleaved;
    return Status::ok();
  }
  if (c.arch == "helium") {  // HeliumAttention (Granite's): q/k/v biases (attention_bias), o without; the MLP's
    c.qkv_bias = c.attention_bias;  // (mlp_bias); RoPE of adjacent pairs
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "mlp_bias", c.mlp_bias));
    c.rope_style = RopeStyle::interleaved;
    return Status::ok();
  }
  if (c.arch == "seed_oss") {  // SeedOssAttention: q/k/v (attention_bias, true by default) and o biases apart
    c.attention_bias = true;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", c.attention_bias));
    c.qkv_bias = c.attention_bias;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_out_bias", c.o_bias));
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "mlp_bias", c.mlp_bias));
    return Status::ok();
  }
  if (c.arch == "ernie4_5" || c.arch == "ernie4_5_moe") {  // use_bias on q/k/v, o and the MLP; RoPE of adjacent pairs
    bool bias = false;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_bias", bias));
    if (bias && c.arch == "ernie4_5_moe")  // Ernie4_5_MoeMLP's shared experts would carry them too
      return unsupported("config.json: use_bias = true is not supported for ernie4_5_moe (biased shared experts); "
                         "ERNIE 4.5's MoE checkpoints have it false");
    c.qkv_bias = c.o_bias = c.mlp_bias = bias;
    c.rope_style = RopeStyle::interleaved;
    return Status::ok();
  }
  // hunyuan_v1_dense and hunyuan_v1_moe: q/k/v and o biases (attention_bias); per-head norms after
  // RoPE (the MoE's experts: read_moe).
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.qk_norm = c.qk_norm_after_rope = true;
  return Status::ok();
}

}  // namespace brigade
