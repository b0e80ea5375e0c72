#include "models/gpt_decoders_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "models/config_json.h"
#include "models/fused_rows.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// The architecture a config describes by its model_type ("" for none of them); the RW remote
// code's Falcon configs (RefinedWebModel: Falcon-7B's; RefinedWeb: the new decoder, Falcon-40B's)
// as falcon.
std::string gpt_model_type(const json& j) {
  const std::string type = config_model_type(j);
  if (type == "RefinedWeb" || type == "RefinedWebModel") return "falcon";
  return is_gpt_decoder(type) ? type : "";
}

using Names = std::vector<std::pair<const char*, const char*>>;

// Each class's own name (first) copied under the common one (second) where config.json has none.
void copy_names(json& j, const Names& names) {
  for (const auto& [hub, ours] : names)
    if (j.contains(hub) && !j.contains(ours)) j[ours] = j[hub];
}

// intermediate_size = 4 x hidden_size: the MLP width these classes fix or default to.
void four_times_hidden(json& j) {
  if (auto h = j.find("hidden_size"); h != j.end() && h->is_number_integer()) j["intermediate_size"] = 4 * h->get<int64_t>();
}

// Falcon's config names as the common ones (apply_gpt_config_names): the RW remote code's n_embed,
// n_head, n_layer, n_head_kv; FalconConfig's activation, ffn_hidden_size (null: 4 * hidden) and the
// K/V heads its attention produces (num_kv_heads, null: one per query head, with
// new_decoder_architecture or without multi_query; else 1); its defaults (tied, bos = eos = 11).
void apply_falcon_config_names(json& j) {
  if (config_model_type(j) == "RefinedWeb" && !j.contains("new_decoder_architecture")) j["new_decoder_architecture"] = true;
  copy_names(j, {{"n_embed", "hidden_size"},
                {"n_head", "num_attention_heads"},
                {"n_layer", "num_hidden_layers"},
                {"n_head_kv", "num_kv_heads"},
                {"activation", "hidden_act"}});
  auto flag = [&](const char* key, bool fallback) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
  };
  const bool per_query = flag("new_decoder_architecture", false) || !flag("multi_query", true);
  if (auto kv = j.find("num_kv_heads"); per_query && kv != j.end() && !kv->is_null()) j["num_key_value_heads"] = *kv;
  else if (per_query && j.contains("num_attention_heads")) j["num_key_value_heads"] = j["num_attention_heads"];
  else if (!per_query) j["num_key_value_heads"] = 1;
  if (auto ffn = j.find("ffn_hidden_size"); ffn != j.end() && !ffn->is_null()) j["intermediate_size"] = *ffn;
  else four_times_hidden(j);
  if (!j.contains("tie_word_embeddings")) j["tie_word_embeddings"] = true;
  for (const char* id : {"bos_token_id", "eos_token_id"})
    if (!j.contains(id)) j[id] = 11;  // FalconConfig's
}

// BLOOM's (BloomConfig: n_embed, n_layer, n_head; seq_length, which some of the Hub's carry), MPT's
// (MptConfig: d_model, n_heads, n_layers, max_seq_len) and OPT's (OPTConfig: ffn_dim,
// activation_function) names as the common ones; BLOOM's and MPT's MLP 4 x hidden; their class
// defaults (tied; BLOOM's bos 1 / eos 2, OPT's 2 / 2).
void apply_bloom_mpt_opt_config_names(const std::string& type, json& j) {
  static const Names kBloom = {{"n_embed", "hidden_size"},
                               {"n_layer", "num_hidden_layers"},
                               {"n_head", "num_attention_heads"},
                               {"seq_length", "max_position_embeddings"}};
  static const Names kMpt = {{"d_model", "hidden_size"},
                             {"n_heads", "num_attention_heads"},
                             {"n_layers", "num_hidden_layers"},
                             {"max_seq_len", "max_position_embeddings"}};
  static const Names kOpt = {{"ffn_dim", "intermediate_size"}, {"activation_function", "hidden_act"}};
  copy_names(j, type == "bloom" ? kBloom : type == "mpt" ? kMpt : kOpt);
  if (type != "opt") four_times_hidden(j);
  if (!j.contains("tie_word_embeddings")) j["tie_word_embeddings"] = true;
  if (type == "mpt") return;
  for (const char* id : {"bos_token_id", "eos_token_id"})
    if (!j.contains(id)) j[id] = type == "opt" || std::string(id) == "eos_token_id" ? 2 : 1;
}

