// An independent numerical reference: the Llama forward written naively in double precision
// from the Hugging Face modeling_llama definition (neox RoPE via rotate_half, GQA, SwiGLU),
// reading the weights through Checkpoint's raw tensors, compared with Model on a tiny model.
//
// Tolerance: the model computes in f32 with different summation orders; for this model's
// logits (|logit| < ~5) the f32 error is ~1e-5, so 2e-4 absolute is tight yet not flaky.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu/cpu_backend.h"
#include "model_test_util.h"
#include "models/checkpoint.h"
#include "models/make_model.h"

namespace brigade {
namespace {

using Vec = std::vector<double>;

struct RefModel {
  const Checkpoint& ck;
  const ModelConfig& c;

  Vec weight(const std::string& name) const {
    auto t = ck.tensor(name);
    EXPECT_TRUE(t.has_value()) << name;
    Vec v(static_cast<size_t>(t->numel()));
    for (int64_t i = 0; i < t->numel(); ++i) v[static_cast<size_t>(i)] = t->at(i);
    return v;
  }
  // y [rows] = W [rows, cols] x [cols]
  static Vec matvec(const Vec& w, const Vec& x, size_t rows) {
    const size_t cols = x.size();
    Vec y(rows, 0.0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t k = 0; k < cols; ++k) y[r] += w[r * cols + k] * x[k];
    return y;
  }
  Vec rms_norm(const Vec& x, const Vec& w) const {
    double ss = 0.0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + static_cast<double>(c.rms_eps));
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = w[i] * x[i] * inv;
    return y;
  }
  // HF apply_rotary_pos_emb on one head: x * cos + rotate_half(x) * sin.
  void rope(double* x, int pos) const {
    const int d = c.head_dim, half = d / 2;
    Vec out(static_cast<size_t>(d));
    for (int i = 0; i < d; ++i) {
      const int f = i % half;
      const double inv_freq = 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * f / d);
      const double a = pos * inv_freq;
      const double rotated = i < half ? -x[i + half] : x[i - half];
      out[static_cast<size_t>(i)] = x[i] * std::cos(a) + rotated * std::sin(a);
    }
    std::copy(out.begin(), out.end(), x);
  }

