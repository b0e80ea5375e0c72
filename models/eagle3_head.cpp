#include "models/eagle3_head.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "models/config_json.h"
#include "models/mapped_file.h"
#include "models/rope_scaling.h"
#include "models/torch_checkpoint.h"
#include "models/step_check.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using json = nlohmann::json;

std::string str(int64_t v) { return std::to_string(v); }

// eagle_aux_hidden_state_layer_ids, at the top level (speculators) or under eagle_config
// (SpecForge); vLLM's default (2, L / 2, L - 3) otherwise. vLLM's index j is the residual
// entering layer j (0: the embeddings); SGLang reads a configured id as layer j's output (j + 1).
Expected<std::vector<int>> aux_layer_ids(const json& j, int target_layers) {
  const json* ids = nullptr;
  // Absent, null or empty (vLLM's `if config_dict.get(...)`): the default.
  const auto given = [](const json& o, json::const_iterator it) {
    return it != o.end() && !it->is_null() && !(it->is_array() && it->empty());
  };
  if (auto it = j.find("eagle_aux_hidden_state_layer_ids"); given(j, it)) ids = &*it;
  if (auto ec = j.find("eagle_config"); ids == nullptr && ec != j.end() && ec->is_object())
    if (auto it = ec->find("eagle_aux_hidden_state_layer_ids"); given(*ec, it)) ids = &*it;
  std::vector<int> out;
  if (ids == nullptr) {
    out = {2, target_layers / 2, target_layers - 3};
  } else {
    if (!ids->is_array()) return invalid_argument("config.json: eagle_aux_hidden_state_layer_ids must be a list");
    for (const json& v : *ids) {
      if (!v.is_number_integer()) return invalid_argument("config.json: eagle_aux_hidden_state_layer_ids holds " + v.dump());
      out.push_back(v.get<int>());
    }
  }
  if (out.size() != 3)
    return unsupported("config.json: an EAGLE-3 head takes 3 aux hidden states (fc is 3 x target hidden wide); got " +
                       str(static_cast<int64_t>(out.size())) + " eagle_aux_hidden_state_layer_ids");
  for (int l : out)
    if (l < 0 || l >= target_layers)
      return invalid_argument("config.json: aux hidden state layer " + str(l) + " is outside the target's " +
                              str(target_layers) + " layers" +
                              (ids == nullptr ? " (vLLM's default (2, L / 2, L - 3) needs at least 3 layers)" : ""));
  return out;
}

}  // namespace