// Falcon (FalconForCausalLM; the RW remote code's RWForCausalLM): the attention and the MLP side by
// side (parallel_attn, and always with new_decoder_architecture) on one LayerNorm, or on ln_attn and
// ln_mlp (the new decoder's num_ln_in_parallel_attn, 2 by default there), else sequential;
// `bias` on every projection; RoPE (NeoX halves) over the whole head. ALiBi (Falcon-RW's alibi) and
// the combinations transformers' FalconDecoderLayer cannot run are refused by name.
Status read_falcon(const json& j, ModelConfig& c) {
  bool alibi = false, new_decoder = false, parallel = true, bias = false, multi_query = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "alibi", alibi));
  if (alibi)
    return unsupported("config.json: alibi = true is not supported for falcon (ALiBi position biases, Falcon-RW's); "
                       "brigade runs Falcon's rotary models");
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "new_decoder_architecture", new_decoder));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "parallel_attn", parallel));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "bias", bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "multi_query", multi_query));
  int norms = new_decoder ? 2 : 1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_ln_in_parallel_attn", norms, false));
  if (norms != 1 && norms != 2)
    return invalid_argument("config.json: num_ln_in_parallel_attn must be 1, 2 or null (got " + std::to_string(norms) + ")");
  if (new_decoder && !parallel)
    return unsupported("config.json: new_decoder_architecture = true with parallel_attn = false is not supported for "
                       "falcon (transformers' FalconDecoderLayer builds no norms it could run); the new decoder is parallel");
  if (!new_decoder && parallel && norms == 2)
    return unsupported("config.json: num_ln_in_parallel_attn = 2 is not supported for falcon without "
                       "new_decoder_architecture (transformers' FalconDecoderLayer reads one norm there)");
  if (!new_decoder && !multi_query && c.n_kv_heads != c.n_heads)
    return invalid_argument("config.json: num_kv_heads (" + std::to_string(c.n_kv_heads) +
                            ") must equal num_attention_heads for falcon without multi_query or the new decoder "
                            "(its query_key_value holds a k and a v head per query head)");
  if (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0)
    return invalid_argument("config.json: num_attention_heads (" + std::to_string(c.n_heads) +
                            ") must be a multiple of num_kv_heads (" + std::to_string(c.n_kv_heads) + ") for falcon");
  c.parallel_blocks = parallel || new_decoder;
  c.parallel_mlp_norm = new_decoder && norms == 2;
  c.qkv_bias = c.o_bias = c.mlp_bias = c.attention_bias = bias;
  return Status::ok();
}

// hidden_act (`fallback` when absent) into c.mlp_activation: exact-erf gelu (Pythia's), the tanh
// form under its three names, OPT's relu; refused by name otherwise.
Status read_activation(const json& j, const char* fallback, ModelConfig& c) {
  std::string act = fallback;
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act == "gelu" || act == "gelu_new" || act == "gelu_fast" || act == "gelu_pytorch_tanh") {
    c.mlp_activation = act == "gelu" ? MlpActivation::gelu : MlpActivation::gelu_tanh;
    return Status::ok();
  }
  if (act == "relu" && c.arch == "opt") {
    c.mlp_activation = MlpActivation::relu;
    return Status::ok();
  }
  return unsupported("config.json: activation '" + act + "' is not supported for " + c.arch +
                     "; supported: gelu, gelu_new, gelu_fast, gelu_pytorch_tanh" + (c.arch == "opt" ? ", relu" : ""));
}

// `key` (a flag transformers reads) must not be `refused`; its meaning named in the refusal.
Status refuse_flag(const json& j, const ModelConfig& c, const char* key, bool refused, const char* why) {
  bool v = !refused;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, key, v));
  if (v == refused)
    return unsupported(std::string("config.json: ") + key + " = " + (refused ? "true" : "false") +
                       " is not supported for " + c.arch + " (" + why + "); no released checkpoint sets it");
  return Status::ok();
}

// GPT-NeoX's rotary width: rope_parameters' partial_rotary_factor (transformers 5), else the
// Hub's rotary_pct, else GPTNeoXConfig's 0.25; int(head_dim * factor) as GPTNeoXAttention takes it.
Status read_neox_rotary(const json& j, ModelConfig& c) {
  float partial = 0.25f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "rotary_pct", partial));
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (auto it = j.find(key); it != j.end() && it->is_object())
      BRIGADE_RETURN_IF_ERROR(read_float(*it, "partial_rotary_factor", partial));
  if (!(partial > 0.0f && partial <= 1.0f))
    return invalid_argument("config.json: rotary_pct must be in (0, 1] (got " + std::to_string(partial) + ")");
  c.rotary_dim = static_cast<int>(static_cast<float>(c.head_dim) * partial);
  return Status::ok();
}

// GPT-J's rotary_dim: an even number of dims in (0, head_dim]; null (the whole hidden size in
// GPTJAttention, which only fits one head) refused.
Status read_gptj_rotary(const json& j, ModelConfig& c) {
  auto it = j.find("rotary_dim");
  if (it != j.end() && it->is_null())  // (CodeGen's rotary embedding is then hidden_size wide: no head fits it)
    return unsupported("config.json: rotary_dim null is not supported for " + c.arch + "; " + c.arch +
                       " rotates rotary_dim (64) dims of each head");
  c.rotary_dim = 64;  // GPTJConfig's and CodeGenConfig's default
  BRIGADE_RETURN_IF_ERROR(read_int(j, "rotary_dim", c.rotary_dim, false));
  if (c.rotary_dim <= 0 || c.rotary_dim > c.head_dim || c.rotary_dim % 2 != 0)
    return invalid_argument("config.json: rotary_dim must be even and in (0, head_dim = " + std::to_string(c.head_dim) +
                            "] (got " + std::to_string(c.rotary_dim) + ")");
  c.rope_style = RopeStyle::interleaved;  // rotate_every_two: pairs (2i, 2i + 1)
  c.rope_theta = 10000.0f;                // create_sinusoidal_positions' fixed base
  return Status::ok();
}

