#include "models/minimax.h"

#include <cmath>
#include <vector>

#include "models/step_inputs.h"
#include "models/tensor_parallel.h"

namespace brigade {

float lightning_slope(int n_heads, int h, int l, int n_layers) {
  const float base = static_cast<float>(1.0 / std::pow(2.0, 8.0 / n_heads));
  const float factor = static_cast<float>(1.0 - l / (n_layers - 1 + 1e-5) + 1e-5);
  return std::pow(base, static_cast<float>(h + 1)) * factor;
}

Status load_lightning_block(WeightLoader& w, Backend& backend, const ModelConfig& c, int l, const std::string& p,
                            Slice heads, LightningBlock& out) {
  const int64_t h = c.hidden_size, all = c.ssm.layout.n_heads, d = c.ssm.layout.head_dim, hd = all * d;
  const std::string m = p + "self_attn.";
  const Slice ch{heads.begin * d, heads.size * d};  // the heads' channels
  BRIGADE_ASSIGN_OR_RETURN(out.qkv, w.matrix(m + "qkv_proj.weight", 3 * hd, h, {3 * ch.begin, 3 * ch.size}));  // per head q|k|v
  BRIGADE_ASSIGN_OR_RETURN(out.gate, w.matrix(m + "output_gate.weight", hd, h, ch));
  BRIGADE_ASSIGN_OR_RETURN(out.norm, w.vector_f32({m + "norm.weight"}, {hd}, {ch}));
  BRIGADE_ASSIGN_OR_RETURN(out.o, w.matrix(m + "out_proj.weight", h, hd, {}, ch));
  std::vector<float> decay;
  for (int64_t i = heads.begin; i < heads.begin + heads.size; ++i)
    decay.push_back(std::exp(-lightning_slope(static_cast<int>(all), static_cast<int>(i), l, c.n_layers)));
  BRIGADE_ASSIGN_OR_RETURN(out.decay, alloc_tensor(backend, DType::f32, 1, heads.size));
  backend.upload(out.decay.tensor, decay.data());
  return Status::ok();
}

Status allocate_lightning_scratch(Backend& backend, const SsmLayout& l, int64_t rows, LightningScratch& s) {
  const DType act = backend.activation_dtype();
  const int64_t hd = l.d_inner();
  BRIGADE_ASSIGN_OR_RETURN(s.qkv, alloc_tensor(backend, act, rows, 3 * hd));
  BRIGADE_ASSIGN_OR_RETURN(s.y, alloc_tensor(backend, act, rows, hd));
  BRIGADE_ASSIGN_OR_RETURN(s.gate, alloc_tensor(backend, act, rows, hd));
  return Status::ok();
}

int64_t lightning_linear_params(const ModelConfig& c) {
  const int64_t h = c.hidden_size, hd = c.ssm.layout.d_inner();
  return 3 * hd * h + hd * h + h * hd;
}

Status run_lightning_block(Backend& b, const ModelConfig& c, const SsmLayout& l, const LightningBlock& k,
                           const LightningScratch& s, const SsmSeqs& seqs, const Tensor& state, const Tensor& normed,
                           const Tensor& delta, Communicator* comm, const Tensor& sums) {
  const int64_t n = normed.dim(0);
  const Tensor qkv = s.qkv.tensor.rows(0, n), y = s.y.tensor.rows(0, n), gate = s.gate.tensor.rows(0, n);
  constexpr float kEps = 1e-6f;  // MiniMaxRMSNorm(H D): the default epsilon
  b.matmul(normed, k.qkv.tensor, Tensor(), qkv);
  b.lightning_attention(qkv, k.decay.tensor, l, seqs, state, y);
  if (comm == nullptr || comm->size() == 1) {
    b.rms_norm(y, k.norm.tensor, kEps, y);
  } else {  // the norm spans every rank's heads
    BRIGADE_RETURN_IF_ERROR(rms_norm_across_ranks(b, *comm, y, l.n_heads, l.head_dim, c.ssm.layout.d_inner(),
                                                  k.norm.tensor, kEps, sums.rows(0, n)));
  }
  b.matmul(normed, k.gate.tensor, Tensor(), gate);
  b.sigmoid_mul(y, gate);
  b.matmul(y, k.o.tensor, Tensor(), delta);
  return Status::ok();
}

}  // namespace brigade