  // Logits [n, vocab] for every position of `tokens`.
  std::vector<Vec> forward(const std::vector<int32_t>& tokens) const {
    const size_t n = tokens.size(), h = static_cast<size_t>(c.hidden_size), hd = static_cast<size_t>(c.head_dim);
    const size_t nh = static_cast<size_t>(c.n_heads), nkv = static_cast<size_t>(c.n_kv_heads);
    const Vec embed = weight("model.embed_tokens.weight");
    std::vector<Vec> x(n);
    for (size_t t = 0; t < n; ++t) x[t] = Vec(embed.begin() + static_cast<long>(tokens[t] * h), embed.begin() + static_cast<long>((tokens[t] + 1) * h));
    for (int l = 0; l < c.n_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const Vec wq = weight(p + "self_attn.q_proj.weight"), wk = weight(p + "self_attn.k_proj.weight");
      const Vec wv = weight(p + "self_attn.v_proj.weight"), wo = weight(p + "self_attn.o_proj.weight");
      const Vec n1 = weight(p + "input_layernorm.weight"), n2 = weight(p + "post_attention_layernorm.weight");
      const Vec wg = weight(p + "mlp.gate_proj.weight"), wu = weight(p + "mlp.up_proj.weight");
      const Vec wd = weight(p + "mlp.down_proj.weight");
      std::vector<Vec> q(n), k(n), v(n);
      for (size_t t = 0; t < n; ++t) {
        const Vec xn = rms_norm(x[t], n1);
        q[t] = matvec(wq, xn, nh * hd);
        k[t] = matvec(wk, xn, nkv * hd);
        v[t] = matvec(wv, xn, nkv * hd);
        for (size_t hh = 0; hh < nh; ++hh) rope(&q[t][hh * hd], static_cast<int>(t));
        for (size_t hh = 0; hh < nkv; ++hh) rope(&k[t][hh * hd], static_cast<int>(t));
      }
      for (size_t t = 0; t < n; ++t) {
        Vec attn(nh * hd, 0.0);
        for (size_t hh = 0; hh < nh; ++hh) {
          const size_t kvh = hh / (nh / nkv);
          Vec s(t + 1);
          double mx = -1e300;
          for (size_t j = 0; j <= t; ++j) {
            double dot = 0.0;
            for (size_t i = 0; i < hd; ++i) dot += q[t][hh * hd + i] * k[j][kvh * hd + i];
            s[j] = dot / std::sqrt(static_cast<double>(hd));
            mx = std::max(mx, s[j]);
          }
          double sum = 0.0;
          for (double& e : s) sum += (e = std::exp(e - mx));
          for (size_t j = 0; j <= t; ++j)
            for (size_t i = 0; i < hd; ++i) attn[hh * hd + i] += s[j] / sum * v[j][kvh * hd + i];
        }
        const Vec o = matvec(wo, attn, h);
        for (size_t i = 0; i < h; ++i) x[t][i] += o[i];
        const Vec xn = rms_norm(x[t], n2);
        const size_t inter = static_cast<size_t>(c.intermediate_size);
        const Vec g = matvec(wg, xn, inter), u = matvec(wu, xn, inter);
        Vec act(inter);
        for (size_t i = 0; i < inter; ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        const Vec down = matvec(wd, act, h);
        for (size_t i = 0; i < h; ++i) x[t][i] += down[i];
      }
    }
    const Vec norm = weight("model.norm.weight");
    const Vec head = weight(c.tie_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
    std::vector<Vec> logits(n);
    for (size_t t = 0; t < n; ++t) logits[t] = matvec(head, rms_norm(x[t], norm), static_cast<size_t>(c.vocab_size));
    return logits;
  }
};

void compare_with_reference(bool tied) {
  testing::TempDir dir("ref");
  SyntheticModelSpec s;
  s.hidden_size = 64;
  s.n_layers = 2;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.intermediate_size = 96;
  s.vocab_size = 270;
  s.max_position = 64;
  s.rope_theta = 500.0f;  // small theta: rotation angles large enough to matter in 10 positions
  s.tie_embeddings = tied;
  s.dtype = DType::f32;
  s.seed = 3;
  ASSERT_TRUE(write_synthetic_model(s, dir.str()).is_ok());
  auto ck = Checkpoint::open(dir.str());
  ASSERT_TRUE(ck.has_value()) << ck.status().to_string();
  const std::vector<int32_t> tokens = {1, 200, 13, 13, 77, 5, 260, 42, 9, 100};
  const std::vector<Vec> want = RefModel{**ck, (*ck)->config()}.forward(tokens);

  auto backend = make_cpu_backend({.n_threads = 2});
  LoadOptions opts;
  opts.max_batch_tokens = 16;
  opts.progress = false;
  auto model = Model::load(dir.str(), *backend, opts);
  ASSERT_TRUE(model.has_value()) << model.status().to_string();
  auto kv = KvCache::allocate(*backend, (*model)->kv_layout(2, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  // Two chunks (6 + 4) so the cached-prefix path is compared too.
  std::vector<float> got = testing::run_step(**model, *backend, *kv,
      testing::make_step({{0, {tokens.begin(), tokens.begin() + 6}, 0, true}}, 16, 2));
  const std::vector<float> rest = testing::run_step(**model, *backend, *kv,
      testing::make_step({{0, {tokens.begin() + 6, tokens.end()}, 6, true}}, 16, 2));
  got.insert(got.end(), rest.begin(), rest.end());
  double max_diff = 0.0, max_abs = 0.0;
  for (size_t t = 0; t < tokens.size(); ++t)
    for (size_t v = 0; v < 270; ++v) {
      max_diff = std::max(max_diff, std::fabs(got[t * 270 + v] - want[t][v]));
      max_abs = std::max(max_abs, std::fabs(want[t][v]));
    }
  EXPECT_GT(max_abs, 0.1);
  EXPECT_LT(max_diff, 2e-4) << "max |logit| " << max_abs;
}

TEST(LlamaReference, UntiedMatchesNaiveDoubleForward) { compare_with_reference(false); }
TEST(LlamaReference, TiedMatchesNaiveDoubleForward) { compare_with_reference(true); }

}  // namespace
}  // namespace brigade