// GPT-2's and GPTBigCode's attention flags beyond the plain causal one.
Status read_gpt2_attention(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(refuse_flag(j, c, "scale_attn_by_inverse_layer_idx", true,
                                      "each layer's scores divided by its index + 1"));
  BRIGADE_RETURN_IF_ERROR(refuse_flag(j, c, "scale_attn_weights", false, "scores not divided by sqrt(head_dim)"));
  BRIGADE_RETURN_IF_ERROR(refuse_flag(j, c, "add_cross_attention", true, "cross-attention to an encoder"));
  // reorder_and_upcast_attn and GPTBigCode's attention_softmax_in_fp32 change only fp16 rounding;
  // brigade's attention computes its scores in f32 anyway.
  c.learned_positions = true;
  c.qkv_bias = c.o_bias = true;
  return Status::ok();
}

}  // namespace

// BLOOM's ALiBi slopes (transformers' _get_alibi_slopes, in f32 as torch computes them): for p the
// largest power of two <= n, 2^(-8/p) to the powers 1..p; the heads past p take 2^(-4/p) to the
// odd powers 1, 3, ...
std::vector<float> bloom_alibi_slopes(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  auto powers = [](double base_exp, int count, int step, std::vector<float>& out) {
    const float base = static_cast<float>(std::pow(2.0, base_exp));
    for (int i = 0, e = 1; i < count; ++i, e += step) out.push_back(std::pow(base, static_cast<float>(e)));
  };
  std::vector<float> slopes;
  powers(-std::pow(2.0, -(std::log2(p) - 3.0)), p, 1, slopes);
  if (p != n) powers(-std::pow(2.0, -(std::log2(2.0 * p) - 3.0)), std::min(p, n - p), 2, slopes);
  return slopes;
}

// MPT's (transformers' build_mpt_alibi_tensor): for p the smallest power of two >= n, 1 / 2^(i *
// alibi_bias_max / p) for i = 1..p; when p > n, the odd-indexed ones then the even-indexed ones,
// the first n of those.
std::vector<float> mpt_alibi_slopes(int n, float bias_max) {
  int p = 1;
  while (p < n) p *= 2;
  std::vector<float> all;
  for (int i = 1; i <= p; ++i)
    all.push_back(1.0f / std::pow(2.0f, static_cast<float>(i) * (bias_max / static_cast<float>(p))));
  if (p == n) return all;
  std::vector<float> slopes;
  for (int start : {1, 0})
    for (int i = start; i < p; i += 2) slopes.push_back(all[static_cast<size_t>(i)]);
  slopes.resize(static_cast<size_t>(n));
  return slopes;
}

