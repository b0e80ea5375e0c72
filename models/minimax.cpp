#include "models/minimax.h"

#include <cmath>
#include <vector>

#include "models/step_inputs.h"

namespace brigade {

float lightning_slope(int n_heads, int h, int l, int n_layers) {
  const float base = static_cast<float>(1.0 / std::pow(2.0, 8.0 / n_heads));
  const float factor = static_cast<float>(1.0 - l / (n_layers - 1 + 1e-5) + 1e-5);
  return std::pow(base, static_cast<float>(h + 1)) * factor;
}

Status load_lightning_block(WeightLoader& w, Backend& backend, const ModelConfig& c, int l, const std::string& p,
                            LightningBlock& out) {
  const int64_t h = c.hidden_size, heads = c.ssm.layout.n_heads, hd = c.ssm.layout.d_inner();
  const std::string m = p + "self_attn.";
  BRIGADE_ASSIGN_OR_RETURN(out.qkv, w.matrix(m + "qkv_proj.weight", 3 * hd, h));
  BRIGADE_ASSIGN_OR_RETURN(out.gate, w.matrix(m + "output_gate.weight", hd, h));
  BRIGADE_ASSIGN_OR_RETURN(out.norm, w.vector_f32({m + "norm.weight"}, {hd}));
  BRIGADE_ASSIGN_OR_RETURN(out.o, w.matrix(m + "out_proj.weight", h, hd));
  std::vector<float> decay(static_cast<size_t>(heads));
  for (int i = 0; i < heads; ++i)
    decay[static_cast<size_t>(i)] = std::exp(-lightning_slope(static_cast<int>(heads), i, l, c.n_layers));
  BRIGADE_ASSIGN_OR_RETURN(out.decay, alloc_tensor(backend, DType::f32, 1, heads));
  backend.upload(out.decay.tensor, decay.data());
  return Status::ok();
}

Status allocate_lightning_scratch(Backend& backend, const ModelConfig& c, int64_t rows, LightningScratch& s) {
  const DType act = backend.activation_dtype();
  const int64_t hd = c.ssm.layout.d_inner();
  BRIGADE_ASSIGN_OR_RETURN(s.qkv, alloc_tensor(backend, act, rows, 3 * hd));
  BRIGADE_ASSIGN_OR_RETURN(s.y, alloc_tensor(backend, act, rows, hd));
  BRIGADE_ASSIGN_OR_RETURN(s.gate, alloc_tensor(backend, act, rows, hd));
  return Status::ok();
}

int64_t lightning_linear_params(const ModelConfig& c) {
  const int64_t h = c.hidden_size, hd = c.ssm.layout.d_inner();
  return 3 * hd * h + hd * h + h * hd;
}

void run_lightning_block(Backend& b, const ModelConfig& c, const LightningBlock& k, const LightningScratch& s,
                         const SsmSeqs& seqs, const Tensor& state, const Tensor& normed, const Tensor& delta) {
  const int64_t n = normed.dim(0);
  const Tensor qkv = s.qkv.tensor.rows(0, n), y = s.y.tensor.rows(0, n), gate = s.gate.tensor.rows(0, n);
  b.matmul(normed, k.qkv.tensor, Tensor(), qkv);
  b.lightning_attention(qkv, k.decay.tensor, c.ssm.layout, seqs, state, y);
  b.rms_norm(y, k.norm.tensor, 1e-6f, y);  // MiniMaxRMSNorm(H D): the default epsilon
  b.matmul(normed, k.gate.tensor, Tensor(), gate);
  b.sigmoid_mul(y, gate);
  b.matmul(y, k.o.tensor, Tensor(), delta);
}

}  // namespace brigade
