#include "models/classifier.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/checkpoint.h"
#include "models/config_json.h"
#include "models/mapped_file.h"
#include "models/model_config.h"
#include "models/tokenizer.h"

namespace brigade {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr std::string_view kSeqCls = "ForSequenceClassification";
constexpr std::string_view kCausal = "ForCausalLM";

// The keys --hf-overrides may set: those that make a classifier of a checkpoint.
constexpr const char* kOverrideKeys[] = {"architectures", "classifier_from_token", "method",
                                         "is_original_qwen3_reranker", "id2label", "label2id",
                                         "num_labels", "problem_type", "use_pad_token",
                                         "sbert_ce_default_activation_function"};

std::string key_list() {
  std::string s;
  for (const char* k : kOverrideKeys) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

Expected<json> parse_overrides(std::string_view text) {
  if (text.empty()) return json::object();
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("--hf-overrides must be a JSON object of config.json keys");
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kOverrideKeys), std::end(kOverrideKeys), key) == std::end(kOverrideKeys))
      return invalid_argument("--hf-overrides: key '" + key + "' is not applied by brigade; it applies " + key_list() +
                              " (the keys that make a classifier of a checkpoint)");
    const bool ok = key == "architectures" ? value.is_array() && value.size() == 1 && value[0].is_string()
                  : key == "classifier_from_token" ? value.is_array() && !value.empty() &&
                        std::all_of(value.begin(), value.end(), [](const json& t) { return t.is_string(); })
                  : key == "is_original_qwen3_reranker" || key == "use_pad_token" ? value.is_boolean()
                  : key == "num_labels" ? value.is_number_integer()
                  : key == "id2label" || key == "label2id" ? value.is_object()
                  : value.is_string();
    if (!ok)
      return invalid_argument("--hf-overrides: '" + key + "' has the wrong type: " + value.dump().substr(0, 120) +
                              (key == "architectures" ? " (one architecture name in a list)"
                               : key == "classifier_from_token" ? " (a list of vocabulary strings)" : ""));
  }
  return j;
}

// A boolean key of config.json: `otherwise` when absent or null.
Expected<bool> bool_key(const json& j, const char* key, bool otherwise) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return otherwise;
  if (!it->is_boolean()) return invalid_argument(std::string("config.json: ") + key + " must be true or false");
  return it->get<bool>();
}

std::string string_key(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Expected<ClassifierActivation> activation_by_name(const std::string& name, const std::string& where) {
  // vLLM loads only torch.nn.modules' classes; the three a cross-encoder config names.
  if (name.starts_with("torch.nn.modules.")) {
    if (name.ends_with(".Sigmoid")) return ClassifierActivation::sigmoid;
    if (name.ends_with(".Identity")) return ClassifierActivation::identity;
    if (name.ends_with(".Softmax")) return ClassifierActivation::softmax;
  }
  return unsupported("config.json: " + where + " '" + name +
                     "' is not supported; supported: torch.nn.modules.activation.Sigmoid, "
                     "torch.nn.modules.linear.Identity, torch.nn.modules.activation.Softmax");
}

// vLLM's PoolerClassify: sigmoid for one label, softmax for several.
ClassifierActivation by_labels(int num_labels) {
  return num_labels < 2 ? ClassifierActivation::sigmoid : ClassifierActivation::softmax;
}

// The vocabulary id of each string, as convert_tokens_to_ids finds it (the vocabulary's own
// string, "Ġyes" or "yes", not text to encode).
Expected<std::vector<int32_t>> token_ids(const json& tokens, const Tokenizer* tokenizer) {
  if (tokenizer == nullptr)
    return invalid_argument("classifier_from_token names vocabulary strings, and this model has no tokenizer");
  std::vector<std::string> want;
  for (const auto& t : tokens) want.push_back(t.get<std::string>());
  std::vector<int32_t> ids(want.size(), -1);
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
    const std::string s = tokenizer->token_string(id);
    for (size_t i = 0; i < want.size(); ++i)
      if (ids[i] < 0 && s == want[i]) ids[i] = id;
  }
  for (size_t i = 0; i < want.size(); ++i)
    if (ids[i] < 0) return invalid_argument("classifier_from_token: '" + want[i] + "' is not a token of the vocabulary");
  return ids;
}