namespace {

// BLOOM (BloomForCausalLM): biases everywhere, the embeddings' own LayerNorm
// (word_embeddings_layernorm: embed_norm), query_key_value per head, bloom_gelu (the tanh form),
// ALiBi, tied.
Status read_bloom(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(refuse_flag(j, c, "apply_residual_connection_post_layernorm", true,
                                      "the residual taken after each block's LayerNorm"));
  c.mlp_activation = MlpActivation::gelu_tanh;  // bloom_gelu_forward, whatever hidden_act says
  c.qkv_bias = c.o_bias = true;
  c.embed_norm = true;
  c.alibi_slopes = bloom_alibi_slopes(c.n_heads);
  return Status::ok();
}

// A positive number or null under `key` of `obj`, into out (unchanged for null or absent).
Status read_positive_or_null(const json& obj, const char* key, float& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::ok();
  if (!it->is_number() || !(it->get<double>() > 0.0) || !std::isfinite(it->get<double>()))
    return invalid_argument(std::string("config.json: attn_config.") + key + " must be a positive number or null, not " +
                            it->dump());
  out = it->get<float>();
  return Status::ok();
}

// MPT (MptForCausalLM, the Hub's MPTForCausalLM): as transformers' MptModel runs it, no biases
// (no_bias), LayerNorms with a weight only, Wqkv q|k|v, a 4 x d_model exact-GELU MLP, ALiBi with
// alibi_bias_max 8 (MptModel's, whatever attn_config says: another value is refused), attn_config's
// clip_qkv and softmax_scale; what MptModel does not run refused.
Status read_mpt(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(refuse_flag(j, c, "no_bias", false, "biases, which transformers' MptModel does not load"));
  if (auto it = j.find("logit_scale"); it != j.end() && !it->is_null())
    return unsupported("config.json: logit_scale " + it->dump() + " is not supported for mpt (transformers' "
                       "MptForCausalLM does not scale its logits); no released MPT sets it");
  if (auto it = j.find("expansion_ratio"); it != j.end() && !(it->is_number() && it->get<double>() == 4.0))
    return unsupported("config.json: expansion_ratio " + it->dump() + " is not supported for mpt (transformers' "
                       "MptMLP is 4 x d_model wide)");
  float bias_max = 8.0f;
  if (auto a = j.find("attn_config"); a != j.end() && a->is_object()) {
    std::string type = "multihead_attention";
    BRIGADE_RETURN_IF_ERROR(read_string(*a, "attn_type", type));
    if (type != "multihead_attention")
      return unsupported("config.json: attn_config.attn_type '" + type + "' is not supported for mpt; "
                         "transformers' MptAttention is multihead_attention");
    for (const auto& [key, why] : {std::pair{"qk_ln", "LayerNorms of the whole q and k"},
                                   {"prefix_lm", "a bidirectional prompt"},
                                   {"rope", "RoPE in place of ALiBi"}}) {
      bool on = false;
      BRIGADE_RETURN_IF_ERROR(read_bool(*a, key, on));
      if (on)
        return unsupported(std::string("config.json: attn_config.") + key + " = true is not supported for mpt (" + why +
                           "; transformers' MptAttention has none)");
    }
    bool alibi = true;
    BRIGADE_RETURN_IF_ERROR(read_bool(*a, "alibi", alibi));
    if (!alibi)
      return unsupported("config.json: attn_config.alibi = false is not supported for mpt (transformers' MptModel "
                         "always adds ALiBi)");
    BRIGADE_RETURN_IF_ERROR(read_positive_or_null(*a, "clip_qkv", c.clip_qkv));
    BRIGADE_RETURN_IF_ERROR(read_positive_or_null(*a, "softmax_scale", c.attn_scale));
    BRIGADE_RETURN_IF_ERROR(read_positive_or_null(*a, "alibi_bias_max", bias_max));
    if (bias_max != 8.0f)  // (llm-foundry's own code honours it; vLLM too)
      return unsupported("config.json: attn_config.alibi_bias_max " + (*a)["alibi_bias_max"].dump() +
                         " is not supported for mpt (transformers' MptModel uses 8 whatever it says); every released "
                         "MPT sets 8");
  }
  c.mlp_activation = MlpActivation::gelu;  // nn.GELU(approximate="none")
  c.norm_bias = false;                     // low_precision_layernorm without its bias
  c.qkv_bias = c.o_bias = c.mlp_bias = false;
  c.alibi_slopes = mpt_alibi_slopes(c.n_heads, bias_max);
  return Status::ok();
}

// OPT (OPTForCausalLM: facebook/opt-125m ... 66b, OPT-IML): learned positions (a table offset by 2
// rows: OPTLearnedPositionalEmbedding, the first two dropped at open), the pre-norm layer with
// biased LayerNorms, q/k/v/out and fc1 / fc2 with enable_bias, relu, tied. OPT-350m's post-norm
// layer and its project_in / project_out are refused by name.
Status read_opt(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(refuse_flag(j, c, "do_layer_norm_before", false, "each block's LayerNorm after it: OPT-350m's"));
  BRIGADE_RETURN_IF_ERROR(refuse_flag(j, c, "_remove_final_layer_norm", true, "no final LayerNorm"));
  BRIGADE_RETURN_IF_ERROR(refuse_flag(j, c, "layer_norm_elementwise_affine", false, "LayerNorms without weight or bias"));
  int proj = c.hidden_size;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "word_embed_proj_dim", proj, false));
  if (proj != c.hidden_size)
    return unsupported("config.json: word_embed_proj_dim " + std::to_string(proj) + " (!= hidden_size " +
                       std::to_string(c.hidden_size) + ": OPT-350m's project_in / project_out) is not supported for opt");
  bool bias = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "enable_bias", bias));
  c.qkv_bias = c.o_bias = c.mlp_bias = c.attention_bias = bias;
  c.learned_positions = true;
  return Status::ok();
}