Expected<Eagle3Config> parse_eagle3_config(const std::string& json_text, const ModelConfig& target) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt("config.json is not a valid JSON object");
  const std::string arch = config_architecture(j);
  Eagle3Config c;
  // The speculators layout (vLLM's SpeculatorsConfig): the decoder layer under
  // transformer_layer_config, the EAGLE-3 fields at the top level.
  c.speculators = j.contains("speculators_model_type");
  if (c.speculators) {
    const json& type = j["speculators_model_type"];
    if (!type.is_string() || type.get<std::string>() != "eagle3")
      return unsupported("config.json: speculators_model_type " + type.dump() + " is not supported (eagle3 is)");
    if (!j.contains("transformer_layer_config") || !j["transformer_layer_config"].is_object())
      return invalid_argument("config.json: the speculators layout needs transformer_layer_config (an object)");
  } else if (arch != "LlamaForCausalLMEagle3" && arch != "Eagle3LlamaForCausalLM") {
    return unsupported("config.json: architecture '" + arch + "' is not an EAGLE-3 head; supported: "
                       "LlamaForCausalLMEagle3 (Eagle3LlamaForCausalLM), or the speculators layout "
                       "(speculators_model_type eagle3)");
  }
  const json& layer_json = c.speculators ? j["transformer_layer_config"] : j;
  if (c.speculators && layer_json.contains("model_type") && layer_json["model_type"] != "llama")
    return unsupported("config.json: transformer_layer_config.model_type " + layer_json["model_type"].dump() +
                       " is not supported (vLLM runs the head as a llama layer)");
  const auto flag = [](const json& o, const char* key) {
    return o.contains(key) && o[key].is_boolean() && o[key].get<bool>();
  };
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (flag(layer_json, key)) return unsupported(std::string("config.json: ") + key + " = true is not supported for an EAGLE-3 head");
  // norm_before_fc (gpt-oss heads: an RMSNorm over the concatenated aux states; NVIDIA's keep it
  // under eagle_config), fc_norm and norm_output are not run.
  const json* ec = j.contains("eagle_config") && j["eagle_config"].is_object() ? &j["eagle_config"] : nullptr;
  for (const char* key : {"norm_before_fc", "fc_norm", "norm_output"})
    if (flag(j, key) || (ec != nullptr && flag(*ec, key)))
      return unsupported(std::string("config.json: ") + key + " = true is not supported for an EAGLE-3 head");
  if (ec != nullptr && ec->contains("use_aux_hidden_state") && (*ec)["use_aux_hidden_state"] == false)
    return unsupported("config.json: eagle_config.use_aux_hidden_state = false (EAGLE-1 style) is not supported");
  // vLLM's update_eagle3 defaults norm_before_residual to true in the speculators layout.
  if (j.contains("norm_before_residual") && !j["norm_before_residual"].is_boolean())
    return invalid_argument("config.json: norm_before_residual must be a boolean");
  c.norm_before_residual = j.value("norm_before_residual", c.speculators);
  // An integer field of `o`, `fallback` when absent or null; a value of another type is refused.
  const auto integer = [](const json& o, const char* key, int64_t fallback) -> Expected<int64_t> {
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return fallback;
    if (!it->is_number_integer()) return invalid_argument(std::string("config.json: ") + key + " must be an integer");
    return it->get<int64_t>();
  };
  BRIGADE_ASSIGN_OR_RETURN(const int64_t layers, integer(layer_json, "num_hidden_layers", 1));
  if (layers != 1)
    return unsupported("config.json: an EAGLE-3 head with num_hidden_layers " + str(layers) + " is not supported (1)");
  json layer = layer_json;  // the decoder layer's shape, read as a llama config
  layer["architectures"] = json::array({"LlamaForCausalLM"});
  layer["model_type"] = "llama";
  BRIGADE_ASSIGN_OR_RETURN(c.layer, parse_hf_config(layer.dump()));
  const ModelConfig& l = c.layer;
  if (l.vocab_size != target.vocab_size)
    return invalid_argument("config.json: the head's vocab_size " + str(l.vocab_size) + " is not the target's " +
                            str(target.vocab_size));
  BRIGADE_ASSIGN_OR_RETURN(const int64_t target_hidden, integer(j, "target_hidden_size", l.hidden_size));
  if (target_hidden != target.hidden_size)
    return invalid_argument("config.json: target_hidden_size " + str(target_hidden) + " is not the target's hidden size " +
                            str(target.hidden_size));
  BRIGADE_ASSIGN_OR_RETURN(c.draft_vocab, integer(j, "draft_vocab_size", l.vocab_size));
  if (c.draft_vocab < 1 || c.draft_vocab > l.vocab_size)
    return invalid_argument("config.json: draft_vocab_size " + str(c.draft_vocab) + " must be in [1, vocab_size " +
                            str(l.vocab_size) + "]");
  if (l.n_kv_heads != target.n_kv_heads || l.head_dim != target.head_dim)
    return unsupported("config.json: the head's K/V is a layer of the target's pool, so it needs the target's kv heads "
                       "and head_dim (" + str(target.n_kv_heads) + " x " + str(target.head_dim) + "); it has " +
                       str(l.n_kv_heads) + " x " + str(l.head_dim));
  BRIGADE_ASSIGN_OR_RETURN(c.aux_layers, aux_layer_ids(j, target.n_layers));
  return c;
}

Expected<std::unique_ptr<Eagle3Head>> Eagle3Head::load(const std::string& dir, const ModelConfig& target,
                                                       Backend& backend, const Tensor& target_embed,
                                                       std::optional<DType> weight_dtype, int max_batch_tokens) {
  namespace fs = std::filesystem;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(config_path));
  auto config = parse_eagle3_config(text, target);
  if (!config) return Status(config.status().code(), config_path + ": " + config.status().message());
  std::unique_ptr<Eagle3Head> head(new Eagle3Head(backend, std::move(*config), target, max_batch_tokens));
  std::map<std::string, RawTensor> tensors;  // the Hub's heads ship either file
  BRIGADE_ASSIGN_OR_RETURN(head->file_, read_weights_file(dir, "model.safetensors", "pytorch_model.bin", tensors,
                                                          head->derived_));
  auto ck = Checkpoint::from_memory(dir, head->config_.layer, std::move(tensors));
  if (Status st = head->load_weights(*ck, target_embed, weight_dtype); !st.is_ok())
    return Status(st.code(), dir + ": " + st.message());
  BRIGADE_RETURN_IF_ERROR(head->allocate_scratch());
  backend.synchronize();  // uploads from staging memory have finished before it is freed
  return head;
}