Status read_rows(const RawTensor& t, const std::vector<int32_t>& rows, int hidden, std::vector<float>& out) {
  if (t.block_quantized() || (t.dtype != DType::f32 && t.dtype != DType::f16 && t.dtype != DType::bf16))
    return unsupported(t.file + ": tensor '" + t.name + "' is stored as " + t.type_name() +
                       "; a classifier is read from f32, f16 or bf16");
  if (t.shape.size() != 2 || t.shape[1] != hidden)
    return corrupt(t.file + ": tensor '" + t.name + "' has shape " + t.shape_string() + ", not [n, " +
                   std::to_string(hidden) + "]");
  for (int32_t r : rows) {
    if (r < 0 || r >= t.shape[0])
      return corrupt(t.file + ": tensor '" + t.name + "' has " + std::to_string(t.shape[0]) + " rows; row " +
                     std::to_string(r) + " is needed");
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(hidden));
    t.dequantize(int64_t{r} * hidden, hidden, out.data() + at);
  }
  return Status::ok();
}

// Tensor `name` of exactly `shape`, as f32 (float types only).
Status read_f32(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape, std::vector<float>& out) {
  BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck.tensor(name, shape));
  if (t.block_quantized() || (t.dtype != DType::f32 && t.dtype != DType::f16 && t.dtype != DType::bf16))
    return unsupported(t.file + ": tensor '" + t.name + "' is stored as " + t.type_name() +
                       "; a classifier is read from f32, f16 or bf16");
  out.resize(static_cast<size_t>(t.numel()));
  t.dequantize(0, t.numel(), out.data());
  return Status::ok();
}

// An encoder's classification head over its first token ([CLS], <s>): BERT's pooler (dense +
// tanh) then `classifier`; RoBERTa's classifier.dense + tanh then classifier.out_proj;
// DistilBERT's pre_classifier + ReLU then classifier. All keep their biases.
Status read_encoder_head(const Checkpoint& ck, ClassifierHead& head) {
  const std::string& arch = ck.config().arch;
  const bool bert = arch == "bert", distil = arch == "distilbert";
  const std::string dense = bert     ? ck.tensors().count("bert.pooler.dense.weight") ? "bert.pooler.dense" : "pooler.dense"
                            : distil ? "pre_classifier"
                                     : "classifier.dense";
  const std::string out = bert || distil ? "classifier" : "classifier.out_proj";
  head.pre_activation = distil ? DenseActivation::relu : DenseActivation::tanh;
  const int64_t h = head.hidden;
  auto shape = ck.tensor(out + ".weight");
  if (!shape)
    return corrupt(ck.path() + ": " + head.architecture + " needs the classifier tensor '" + out +
                   ".weight', which the checkpoint lacks");
  if (shape->shape.size() != 2 || shape->shape[0] < 1 || shape->shape[1] != h)
    return corrupt(shape->file + ": tensor '" + out + ".weight' has shape " + shape->shape_string() +
                   ", not [num_labels, " + std::to_string(h) + "]");
  head.num_labels = static_cast<int>(shape->shape[0]);
  BRIGADE_RETURN_IF_ERROR(read_f32(ck, dense + ".weight", {h, h}, head.pre_weight));
  BRIGADE_RETURN_IF_ERROR(read_f32(ck, dense + ".bias", {h}, head.pre_bias));
  BRIGADE_RETURN_IF_ERROR(read_f32(ck, out + ".weight", {head.num_labels, h}, head.weight));
  BRIGADE_RETURN_IF_ERROR(read_f32(ck, out + ".bias", {head.num_labels}, head.bias));
  head.source = dense + (distil ? " + relu, " : " + tanh, ") + out + " over the first token";
  head.generates = false;
  head.pooling = Pooling::cls;
  return Status::ok();
}