// GPT-Neo (GPTNeoForCausalLM: EleutherAI/gpt-neo-125m / 1.3B / 2.7B): GPT-2's learned positions and
// biased LayerNorms, q/k/v without biases and out_proj with one, c_fc / c_proj Linears (not
// Conv1D), scores not scaled (softmax_scale 1), and attention_types' "local" layers seeing the last
// window_size positions (their own included).
Status read_gpt_neo(const json& j, ModelConfig& c) {
  c.learned_positions = true;
  c.qkv_bias = false;
  c.o_bias = true;
  c.attn_scale = 1.0f;  // GPTNeoSelfAttention: q . k unscaled
  c.sliding_window = 256;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "window_size", c.sliding_window, false));
  if (c.sliding_window <= 0)
    return invalid_argument("config.json: window_size must be > 0 (got " + std::to_string(c.sliding_window) + ")");
  // attention_types: [[["global", "local"], 12]] expands to the layers' kinds, in order.
  json types = json::array({json::array({json::array({"global", "local"}), 12})});
  if (auto it = j.find("attention_types"); it != j.end() && !it->is_null()) types = *it;
  std::vector<bool> local;
  const std::string bad = "config.json: attention_types must be a list of [[\"global\" | \"local\", ...], count]";
  if (!types.is_array()) return invalid_argument(bad);
  for (const json& item : types) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_array() || !item[1].is_number_integer() || item[1].get<int>() < 0)
      return invalid_argument(bad);
    for (int r = 0; r < item[1].get<int>(); ++r)
      for (const json& kind : item[0]) {
        if (kind != "global" && kind != "local")
          return invalid_argument(bad + " (got " + kind.dump() + ")");
        local.push_back(kind == "local");
      }
  }
  if (local.size() != static_cast<size_t>(c.n_layers))
    return invalid_argument("config.json: attention_types expands to " + std::to_string(local.size()) +
                            " layers, but num_layers is " + std::to_string(c.n_layers));
  c.sliding_layers = std::move(local);
  return Status::ok();
}

// CodeGenAttention's mp_num: qkv_proj's rows are 4 blocks of q | v | k.
constexpr int64_t kCodegenBlocks = 4;

// Fused q|k|v rows of each part: GPT-NeoX's (and GPTBigCode MHA's) per head [heads, 3, head_dim],
// Falcon's per KV group [kv heads, query heads per group + 2, head_dim] (Falcon-7B's MQA one group:
// q, k, v one after the other; its MHA a group per head, as GPT-NeoX's), CodeGen's in four blocks
// of q | v | k, else q, k, v one after the other.
std::vector<std::vector<RowRange>> qkv_parts(const ModelConfig& c, bool per_head) {
  const int64_t hd = c.head_dim, q = int64_t{c.n_heads} * hd, kv = int64_t{c.n_kv_heads} * hd;
  if (c.arch == "falcon") return qkv_rows_per_kv_group(c.n_kv_heads, c.n_heads / c.n_kv_heads, hd);
  if (c.arch == "codegen") {
    // CodeGenAttention's qkv_proj: kCodegenBlocks blocks of [q | v | k], each hidden / 4 rows; the
    // heads' q (and k, v) are the blocks' parts one after the other.
    const int64_t local = q / kCodegenBlocks;
    std::vector<std::vector<RowRange>> parts(3);
    for (int64_t b = 0; b < kCodegenBlocks; ++b) {
      parts[0].push_back({3 * local * b, local});              // q
      parts[1].push_back({3 * local * b + 2 * local, local});  // k (last in the block)
      parts[2].push_back({3 * local * b + local, local});      // v (second)
    }
    return parts;
  }
  if (!per_head) return {{{0, q}}, {{q, kv}}, {{q + kv, kv}}};
  std::vector<std::vector<RowRange>> parts(3);
  for (int64_t h = 0; h < c.n_heads; ++h)
    for (int64_t p = 0; p < 3; ++p) parts[static_cast<size_t>(p)].push_back({(3 * h + p) * hd, hd});
  return parts;
}

// A Conv1D weight [in, out] as the [out, in] a Linear stores, copied into arena.
RawTensor transposed(const RawTensor& t, std::vector<std::vector<uint8_t>>& arena) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const size_t e = dtype_size(t.dtype);
  std::vector<uint8_t>& buf = arena.emplace_back(t.bytes.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < cols; ++k)
      std::memcpy(buf.data() + static_cast<size_t>(k * rows + i) * e, t.bytes.data() + static_cast<size_t>(i * cols + k) * e, e);
  RawTensor out = t;
  out.shape = {cols, rows};
  out.bytes = {buf.data(), buf.size()};
  return out;
}

using Renames = std::vector<std::pair<std::string, std::string>>;

// OPT's position table starts at row 2 (OPTLearnedPositionalEmbedding: position p reads row p + 2).
constexpr int64_t kOptPositionOffset = 2;