Status Eagle3Head::load_weights(const Checkpoint& ck, const Tensor& target_embed, std::optional<DType> weight_dtype) {
  const ModelConfig& c = config_.layer;
  const int64_t h = c.hidden_size, th = target_.hidden_size, q = int64_t{c.n_heads} * c.head_dim;
  const int64_t kv = int64_t{c.n_kv_heads} * c.head_dim, inter = c.intermediate_size, dv = config_.draft_vocab;
  WeightLoader w(ck, backend_, weight_dtype);
  const auto norm = [&](const std::string& name) { return w.vector_f32({name}, {h}); };
  if (w.has("embed_tokens.weight")) {
    BRIGADE_ASSIGN_OR_RETURN(own_embed_, w.table("embed_tokens.weight", c.vocab_size, h));
    embed_ = own_embed_.tensor;
    config_.own_embedding = true;
  } else if (h != th) {
    return invalid_argument("no embed_tokens.weight, and the head's hidden size " + str(h) +
                            " differs from the target's " + str(th) + " (the target's embedding cannot stand in)");
  } else {
    embed_ = target_embed;
  }
  // The layer is `midlayer.` (LlamaForCausalLMEagle3) or `layers.0.` (the speculators layout;
  // vLLM renames the first to the second).
  const std::string p = w.has("midlayer.input_layernorm.weight") ? "midlayer." : "layers.0.";
  for (const std::string& bad : {std::string("fc.bias"), p + "self_attn.q_norm.weight", p + "self_attn.k_norm.weight"})
    if (w.has(bad)) return unsupported(bad + " is not supported in an EAGLE-3 head (vLLM's llama_eagle3.py has none)");
  for (int i = 0; i < 3; ++i) {
    BRIGADE_ASSIGN_OR_RETURN(fc_[i], w.matrix("fc.weight", h, 3 * th, {}, {i * th, th}));
  }
  BRIGADE_ASSIGN_OR_RETURN(input_norm_, norm(p + "input_layernorm.weight"));
  BRIGADE_ASSIGN_OR_RETURN(hidden_norm_, norm(p + "hidden_norm.weight"));
  BRIGADE_ASSIGN_OR_RETURN(post_attn_norm_, norm(p + "post_attention_layernorm.weight"));
  BRIGADE_ASSIGN_OR_RETURN(final_norm_, norm("norm.weight"));
  const std::vector<std::string> qkv = {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                                        p + "self_attn.v_proj.weight"};
  BRIGADE_ASSIGN_OR_RETURN(qkv_embed_, w.fused(qkv, {q, kv, kv}, 2 * h, {}, {0, h}));
  BRIGADE_ASSIGN_OR_RETURN(qkv_hidden_, w.fused(qkv, {q, kv, kv}, 2 * h, {}, {h, h}));
  BRIGADE_ASSIGN_OR_RETURN(o_, w.matrix(p + "self_attn.o_proj.weight", h, q));
  BRIGADE_ASSIGN_OR_RETURN(gate_up_, w.fused({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, {inter, inter}, h));
  BRIGADE_ASSIGN_OR_RETURN(down_, w.matrix(p + "mlp.down_proj.weight", h, inter));
  BRIGADE_ASSIGN_OR_RETURN(lm_head_, w.table("lm_head.weight", dv, h));
  to_target_.resize(static_cast<size_t>(dv));
  if (!w.has("d2t")) {
    if (dv != c.vocab_size)
      return invalid_argument("no d2t tensor, and draft_vocab_size " + str(dv) + " is not vocab_size " + str(c.vocab_size));
    for (int64_t i = 0; i < dv; ++i) to_target_[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  } else {
    BRIGADE_ASSIGN_OR_RETURN(const RawTensor d2t, ck.tensor("d2t", {dv}));
    if (d2t.dtype != DType::i64) return invalid_argument("d2t must be int64 (got " + std::string(dtype_name(d2t.dtype)) + ")");
    for (int64_t i = 0; i < dv; ++i) {
      int64_t off = 0;
      std::memcpy(&off, d2t.bytes.data() + i * 8, 8);
      const int64_t t = i + off;
      if (t < 0 || t >= c.vocab_size)
        return invalid_argument("d2t maps draft id " + str(i) + " to " + str(t) + ", outside the vocabulary");
      to_target_[static_cast<size_t>(i)] = static_cast<int32_t>(t);
    }
  }
  rope_.style = c.rope_style;
  rope_.rotary_dim = c.rope_dims();
  rope_.inv_freq = rope_inv_freq_scaled(c.rope_theta, c.rope_dims(), c.rope_scaling);
  rope_.attention_factor = rope_attention_factor(c.rope_scaling);
  return Status::ok();
}

Status Eagle3Head::allocate_scratch() {
  const ModelConfig& c = config_.layer;
  const DType a = backend_.activation_dtype();
  const int64_t t = max_batch_tokens_, h = c.hidden_size;
  const QkvLayout l{c.n_heads, c.n_kv_heads, c.head_dim};
  BRIGADE_ASSIGN_OR_RETURN(s_.x, alloc_tensor(backend_, a, t, h));
  BRIGADE_ASSIGN_OR_RETURN(s_.embed, alloc_tensor(backend_, a, t, h));
  BRIGADE_ASSIGN_OR_RETURN(s_.normed, alloc_tensor(backend_, a, t, h));
  BRIGADE_ASSIGN_OR_RETURN(s_.qkv, alloc_tensor(backend_, a, t, l.row_width()));
  BRIGADE_ASSIGN_OR_RETURN(s_.qkv_part, alloc_tensor(backend_, a, t, l.row_width()));
  BRIGADE_ASSIGN_OR_RETURN(s_.attn, alloc_tensor(backend_, a, t, l.q_width()));
  BRIGADE_ASSIGN_OR_RETURN(s_.delta, alloc_tensor(backend_, a, t, h));
  BRIGADE_ASSIGN_OR_RETURN(s_.gate_up, alloc_tensor(backend_, a, t, 2 * int64_t{c.intermediate_size}));
  BRIGADE_ASSIGN_OR_RETURN(s_.act, alloc_tensor(backend_, a, t, c.intermediate_size));
  BRIGADE_ASSIGN_OR_RETURN(s_.selected, alloc_tensor(backend_, a, t, h));
  BRIGADE_ASSIGN_OR_RETURN(aux_rows_, alloc_tensor(backend_, DType::i32, 1, t));
  return ints_.allocate(backend_, t);
}

Model::DraftHead Eagle3Head::shape() const {
  return {config_.aux_layers, target_.hidden_size, config_.layer.hidden_size, config_.draft_vocab, &to_target_};
}

Status Eagle3Head::begin_capture(const StepBatch& b) {
  n_aux_rows_ = static_cast<int64_t>(b.aux_rows.size());
  aux_hidden_ = b.aux_hidden;
  if (n_aux_rows_ == 0) return Status::ok();
  if (n_aux_rows_ > max_batch_tokens_) return invalid_argument("step asks for more aux rows than max_batch_tokens");
  for (int32_t r : b.aux_rows)
    if (r < 0 || r >= b.n_tokens())
      return invalid_argument("aux row " + str(r) + " is outside the step's " + str(b.n_tokens()) + " rows");
  const int64_t n_aux = static_cast<int64_t>(config_.aux_layers.size());
  const Tensor& t = b.aux_hidden;
  if (t.dtype != backend_.activation_dtype() || t.ndim != 2 || t.dim(0) != n_aux * n_aux_rows_ ||
      t.dim(1) != target_.hidden_size)
    return invalid_argument(std::string("aux_hidden must be ") + dtype_name(backend_.activation_dtype()) + " [" +
                            str(n_aux * n_aux_rows_) + ", " + str(target_.hidden_size) + "] (got " + t.shape_string() + ")");
  backend_.upload(Tensor(aux_rows_.tensor.data, DType::i32, {n_aux_rows_}), b.aux_rows.data());
  return Status::ok();
}

void Eagle3Head::capture(int layer, const Tensor& residual) {
  if (n_aux_rows_ == 0) return;
  const Tensor rows(aux_rows_.tensor.data, DType::i32, {n_aux_rows_});
  for (size_t i = 0; i < config_.aux_layers.size(); ++i)
    if (config_.aux_layers[i] == layer)
      backend_.gather_rows(residual, rows, aux_hidden_.rows(static_cast<int64_t>(i) * n_aux_rows_, n_aux_rows_));
}

Expected<Tensor> Eagle3Head::base(const StepBatch& batch, int n) {
  const Tensor& prev = batch.prev_hidden;
  const DType a = backend_.activation_dtype();
  const int64_t h = config_.layer.hidden_size, th = target_.hidden_size;
  const Tensor x = s_.x.tensor.rows(0, n);
  if (!prev.empty() && prev.dtype == a && prev.ndim == 2 && prev.dim(0) == 3 * int64_t{n} && prev.dim(1) == th) {
    const Tensor part = s_.delta.tensor.rows(0, n);
    backend_.matmul(prev.rows(0, n), fc_[0].tensor, Tensor(), x);
    for (int i = 1; i < 3; ++i) {
      backend_.matmul(prev.rows(int64_t{i} * n, n), fc_[i].tensor, Tensor(), part);
      backend_.add(x, part);
    }
    return x;
  }
  if (!prev.empty() && prev.dtype == a && prev.ndim == 2 && prev.dim(0) == n && prev.dim(1) == h) return prev;
  return invalid_argument("an EAGLE-3 step needs prev_hidden: the aux planes [" + str(3 * int64_t{n}) + ", " + str(th) +
                          "] or the head's own output [" + str(n) + ", " + str(h) + "], in the activation dtype (got " +
                          prev.shape_string() + ")");
}

Status Eagle3Head::forward(const StepBatch& batch, const KvCache& kv, int kv_layer, const Tensor& logits) {
  const ModelConfig& c = config_.layer;
  const int64_t r = static_cast<int64_t>(batch.logit_rows.size()), nh = static_cast<int64_t>(batch.hidden_rows.size());
  if (r > 0 && (logits.dtype != DType::f32 || logits.ndim != 2 || logits.dim(0) != r || logits.dim(1) != config_.draft_vocab))
    return invalid_argument("EAGLE-3 logits must be f32 [" + str(r) + ", " + str(config_.draft_vocab) + "] (got " +
                            logits.shape_string() + ")");
  // check_step reads the target's vocabulary for the fed ids; the logits were checked above.
  const StepLimits limits{target_.vocab_size, target_.max_position, max_batch_tokens_, kv_layer + 1,
                          c.n_kv_heads, c.head_dim};
  const Tensor logits_shape(logits.data, DType::f32, {r, target_.vocab_size});
  BRIGADE_ASSIGN_OR_RETURN(const StepBounds bounds, check_step(batch, limits, kv.layout(), logits_shape));
  BRIGADE_RETURN_IF_ERROR(check_hidden_rows(batch, max_batch_tokens_, c.hidden_size, backend_.activation_dtype()));
  const int n = batch.n_tokens();
  BRIGADE_ASSIGN_OR_RETURN(const Tensor x, base(batch, n));
  BRIGADE_RETURN_IF_ERROR(ints_.upload(backend_, batch));
  const QkvLayout l{c.n_heads, c.n_kv_heads, c.head_dim};
  const float eps = c.rms_eps;
  const Tensor e = s_.embed.tensor.rows(0, n), normed = s_.normed.tensor.rows(0, n);
  const Tensor qkv = s_.qkv.tensor.rows(0, n), part = s_.qkv_part.tensor.rows(0, n), attn = s_.attn.tensor.rows(0, n);
  const Tensor delta = s_.delta.tensor.rows(0, n);
  // q|k|v over [input_layernorm(embed); hidden_norm(x)]: the two column blocks' products summed.
  backend_.embedding(embed_, ints_.tokens(batch), e);
  backend_.rms_norm(e, input_norm_.tensor, eps, e);
  backend_.matmul(e, qkv_embed_.tensor, Tensor(), qkv);
  backend_.rms_norm(x, hidden_norm_.tensor, eps, normed);
  backend_.matmul(normed, qkv_hidden_.tensor, Tensor(), part);
  backend_.add(qkv, part);
  backend_.rope(qkv, l, ints_.positions(n), rope_);
  const KvLayer& cache = kv.layer(kv_layer);
  backend_.write_kv(cache, qkv, l, ints_.slots(n));
  const float scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  backend_.attention(qkv, l, cache, ints_.meta(batch, bounds, 0), scale, attn);
  backend_.matmul(attn, o_.tensor, Tensor(), delta);
  // h = r + attention: the residual r is x itself, or (norm_before_residual) hidden_norm(x), still in normed.
  backend_.add(delta, config_.norm_before_residual ? normed : x);
  backend_.rms_norm(delta, post_attn_norm_.tensor, eps, normed);
  backend_.matmul(normed, gate_up_.tensor, Tensor(), s_.gate_up.tensor.rows(0, n));
  backend_.silu_mul(s_.gate_up.tensor.rows(0, n), s_.act.tensor.rows(0, n));
  backend_.matmul(s_.act.tensor.rows(0, n), down_.tensor, Tensor(), e);
  backend_.add_rms_norm(delta, e, final_norm_.tensor, eps, normed);  // delta = pre-norm output, normed = norm(it)
  if (nh > 0) backend_.gather_rows(delta, ints_.hidden_rows(nh), batch.hidden);
  if (r == 0) return Status::ok();
  const Tensor selected = s_.selected.tensor.rows(0, r);
  backend_.gather_rows(normed, ints_.logit_rows(r), selected);
  backend_.matmul(selected, lm_head_.tensor, Tensor(), logits);
  return Status::ok();
}

}  // namespace brigade