// ModernBertForSequenceClassification's head: classifier_pooling ("cls": the first token,
// "mean": every prompt token) over final_norm's output, then head.dense (a bias with
// classifier_bias), classifier_activation, head.norm (a LayerNorm of norm_eps, a bias with
// norm_bias), then classifier with its bias. read_modernbert_config checked the names.
Status read_modernbert_head(const Checkpoint& ck, const json& config, ClassifierHead& head) {
  const ModelConfig& c = ck.config();
  const int64_t h = head.hidden;
  auto shape = ck.tensor("classifier.weight");
  if (!shape)
    return corrupt(ck.path() + ": " + head.architecture + " needs the classifier tensor 'classifier.weight', which the "
                   "checkpoint lacks");
  if (shape->shape.size() != 2 || shape->shape[0] < 1 || shape->shape[1] != h)
    return corrupt(shape->file + ": tensor 'classifier.weight' has shape " + shape->shape_string() +
                   ", not [num_labels, " + std::to_string(h) + "]");
  head.num_labels = static_cast<int>(shape->shape[0]);
  std::string act = string_key(config, "classifier_activation");
  if (act.empty()) act = "gelu";  // ModernBertConfig's default
  head.pre_activation = act == "relu" ? DenseActivation::relu : act == "tanh" ? DenseActivation::tanh : DenseActivation::gelu;
  head.pooling = string_key(config, "classifier_pooling") == "mean" ? Pooling::mean : Pooling::cls;
  head.pre_norm_eps = c.rms_eps;
  BRIGADE_ASSIGN_OR_RETURN(const bool dense_bias, bool_key(config, "classifier_bias", false));
  BRIGADE_RETURN_IF_ERROR(read_f32(ck, "head.dense.weight", {h, h}, head.pre_weight));
  if (dense_bias) BRIGADE_RETURN_IF_ERROR(read_f32(ck, "head.dense.bias", {h}, head.pre_bias));
  BRIGADE_RETURN_IF_ERROR(read_f32(ck, "head.norm.weight", {h}, head.pre_norm_weight));
  if (c.norm_bias) BRIGADE_RETURN_IF_ERROR(read_f32(ck, "head.norm.bias", {h}, head.pre_norm_bias));
  BRIGADE_RETURN_IF_ERROR(read_f32(ck, "classifier.weight", {head.num_labels, h}, head.weight));
  BRIGADE_RETURN_IF_ERROR(read_f32(ck, "classifier.bias", {head.num_labels}, head.bias));
  head.source = "head.dense + " + act + " + head.norm, classifier over the " +
                (head.pooling == Pooling::mean ? "mean of the tokens" : "first token");
  head.generates = false;
  return Status::ok();
}

}  // namespace

const char* activation_name(ClassifierActivation a) {
  switch (a) {
    case ClassifierActivation::identity: return "identity";
    case ClassifierActivation::sigmoid: return "sigmoid";
    case ClassifierActivation::softmax: return "softmax";
  }
  return "?";
}

std::vector<double> apply_activation(std::vector<double> x, ClassifierActivation a) {
  if (a == ClassifierActivation::sigmoid) {
    for (double& v : x) v = 1.0 / (1.0 + std::exp(-v));
  } else if (a == ClassifierActivation::softmax && !x.empty()) {
    const double m = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (double& v : x) sum += (v = std::exp(v - m));
    for (double& v : x) v /= sum;
  }
  return x;
}

namespace {

// y [rows] = w [rows, x.size()] · x (+ bias), in f64.
std::vector<double> affine(const std::vector<float>& w, const std::vector<float>& bias, std::span<const double> x,
                           int rows) {
  const size_t cols = x.size();
  std::vector<double> y(static_cast<size_t>(rows), 0.0);
  for (size_t r = 0; r < y.size(); ++r) {
    const float* row = w.data() + r * cols;
    double s = bias.empty() ? 0.0 : double{bias[r]};
    for (size_t i = 0; i < cols; ++i) s += double{row[i]} * x[i];
    y[r] = s;
  }
  return y;
}

double activate(double v, DenseActivation a) {
  switch (a) {
    case DenseActivation::tanh: return std::tanh(v);
    case DenseActivation::relu: return std::max(v, 0.0);
    case DenseActivation::gelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  }
  return v;
}

// torch.nn.LayerNorm over x, in place: (x - mean) / sqrt(var + eps) * weight (+ bias).
void layer_norm(std::vector<double>& x, const std::vector<float>& weight, const std::vector<float>& bias, float eps) {
  double mean = 0.0, var = 0.0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  const double inv = 1.0 / std::sqrt(var + double{eps});
  for (size_t i = 0; i < x.size(); ++i) x[i] = (x[i] - mean) * inv * weight[i] + (bias.empty() ? 0.0 : double{bias[i]});
}

}  // namespace

std::vector<double> ClassifierHead::logits(std::span<const float> h) const {
  BRIGADE_CHECK(static_cast<int>(h.size()) == hidden, "a classifier takes a hidden state of its width");
  std::vector<double> x(h.begin(), h.end());
  if (!pre_weight.empty()) {
    x = affine(pre_weight, pre_bias, x, hidden);
    for (double& v : x) v = activate(v, pre_activation);
    if (!pre_norm_weight.empty()) layer_norm(x, pre_norm_weight, pre_norm_bias, pre_norm_eps);
  }
  return affine(weight, bias, x, num_labels);
}