// Each architecture's names (after the prefix, transformer. or gpt_neox., is made explicit) as the
// Llama decoder's; ".self_attn.qkv." marks a fused q|k|v, split by gpt_decoder_tensors.
const Renames& renames(const std::string& arch) {
  static const Renames kGpt2 = {{"transformer.wte.", "model.embed_tokens."}, {"transformer.wpe.", "model.embed_positions."},
                                {"transformer.ln_f.", "model.norm."},       {"transformer.h.", "model.layers."},
                                {".ln_1.", ".input_layernorm."},            {".ln_2.", ".post_attention_layernorm."},
                                {".attn.c_attn.", ".self_attn.qkv."},       {".attn.c_proj.", ".self_attn.o_proj."},
                                {".mlp.c_fc.", ".mlp.up_proj."},            {".mlp.c_proj.", ".mlp.down_proj."}};
  static const Renames kGptj = {{"transformer.wte.", "model.embed_tokens."}, {"transformer.ln_f.", "model.norm."},
                                {"transformer.h.", "model.layers."},       {".ln_1.", ".input_layernorm."},
                                {".attn.q_proj.", ".self_attn.q_proj."},   {".attn.k_proj.", ".self_attn.k_proj."},
                                {".attn.v_proj.", ".self_attn.v_proj."},   {".attn.out_proj.", ".self_attn.o_proj."},
                                {".mlp.fc_in.", ".mlp.up_proj."},          {".mlp.fc_out.", ".mlp.down_proj."}};
  static const Renames kCodegen = {{"transformer.wte.", "model.embed_tokens."}, {"transformer.ln_f.", "model.norm."},
                                   {"transformer.h.", "model.layers."},       {".ln_1.", ".input_layernorm."},
                                   {".attn.qkv_proj.", ".self_attn.qkv."},    {".attn.out_proj.", ".self_attn.o_proj."},
                                   {".mlp.fc_in.", ".mlp.up_proj."},          {".mlp.fc_out.", ".mlp.down_proj."}};
  static const Renames kNeox = {{"gpt_neox.embed_in.", "model.embed_tokens."},
                                {"gpt_neox.final_layer_norm.", "model.norm."},
                                {"gpt_neox.layers.", "model.layers."},
                                {".attention.query_key_value.", ".self_attn.qkv."},
                                {".attention.dense.", ".self_attn.o_proj."},
                                {".mlp.dense_h_to_4h.", ".mlp.up_proj."},
                                {".mlp.dense_4h_to_h.", ".mlp.down_proj."}};
  static const Renames kFalcon = {{"transformer.word_embeddings.", "model.embed_tokens."},
                                  {"transformer.ln_f.", "model.norm."},
                                  {"transformer.h.", "model.layers."},
                                  {".self_attention.query_key_value.", ".self_attn.qkv."},
                                  {".self_attention.dense.", ".self_attn.o_proj."},
                                  {".ln_attn.", ".input_layernorm."},
                                  {".ln_mlp.", ".post_attention_layernorm."},
                                  {".mlp.dense_h_to_4h.", ".mlp.up_proj."},
                                  {".mlp.dense_4h_to_h.", ".mlp.down_proj."}};
  static const Renames kBloom = {{"transformer.word_embeddings_layernorm.", "model.embed_norm."},
                                 {"transformer.word_embeddings.", "model.embed_tokens."},
                                 {"transformer.ln_f.", "model.norm."},
                                 {"transformer.h.", "model.layers."},
                                 {".self_attention.query_key_value.", ".self_attn.qkv."},
                                 {".self_attention.dense.", ".self_attn.o_proj."},
                                 {".mlp.dense_h_to_4h.", ".mlp.up_proj."},
                                 {".mlp.dense_4h_to_h.", ".mlp.down_proj."}};
  static const Renames kMpt = {{"transformer.wte.", "model.embed_tokens."}, {"transformer.norm_f.", "model.norm."},
                               {"transformer.blocks.", "model.layers."},    {".norm_1.", ".input_layernorm."},
                               {".attn.Wqkv.", ".self_attn.qkv."},          {".attn.out_proj.", ".self_attn.o_proj."},
                               {".norm_2.", ".post_attention_layernorm."},  {".ffn.up_proj.", ".mlp.up_proj."},
                               {".ffn.down_proj.", ".mlp.down_proj."}};
  static const Renames kOpt = {{"model.decoder.embed_tokens.", "model.embed_tokens."},
                               {"model.decoder.embed_positions.", "model.embed_positions."},
                               {"model.decoder.final_layer_norm.", "model.norm."},
                               {"model.decoder.layers.", "model.layers."},
                               {".self_attn.out_proj.", ".self_attn.o_proj."},
                               {".self_attn_layer_norm.", ".input_layernorm."},
                               {".final_layer_norm.", ".post_attention_layernorm."},
                               {".fc1.", ".mlp.up_proj."},
                               {".fc2.", ".mlp.down_proj."}};
  static const Renames kGptNeo = {{"transformer.wte.", "model.embed_tokens."},
                                  {"transformer.wpe.", "model.embed_positions."},
                                  {"transformer.ln_f.", "model.norm."},
                                  {"transformer.h.", "model.layers."},
                                  {".ln_1.", ".input_layernorm."},
                                  {".ln_2.", ".post_attention_layernorm."},
                                  {".attn.attention.q_proj.", ".self_attn.q_proj."},
                                  {".attn.attention.k_proj.", ".self_attn.k_proj."},
                                  {".attn.attention.v_proj.", ".self_attn.v_proj."},
                                  {".attn.attention.out_proj.", ".self_attn.o_proj."},
                                  {".mlp.c_fc.", ".mlp.up_proj."},
                                  {".mlp.c_proj.", ".mlp.down_proj."}};
  if (arch == "gpt_neo") return kGptNeo;
  if (arch == "codegen") return kCodegen;
  if (arch == "bloom") return kBloom;
  if (arch == "mpt") return kMpt;
  if (arch == "opt") return kOpt;
  return arch == "gpt_neox" ? kNeox : arch == "gptj" ? kGptj : arch == "falcon" ? kFalcon : kGpt2;
}

