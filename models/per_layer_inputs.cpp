#include "models/per_layer_inputs.h"

#include <cmath>
#include <string>

#include "models/step_inputs.h"

namespace brigade {

float round_to(float v, DType t) {
  if (t == DType::bf16) return bf16_to_f32(f32_to_bf16(v));
  if (t == DType::f16) return f16_to_f32(f32_to_f16(v));
  return v;
}

Status PerLayerInputs::load(const Checkpoint& ck, WeightLoader& w, Backend& backend, int n_layers, int64_t hidden,
                            int dim, int vocab, float eps, int64_t max_tokens) {
  n_layers_ = n_layers, dim_ = dim, vocab_ = vocab, hidden_ = hidden, eps_ = eps;
  const int64_t nl = n_layers, d = dim;
  BRIGADE_ASSIGN_OR_RETURN(table_, ck.tensor("model.embed_tokens_per_layer.weight", {vocab, nl * d}));
  if (table_.block_quantized() && (nl * d) % table_.block_elems() != 0)
    return corrupt("model.embed_tokens_per_layer.weight: rows are not whole " + table_.type_name() + " blocks");
  for (int64_t l = 0; l < nl; ++l) {
    BRIGADE_ASSIGN_OR_RETURN(OwnedTensor p, w.matrix("model.per_layer_model_projection.weight", nl * d, hidden, {l * d, d}));
    proj_.push_back(std::move(p));
  }
  BRIGADE_ASSIGN_OR_RETURN(norm_, w.vector_f32({"model.per_layer_projection_norm.weight"}, {d}));
  const DType a = backend.activation_dtype();
  embed_scale_ = round_to(static_cast<float>(std::sqrt(static_cast<double>(d))), a);
  BRIGADE_ASSIGN_OR_RETURN(per_layer_, alloc_tensor(backend, a, nl * max_tokens, d));
  BRIGADE_ASSIGN_OR_RETURN(embed_, alloc_tensor(backend, a, nl * max_tokens, d));
  return Status::ok();
}

// The table's rows of the step's tokens, times sqrt(D) in the activations' type, as layer-major
// [L, n, D] into embed_.
void PerLayerInputs::gather_rows(Backend& backend, const std::vector<int32_t>& ids, int n) {
  const int64_t nl = n_layers_, d = dim_, width = nl * d;
  std::vector<float> row(static_cast<size_t>(width));
  host_.resize(static_cast<size_t>(nl * n * d));
  const DType a = backend.activation_dtype();
  for (int t = 0; t < n; ++t) {
    const int32_t id = ids[static_cast<size_t>(t)];
    const int64_t r = id >= 0 && id < vocab_ ? id : 0;  // Gemma 3n's rule
    table_.dequantize(r * width, width, row.data());
    for (int64_t l = 0; l < nl; ++l)
      for (int64_t k = 0; k < d; ++k)
        host_[static_cast<size_t>((l * n + t) * d + k)] = round_to(row[static_cast<size_t>(l * d + k)], a) * embed_scale_;
  }
  const Tensor dst = embed_.tensor.rows(0, nl * n);
  if (a == DType::f32) return backend.upload(dst, host_.data());
  host16_.resize(host_.size());
  for (size_t i = 0; i < host_.size(); ++i) host16_[i] = a == DType::bf16 ? f32_to_bf16(host_[i]) : f32_to_f16(host_[i]);
  backend.upload(dst, host16_.data());
}

void PerLayerInputs::compute(Backend& backend, const std::vector<int32_t>& ids, const Tensor& x, int n) {
  const int64_t nl = n_layers_;
  const DType a = backend.activation_dtype();
  gather_rows(backend, ids, n);
  const Tensor all = per_layer_.tensor.rows(0, nl * n);
  for (int64_t l = 0; l < nl; ++l) backend.matmul(x, proj_[static_cast<size_t>(l)].tensor, Tensor(), all.rows(l * n, n));
  backend.scale(all, round_to(static_cast<float>(std::pow(static_cast<double>(hidden_), -0.5)), a));
  backend.rms_norm(all, norm_.tensor, eps_, all);
  backend.add(all, embed_.tensor.rows(0, nl * n));
  backend.scale(all, round_to(1.0f / std::sqrt(2.0f), a));
}

}  // namespace brigade