std::vector<float> ClassifierHead::outputs(std::span<const float> h, PoolingTask task, bool use_activation) const {
  std::vector<double> x = logits(h);
  if (use_activation && task != PoolingTask::embed)
    x = apply_activation(std::move(x), task == PoolingTask::score ? score_activation : classify_activation);
  return std::vector<float>(x.begin(), x.end());
}

std::string ClassifierHead::describe() const {
  std::string names;
  for (size_t i = 0; i < labels.size() && i < 8; ++i) names += (i ? ", " : "") + labels[i];
  if (labels.size() > 8) names += ", ...";
  return architecture + ": " + std::to_string(num_labels) + " label" + (num_labels == 1 ? "" : "s") + " (" + names +
         ") from " + source + "; /classify " + activation_name(classify_activation) + ", /score " +
         activation_name(score_activation) + (generates ? "; it also generates" : "");
}

Status check_hf_overrides(std::string_view text) { return parse_overrides(text).status(); }

Expected<std::optional<ClassifierHead>> read_classifier(const std::string& model_path, std::string_view hf_overrides,
                                                        const Tokenizer* tokenizer) {
  BRIGADE_ASSIGN_OR_RETURN(json overrides, parse_overrides(hf_overrides));
  std::error_code ec;
  const fs::path config_path = fs::path(model_path) / "config.json";
  if (!fs::is_directory(model_path, ec) || !fs::exists(config_path, ec)) {
    if (!overrides.empty())
      return invalid_argument("--hf-overrides applies to a Hugging Face model directory (config.json); '" + model_path +
                              "' is not one");
    return std::optional<ClassifierHead>();
  }
  BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(config_path.string()));
  json config = json::parse(text, nullptr, false);
  if (config.is_discarded() || !config.is_object()) return corrupt(config_path.string() + ": not a JSON object");
  const std::string stored_arch = config_architecture(config);
  for (const auto& [key, value] : overrides.items()) config[key] = value;
  const std::string arch = config_architecture(config);
  BRIGADE_ASSIGN_OR_RETURN(const bool qwen3_reranker, bool_key(config, "is_original_qwen3_reranker", false));
  const bool converts = config.contains("method") || qwen3_reranker;
  if (!arch.ends_with(kSeqCls)) {
    if (converts || config.contains("classifier_from_token"))
      return invalid_argument("classifier_from_token / method turn a causal LM into a classifier: name its "
                              "*ForSequenceClassification architecture too (\"architectures\": [\"" +
                              (arch.ends_with(kCausal) ? arch.substr(0, arch.size() - kCausal.size()) : arch) +
                              std::string(kSeqCls) + "\"])");
    return std::optional<ClassifierHead>();
  }
  if (!stored_arch.empty() && causal_architecture(stored_arch) != causal_architecture(arch))
    return invalid_argument("--hf-overrides: architecture '" + arch + "' is not of the checkpoint's family ('" +
                            stored_arch + "')");

  BRIGADE_ASSIGN_OR_RETURN(auto ck, Checkpoint::open(model_path));
  const int hidden = ck->config().hidden_size;
  ClassifierHead head;
  head.architecture = arch;
  head.hidden = hidden;

  std::string method;
  if (qwen3_reranker) method = "from_2_way_softmax";
  if (auto m = config.find("method"); m != config.end() && !m->is_null()) {
    if (!m->is_string()) return invalid_argument("config.json: method must be a string");
    method = m->get<std::string>();
  }
  if (!method.empty() && ck->config().encoder)
    return invalid_argument("method " + method + " reads a causal LM's lm_head; " + arch + " is an encoder without one");
  if (!method.empty()) {
    if (method != "from_2_way_softmax" && method != "no_post_processing")
      return invalid_argument("method '" + method + "' is not supported; supported: from_2_way_softmax, no_post_processing");
    auto tokens = config.find("classifier_from_token");
    if (tokens == config.end() || !tokens->is_array() || tokens->empty() ||
        !std::all_of(tokens->begin(), tokens->end(), [](const json& t) { return t.is_string(); }))
      return invalid_argument("method '" + method + "' needs classifier_from_token: the vocabulary strings of its labels");
    if (method == "from_2_way_softmax" && tokens->size() != 2)
      return invalid_argument("method from_2_way_softmax needs two classifier_from_token strings (false, then true; got " +
                              std::to_string(tokens->size()) + ")");
    BRIGADE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, token_ids(*tokens, tokenizer));
    const bool tied = ck->config().tie_embeddings;
    const std::string head_name = tied ? "model.embed_tokens.weight" : "lm_head.weight";
    BRIGADE_ASSIGN_OR_RETURN(RawTensor lm_head, ck->tensor(head_name));
    std::vector<float> rows;
    BRIGADE_RETURN_IF_ERROR(read_rows(lm_head, ids, hidden, rows));
    if (method == "from_2_way_softmax") {
      head.num_labels = 1;
      head.weight.resize(static_cast<size_t>(hidden));
      for (int i = 0; i < hidden; ++i)  // true minus false, in f32 as vLLM computes it
        head.weight[static_cast<size_t>(i)] = rows[static_cast<size_t>(hidden + i)] - rows[static_cast<size_t>(i)];
      head.source = head_name + " rows '" + (*tokens)[1].get<std::string>() + "' - '" +
                    (*tokens)[0].get<std::string>() + "' (from_2_way_softmax)";
    } else {
      head.num_labels = static_cast<int>(ids.size());
      head.weight = std::move(rows);
      head.source = head_name + " rows of classifier_from_token (no_post_processing)";
    }
    head.generates = !ck->config().seq_cls;
  } else {
    if (config.contains("classifier_from_token"))
      return invalid_argument("classifier_from_token needs a method (from_2_way_softmax or no_post_processing), or "
                              "is_original_qwen3_reranker: true");
  }
  if (ck->config().arch == "modernbert") {
    BRIGADE_RETURN_IF_ERROR(read_modernbert_head(*ck, config, head));
  } else if (ck->config().encoder) {
    BRIGADE_RETURN_IF_ERROR(read_encoder_head(*ck, head));
  } else if (method.empty()) {
    auto score = ck->tensor("score.weight");
    if (!score)
      return corrupt(model_path + ": " + arch + " needs the classifier tensor 'score.weight', which the checkpoint "
                     "lacks (a causal LM becomes a classifier with classifier_from_token and method)");
    if (ck->tensors().count("score.bias"))
      return unsupported(model_path + ": a biased classifier (score.bias) is not supported");
    if (score->shape.size() != 2 || score->shape[0] < 1)
      return corrupt(score->file + ": tensor 'score.weight' has shape " + score->shape_string() + ", not [num_labels, " +
                     std::to_string(hidden) + "]");
    head.num_labels = static_cast<int>(score->shape[0]);
    std::vector<int32_t> all(static_cast<size_t>(head.num_labels));
    for (int l = 0; l < head.num_labels; ++l) all[static_cast<size_t>(l)] = l;
    BRIGADE_RETURN_IF_ERROR(read_rows(*score, all, hidden, head.weight));
    head.source = "score.weight";
    head.generates = !ck->config().seq_cls;
  }

  // Labels: id2label when it names exactly these labels ("0".."n-1"), else transformers' LABEL_<i>.
  for (int l = 0; l < head.num_labels; ++l) head.labels.push_back("LABEL_" + std::to_string(l));
  if (auto names = config.find("id2label"); names != config.end() && names->is_object() &&
                                             static_cast<int>(names->size()) == head.num_labels) {
    std::vector<std::string> named(static_cast<size_t>(head.num_labels));
    bool whole = true;
    for (const auto& [key, value] : names->items()) {
      char* end = nullptr;
      const long l = std::strtol(key.c_str(), &end, 10);
      if (end == key.c_str() || *end != '\0' || l < 0 || l >= head.num_labels || !value.is_string()) whole = false;
      else named[static_cast<size_t>(l)] = value.get<std::string>();
    }
    if (whole) head.labels = std::move(named);
  }

  const std::string problem = string_key(config, "problem_type");
  head.classify_activation = problem == "regression"                   ? ClassifierActivation::identity
                           : problem == "multi_label_classification"   ? ClassifierActivation::sigmoid
                                                                       : by_labels(head.num_labels);
  head.score_activation = by_labels(head.num_labels);
  std::string ce;
  if (auto st = config.find("sentence_transformers"); st != config.end() && st->is_object() &&
                                                      st->contains("activation_fn") && (*st)["activation_fn"].is_string())
    ce = (*st)["activation_fn"].get<std::string>();
  else
    ce = string_key(config, "sbert_ce_default_activation_function");
  if (!ce.empty()) {
    BRIGADE_ASSIGN_OR_RETURN(head.score_activation, activation_by_name(ce, "the cross-encoder activation"));
    if (head.score_activation == ClassifierActivation::softmax) head.score_activation = by_labels(head.num_labels);
  }
  BRIGADE_ASSIGN_OR_RETURN(head.use_pad_token, bool_key(config, "use_pad_token", method.empty()));
  return std::optional<ClassifierHead>(std::move(head));
}

}  // namespace brigade