// The buffers transformers keeps beside the weights (older checkpoints store them): nothing to load.
bool is_buffer(const std::string& name) {
  for (const char* s : {".attn.bias", ".attn.masked_bias", ".attention.bias", ".attention.masked_bias", ".rotary_emb.inv_freq",
                        ".attn.causal_mask"})  // (CodeGen's)
    if (name.ends_with(s)) return true;
  return false;
}

// `name` with its architecture's prefix made explicit: the Hub's GPT-2 stores h.N.*, wte, wpe and
// ln_f without transformer. (saved from GPT2Model); lm_head and NeoX's embed_out sit outside it.
std::string with_prefix(const std::string& arch, const std::string& name) {
  if (arch == "gpt_neox") return name == "embed_out.weight" ? "lm_head.weight" : name;
  if (arch == "opt") return name.starts_with("decoder.") ? "model." + name : name;  // saved from OPTModel
  if (name.starts_with("transformer.") || name.starts_with("lm_head.")) return name;
  return "transformer." + name;
}

// A fused q|k|v (weight [rows, hidden] or bias [rows]) split into q_proj, k_proj and v_proj.
Status split_qkv(const ModelConfig& c, const std::string& name, const RawTensor& t,
                 std::map<std::string, RawTensor>& out, std::vector<std::vector<uint8_t>>& arena) {
  const int64_t rows = int64_t{c.n_heads + 2 * c.n_kv_heads} * c.head_dim;
  const bool weight = name.ends_with(".weight");
  const std::vector<int64_t> want = weight ? std::vector<int64_t>{rows, c.hidden_size} : std::vector<int64_t>{rows};
  if (t.shape != want || t.block_quantized()) {
    RawTensor w;
    w.shape = want;
    return corrupt(t.file + ": tensor '" + t.name + "' has shape " + t.shape_string() + " but the config needs " +
                   w.shape_string() + " (" + c.arch + "'s fused q|k|v)");
  }
  // GPT-NeoX's, and GPTBigCode's without multi_query, interleave the three per head.
  const bool per_head = c.arch == "gpt_neox" || c.arch == "bloom" || (c.arch == "gpt_bigcode" && c.n_kv_heads == c.n_heads);
  const auto parts = qkv_parts(c, per_head);
  const size_t at = name.find(".qkv.");
  static constexpr const char* kParts[] = {"q_proj", "k_proj", "v_proj"};
  for (size_t p = 0; p < 3; ++p) {
    const std::string part = name.substr(0, at + 1) + kParts[p] + name.substr(at + 4);
    out.insert_or_assign(part, take_rows(t, parts[p], part, arena));
  }
  return Status::ok();
}

}  // namespace

bool is_gpt_decoder(const std::string& arch) {
  return arch == "gpt_neox" || arch == "gptj" || arch == "gpt2" || arch == "gpt_bigcode" || arch == "falcon" ||
         arch == "bloom" || arch == "mpt" || arch == "opt" || arch == "gpt_neo" || arch == "codegen";
}

void apply_gpt_config_names(json& j) {
  const std::string type = gpt_model_type(j);
  if (type.empty()) return;
  if (type == "falcon") return apply_falcon_config_names(j);
  if (type == "bloom" || type == "mpt" || type == "opt") return apply_bloom_mpt_opt_config_names(type, j);
  if (type == "gpt_neox") {
    if (j.contains("rotary_emb_base") && !j.contains("rope_theta")) j["rope_theta"] = j["rotary_emb_base"];
    return;
  }
  copy_names(j, {{"n_embd", "hidden_size"},
                {"n_layer", "num_hidden_layers"},
                {"n_head", "num_attention_heads"},
                {"num_layers", "num_hidden_layers"},  // GPT-Neo's
                {"num_heads", "num_attention_heads"},
                {"n_positions", "max_position_embeddings"},
                {"activation_function", "hidden_act"}});
  if (!j.contains("max_position_embeddings")) j["max_position_embeddings"] = type == "gpt2" || type == "gpt_bigcode" ? 1024 : 2048;
  if (auto inter = j.find("intermediate_size"); inter != j.end() && inter->is_null()) j.erase(inter);  // GPT-Neo's null
  if (!j.contains("intermediate_size")) {
    auto inner = j.find("n_inner");
    if (inner != j.end() && !inner->is_null()) j["intermediate_size"] = *inner;
    else four_times_hidden(j);  // n_inner null
  }
  // GPTJConfig and CodeGenConfig default to untied (a separate lm_head with its bias).
  if (type != "gptj" && type != "codegen" && !j.contains("tie_word_embeddings")) j["tie_word_embeddings"] = true;
  if (type == "gpt_bigcode") {  // GPTBigCodeAttention reads multi_query alone
    bool mq = true;
    if (auto it = j.find("multi_query"); it != j.end() && it->is_boolean()) mq = it->get<bool>();
    if (mq) j["num_key_value_heads"] = 1;
    else if (j.contains("num_attention_heads")) j["num_key_value_heads"] = j["num_attention_heads"];
  }
}

