#include "models/kimi_linear.h"

#include <cmath>
#include <vector>

#include "models/step_inputs.h"

namespace brigade {
namespace {

// Tensor `name` of `numel` elements whose shape is `want` but for dimensions of size 1 (A_log's
// [1, 1, H, 1], a conv's [C, 1, K] or llama.cpp's [1, C, 1, K]) appended to host as f32 through f:
// its elements [begin, end) in storage order (all when end < 0).
template <typename F>
Status append_host(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& want, F f,
                   std::vector<float>& host, int64_t begin = 0, int64_t end = -1) {
  BRIGADE_ASSIGN_OR_RETURN(RawTensor t, ck.tensor(name));
  std::vector<int64_t> squeezed, want_squeezed;
  for (int64_t d : t.shape)
    if (d != 1) squeezed.push_back(d);
  for (int64_t d : want)
    if (d != 1) want_squeezed.push_back(d);
  if (squeezed != want_squeezed) {
    RawTensor w;
    w.shape = want;
    return corrupt(t.file + ": tensor '" + name + "' has shape " + t.shape_string() + " but the config needs " +
                   w.shape_string());
  }
  if (t.block_quantized() || (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16))
    return corrupt(t.file + ": tensor '" + name + "' is stored " + t.type_name() + "; it must be F32, BF16 or F16");
  for (int64_t i = begin; i < (end < 0 ? t.numel() : end); ++i) host.push_back(f(static_cast<float>(t.at(i))));
  return Status::ok();
}

Expected<OwnedTensor> upload_f32(Backend& backend, const std::vector<float>& host) {
  BRIGADE_ASSIGN_OR_RETURN(OwnedTensor out, alloc_tensor(backend, DType::f32, 1, static_cast<int64_t>(host.size())));
  backend.upload(out.tensor, host.data());
  return out;
}

}  // namespace

Status load_kda_block(const Checkpoint& ck, WeightLoader& w, Backend& backend, const ModelConfig& c, const std::string& p,
                      bool gguf, Slice heads, KdaBlock& out, int64_t& host_params) {
  const SsmLayout& l = c.ssm.layout;
  const int64_t h = c.hidden_size, d = l.head_dim, hd = int64_t{l.n_heads} * d, k = l.conv_kernel;
  const std::string m = p + "self_attn.";
  const Slice ch{heads.begin * d, heads.size * d};  // the heads' channels
  BRIGADE_ASSIGN_OR_RETURN(out.qkv, w.fused({m + "q_proj.weight", m + "k_proj.weight", m + "v_proj.weight"}, {hd, hd, hd},
                                            h, {ch, ch, ch}));
  const auto same = [](float v) { return v; };
  std::vector<float> conv;
  for (const char* part : {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"})
    BRIGADE_RETURN_IF_ERROR(append_host(ck, m + part, {hd, 1, k}, same, conv, ch.begin * k, (ch.begin + ch.size) * k));
  BRIGADE_ASSIGN_OR_RETURN(out.conv_w, upload_f32(backend, conv));
  std::vector<float> a, dt_bias;
  BRIGADE_RETURN_IF_ERROR(append_host(ck, m + "A_log", {l.n_heads}, [gguf](float v) { return gguf ? v : -std::exp(v); }, a,
                                      heads.begin, heads.begin + heads.size));
  BRIGADE_RETURN_IF_ERROR(append_host(ck, m + "dt_bias", {hd}, same, dt_bias, ch.begin, ch.begin + ch.size));
  BRIGADE_ASSIGN_OR_RETURN(out.a, upload_f32(backend, a));
  BRIGADE_ASSIGN_OR_RETURN(out.dt_bias, upload_f32(backend, dt_bias));
  host_params += 3 * hd * k + l.n_heads + hd;
  BRIGADE_ASSIGN_OR_RETURN(out.f_a, w.matrix(m + "f_a_proj.weight", d, h));
  BRIGADE_ASSIGN_OR_RETURN(out.f_b, w.matrix(m + "f_b_proj.weight", hd, d, ch));
  BRIGADE_ASSIGN_OR_RETURN(out.b, w.matrix(m + "b_proj.weight", l.n_heads, h, heads));
  BRIGADE_ASSIGN_OR_RETURN(out.g_a, w.matrix(m + "g_a_proj.weight", d, h));
  BRIGADE_ASSIGN_OR_RETURN(out.g_b, w.matrix(m + "g_b_proj.weight", hd, d, ch));
  BRIGADE_ASSIGN_OR_RETURN(out.o_norm, w.vector_f32({m + "o_norm.weight"}, {d}));
  BRIGADE_ASSIGN_OR_RETURN(out.o, w.matrix(m + "o_proj.weight", h, hd, {}, ch));
  return Status::ok();
}

Status allocate_kimi_scratch(Backend& backend, const ModelConfig& c, const SsmLayout& l, int64_t mla_heads, int64_t rows,
                             KimiScratch& s) {
  const DType act = backend.activation_dtype();
  const auto make = [&](OwnedTensor& dst, int64_t cols) -> Status {
    BRIGADE_ASSIGN_OR_RETURN(dst, alloc_tensor(backend, act, rows, cols));
    return Status::ok();
  };
  const int64_t hd = l.d_inner();
  if (c.recurrent()) {
    for (OwnedTensor* t : {&s.qkv_in, &s.qkv}) BRIGADE_RETURN_IF_ERROR(make(*t, l.conv_dim()));
    BRIGADE_RETURN_IF_ERROR(make(s.low, l.head_dim));
    for (OwnedTensor* t : {&s.f, &s.gate, &s.y}) BRIGADE_RETURN_IF_ERROR(make(*t, hd));
    BRIGADE_RETURN_IF_ERROR(make(s.beta, l.n_heads));
  }
  if (c.n_attention_layers() == 0) return Status::ok();
  return allocate_mla_scratch(backend, c, mla_heads, rows, s.mla);
}

int64_t kda_linear_params(const ModelConfig& c) {
  const SsmLayout& l = c.ssm.layout;
  const int64_t h = c.hidden_size, hd = l.d_inner(), d = l.head_dim;
  return h * (l.conv_dim() + 2 * d + l.n_heads + hd) + 2 * hd * d;  // q|k|v, f_a, g_a, b, o; f_b, g_b
}

void run_kda_block(Backend& b, const ModelConfig& c, const SsmLayout& l, const KdaBlock& k, const KimiScratch& s,
                   const SsmSeqs& seqs, const Tensor& conv_state, const Tensor& state, const Tensor& normed,
                   const Tensor& delta) {
  const int64_t n = normed.dim(0);
  const Tensor qkv_in = s.qkv_in.tensor.rows(0, n), qkv = s.qkv.tensor.rows(0, n), low = s.low.tensor.rows(0, n);
  const Tensor f = s.f.tensor.rows(0, n), beta = s.beta.tensor.rows(0, n), gate = s.gate.tensor.rows(0, n);
  const Tensor y = s.y.tensor.rows(0, n);
  b.matmul(normed, k.qkv.tensor, Tensor(), qkv_in);
  b.ssm_conv(qkv_in, 0, k.conv_w.tensor, Tensor(), seqs, conv_state, qkv);
  b.matmul(normed, k.f_a.tensor, Tensor(), low);
  b.matmul(low, k.f_b.tensor, Tensor(), f);
  b.matmul(normed, k.b.tensor, Tensor(), beta);
  const SsmParams params{k.a.tensor, Tensor(), k.dt_bias.tensor, 0.0f, 0.0f, Tensor(), c.rms_eps};
  b.kda(qkv, f, beta, l, params, seqs, state, y);
  // KimiLinearRMSNormGated per head: RMSNorm(o) * weight * sigmoid(gate).
  const Tensor per_head(y.data, y.dtype, {n * l.n_heads, l.head_dim});
  b.rms_norm(per_head, k.o_norm.tensor, c.rms_eps, per_head);
  b.matmul(normed, k.g_a.tensor, Tensor(), low);
  b.matmul(low, k.g_b.tensor, Tensor(), gate);
  b.sigmoid_mul(y, gate);
  b.matmul(y, k.o.tensor, Tensor(), delta);
}

void run_nope_mla(Backend& b, const ModelConfig& c, int n_heads, const MlaWeights& a, const KimiScratch& s,
                  const KvLayer& cache, const AttentionMeta& meta, const Tensor& slots, const Tensor& normed,
                  const Tensor& delta) {
  const MlaLayout mla{n_heads, c.kv_lora_rank, c.qk_rope_head_dim};
  const MlaStep step = mla_project(b, c, a, s.mla, normed);
  mla_cache_and_absorb(b, a, step, mla.n_heads, cache, slots);  // q_pe and k_pe as they are: no RoPE
  b.mla_attention(step.q_lat, step.q_pe, mla, cache, meta, c.attn_scale, step.o_lat);
  mla_output(b, a, step, mla.n_heads, delta);
}

}  // namespace brigade