Status read_gpt_decoder(const json& j, ModelConfig& c) {
  if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null())
    return unsupported("config.json: quantization_config is not supported for " + c.arch +
                       " (its fused and transposed weights are split at open); load the unquantized checkpoint");
  const char* fallback = c.arch == "gpt_neox" || c.arch == "falcon" ? "gelu"
                         : c.arch == "gpt_bigcode"                  ? "gelu_pytorch_tanh"
                         : c.arch == "opt"                          ? "relu"
                                                                    : "gelu_new";
  // BLOOM's and MPT's activations are fixed (read_bloom, read_mpt); their configs name none.
  if (c.arch != "bloom" && c.arch != "mpt") BRIGADE_RETURN_IF_ERROR(read_activation(j, fallback, c));
  c.mlp_ungated = c.mlp_bias = true;
  c.layer_norms = c.norm_bias = true;
  c.rms_eps = 1e-5f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, c.arch == "gpt_neox" ? "layer_norm_eps" : "layer_norm_epsilon", c.rms_eps));
  c.sliding_window = 0;
  c.rotary_dim = 0;
  if (c.n_heads <= 0 || c.hidden_size % c.n_heads != 0)
    return invalid_argument("config.json: the hidden size (" + std::to_string(c.hidden_size) +
                            ") must be divisible by the head count for " + c.arch);
  c.head_dim = c.hidden_size / c.n_heads;  // none of them reads a head_dim
  // One K/V head per query head but for Falcon's and GPTBigCode's (apply_gpt_config_names).
  if (c.arch != "falcon" && c.arch != "gpt_bigcode") c.n_kv_heads = c.n_heads;
  if (c.arch == "falcon") return read_falcon(j, c);
  if (c.arch == "bloom") return read_bloom(j, c);
  if (c.arch == "mpt") return read_mpt(j, c);
  if (c.arch == "opt") return read_opt(j, c);
  if (c.arch == "gpt_neo") return read_gpt_neo(j, c);
  if (c.arch == "gpt_neox") {
    bool bias = true, parallel = true;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", bias));
    BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_parallel_residual", parallel));
    c.qkv_bias = c.o_bias = c.attention_bias = bias;
    c.parallel_blocks = c.parallel_mlp_norm = parallel;
    return read_neox_rotary(j, c);
  }
  if (c.arch == "gptj" || c.arch == "codegen") {  // CodeGen: GPT-J's layer with a fused qkv_proj
    if (c.arch == "codegen" && c.hidden_size % kCodegenBlocks != 0)
      return invalid_argument("config.json: codegen's hidden size (" + std::to_string(c.hidden_size) +
                              ") must be divisible by 4 (qkv_proj's blocks)");
    c.parallel_blocks = true;
    c.qkv_bias = c.o_bias = false;
    c.lm_head_bias = true;
    return read_gptj_rotary(j, c);
  }
  return read_gpt2_attention(j, c);
}

Expected<std::map<std::string, RawTensor>> gpt_decoder_tensors(const ModelConfig& c,
                                                               std::map<std::string, RawTensor> tensors,
                                                               std::vector<std::vector<uint8_t>>& arena) {
  std::map<std::string, RawTensor> out;
  for (auto& [stored, t] : tensors) {
    if (is_buffer(stored)) continue;
    std::string name = with_prefix(c.arch, stored);
    for (const auto& [from, with] : renames(c.arch))
      if (const size_t at = name.find(from); at != std::string::npos) name.replace(at, from.size(), with);
    // GPT-2's Conv1D weights: every 2-D weight of a layer ([in, out]).
    RawTensor loaded = c.arch == "gpt2" && name.starts_with("model.layers.") && t.shape.size() == 2 && !t.block_quantized()
                           ? transposed(t, arena)
                           : t;
    if (name.find(".self_attn.qkv.") != std::string::npos) {
      BRIGADE_RETURN_IF_ERROR(split_qkv(c, name, loaded, out, arena));
      continue;
    }
    if (c.arch == "opt" && name == "model.embed_positions.weight") {  // OPTLearnedPositionalEmbedding's offset
      const std::vector<int64_t> want = {int64_t{c.max_position} + kOptPositionOffset, c.hidden_size};
      if (loaded.shape != want || !is_float_tensor(loaded)) {
        RawTensor w;
        w.shape = want;
        return corrupt(t.file + ": tensor '" + t.name + "' has shape " + t.shape_string() + " but the config needs " +
                       w.shape_string() + " (opt's positions: max_position_embeddings + 2 rows, the first two unused)");
      }
      out.insert_or_assign(name, take_rows(loaded, {{kOptPositionOffset, c.max_position}}, name, arena));
      continue;
    }
    loaded.name = name;
    out.insert_or_assign(name, std::move(loaded));
  }
  return out;
}

}  // namespace brigade
