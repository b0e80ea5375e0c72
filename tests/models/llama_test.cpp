// Synthetic Llama checkpoints through Model: every stored dtype loads and runs, batching does not
// change results, and bad steps fail before the KV cache is touched.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu/cpu_backend.h"
#include "model_test_util.h"
#include "models/make_model.h"

namespace brigade {
namespace {

using testing::make_step;
using testing::run_step;
using testing::SeqChunk;
using testing::TempDir;

constexpr int kPageSize = 16;
constexpr int kPagesPerSeq = 4;

SyntheticModelSpec tiny_spec(DType dtype) {
  SyntheticModelSpec s;
  s.hidden_size = 64;
  s.n_layers = 2;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.intermediate_size = 128;
  s.vocab_size = 300;
  s.max_position = 64;
  s.tie_embeddings = false;
  s.dtype = dtype;
  s.seed = 7;
  return s;
}

struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;
};

Loaded load(const std::string& dir, std::optional<DType> weight_dtype = std::nullopt, int max_batch_tokens = 64) {
  Loaded l;
  l.backend = make_cpu_backend({.n_threads = 2});
  LoadOptions opts;
  opts.weight_dtype = weight_dtype;
  opts.max_batch_tokens = max_batch_tokens;
  opts.progress = false;
  auto m = Model::load(dir, *l.backend, opts);
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  if (!m) return l;
  l.model = std::move(*m);
  auto kv = KvCache::allocate(*l.backend, l.model->kv_layout(4 * kPagesPerSeq, kPageSize, DType::f32));
  EXPECT_TRUE(kv.has_value()) << kv.status().to_string();
  l.kv = std::make_unique<KvCache>(std::move(*kv));
  return l;
}

const std::vector<int32_t> kPrompt = {1, 17, 250, 3, 99, 42, 42, 7, 280, 5, 66, 123};

std::vector<float> prompt_logits(Loaded& l) {
  return run_step(*l.model, *l.backend, *l.kv, make_step({SeqChunk{0, kPrompt, 0, true}}, kPageSize, kPagesPerSeq));
}

TEST(LlamaModel, SyntheticF32Bf16F16LoadAndAgree) {
  std::vector<float> reference;
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    TempDir dir("dtype");
    ASSERT_TRUE(write_synthetic_model(tiny_spec(dt), dir.str()).is_ok());
    Loaded l = load(dir.str());
    ASSERT_TRUE(l.model);
    EXPECT_EQ(l.model->config().dtype, dt);
    const int64_t n_params = 2 * 300 * 64 + 2 * (2 * 64 + 64 * 64 * 2 + 2 * 32 * 64 + 3 * 128 * 64) + 64;
    EXPECT_EQ(l.model->n_params(), n_params);
    EXPECT_EQ(l.model->weight_bytes(), (n_params - 5 * 64) * static_cast<int64_t>(dtype_size(dt)) + 5 * 64 * 4);
    const std::vector<float> logits = prompt_logits(l);
    double max_abs = 0.0;
    for (float v : logits) {
      ASSERT_TRUE(std::isfinite(v));
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(v)));
    }
    EXPECT_GT(max_abs, 0.1);  // the weights make the logits vary
    if (dt == DType::f32) {
      reference = logits;
      continue;
    }
    // Same seed: the 16-bit weights are the f32 weights rounded, so logits stay close.
    double max_diff = 0.0;
    for (size_t i = 0; i < logits.size(); ++i)
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(logits[i] - reference[i])));
    EXPECT_LT(max_diff, 0.05 * max_abs) << "16-bit logits drift from f32";
  }
}

TEST(LlamaModel, WeightDtypeConversionAtLoad) {
  TempDir dir("convert");
  ASSERT_TRUE(write_synthetic_model(tiny_spec(DType::bf16), dir.str()).is_ok());
  Loaded kept = load(dir.str());
  Loaded widened = load(dir.str(), DType::f32);
  ASSERT_TRUE(kept.model && widened.model);
  EXPECT_EQ(widened.model->n_params(), kept.model->n_params());
  EXPECT_GT(widened.model->weight_bytes(), kept.model->weight_bytes());
  // bf16 -> f32 is exact, so both compute the same function up to accumulation order.
  const auto a = prompt_logits(kept), b = prompt_logits(widened);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-3) << i;
}

// fp8 weights need fp8 GEMMs (a CUDA GPU of compute capability >= 8.9): the CPU backend refuses
// them before any weight is converted, with the reason and what to load instead.
TEST(LlamaModel, Fp8WeightsOnTheCpuAreUnsupportedAtLoad) {
  TempDir dir("fp8");
  ASSERT_TRUE(write_synthetic_model(tiny_spec(DType::bf16), dir.str()).is_ok());
  auto backend = make_cpu_backend({.n_threads = 1});
  EXPECT_FALSE(backend->supports_weight_dtype(DType::f8e4m3));
  LoadOptions opts;
  opts.weight_dtype = DType::f8e4m3;
  opts.progress = false;
  auto m = Model::load(dir.str(), *backend, opts);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().code(), StatusCode::unsupported);
  EXPECT_NE(m.status().message().find("fp8 weights need a CUDA GPU with compute capability >= 8.9"),
            std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("weights: bf16"), std::string::npos) << m.status().message();
  opts.weight_dtype = DType::i8;  // not a weight type at all: the valid ones are listed
  auto bad = Model::load(dir.str(), *backend, opts);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("supported: f32, f16, bf16, f8e4m3"), std::string::npos)
      << bad.status().message();
}

TEST(LlamaModel, BatchedEqualsAlone) {
  TempDir dir("batch");
  ASSERT_TRUE(write_synthetic_model(tiny_spec(DType::f32), dir.str()).is_ok());
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 5, 9, 200, 31}, {1, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}};
  // Alone: each sequence in its own model instance.
  std::vector<std::vector<float>> alone;
  for (size_t s = 0; s < prompts.size(); ++s) {
    Loaded l = load(dir.str());
    ASSERT_TRUE(l.model);
    std::vector<float> prefill = run_step(*l.model, *l.backend, *l.kv, make_step({SeqChunk{0, prompts[s], 0, true}}, kPageSize, kPagesPerSeq));
    const int32_t next = static_cast<int32_t>(s) + 40;
    std::vector<float> decode = run_step(*l.model, *l.backend, *l.kv,
                                         make_step({SeqChunk{0, {next}, static_cast<int>(prompts[s].size()), false}}, kPageSize, kPagesPerSeq));
    prefill.insert(prefill.end(), decode.begin(), decode.end());
    alone.push_back(prefill);
  }
  // Together: one prefill step with all three, then one decode step with all three.
  Loaded l = load(dir.str());
  ASSERT_TRUE(l.model);
  std::vector<SeqChunk> prefill, decode;
  for (size_t s = 0; s < prompts.size(); ++s) {
    prefill.push_back({static_cast<int>(s), prompts[s], 0, true});
    decode.push_back({static_cast<int>(s), {static_cast<int32_t>(s) + 40}, static_cast<int>(prompts[s].size()), false});
  }
  const std::vector<float> p = run_step(*l.model, *l.backend, *l.kv, make_step(prefill, kPageSize, kPagesPerSeq));
  const std::vector<float> d = run_step(*l.model, *l.backend, *l.kv, make_step(decode, kPageSize, kPagesPerSeq));
  const size_t vocab = 300;
  size_t row = 0;
  for (size_t s = 0; s < prompts.size(); ++s) {
    for (size_t r = 0; r < prompts[s].size(); ++r, ++row)
      for (size_t v = 0; v < vocab; ++v)
        ASSERT_NEAR(p[row * vocab + v], alone[s][r * vocab + v], 1e-4) << "seq " << s << " row " << r;
    for (size_t v = 0; v < vocab; ++v)
      ASSERT_NEAR(d[s * vocab + v], alone[s][prompts[s].size() * vocab + v], 1e-4) << "decode of seq " << s;
  }
}

// The roofline cost of a step, against the arithmetic done here from tiny_spec's shape (f32
// weights, untied: hidden 64, 2 layers, 4 heads of 16 over 2 kv heads, MLP 128, vocabulary 300).
TEST(LlamaModel, StepCostCountsWeightsKvAndAttention) {
  TempDir dir("cost");
  ASSERT_TRUE(write_synthetic_model(tiny_spec(DType::f32), dir.str()).is_ok());
  Loaded l = load(dir.str());
  ASSERT_TRUE(l.model);
  const double h = 64, kv_w = 2 * 16, inter = 128, vocab = 300, layers = 2;
  const double per_layer = h * h + 2 * h * kv_w + h * h + 3 * h * inter + 2 * h;  // q k v o, gate up down, norms
  const double linear = layers * per_layer + h;                                     // + final norm
  ASSERT_EQ(l.model->n_params(), static_cast<int64_t>(linear + 2 * vocab * h));
  ASSERT_EQ(l.model->weight_bytes(), l.model->n_params() * 4) << "f32 weights stay f32 on the CPU";
  const double kvb = 1000;  // bytes of K and V per token over all layers: any value

  // Sequence 0 prefills 5 tokens (logits for the last); sequence 1 decodes its 9th token.
  const StepBatch b = make_step({SeqChunk{0, {1, 2, 3, 4, 5}, 0, false}, SeqChunk{1, {7}, 8, false}}, kPageSize, kPagesPerSeq);
  const StepCost c = l.model->step_cost(b, kvb);
  // Query rows see 1..5 keys (sequence 0) and 9 keys (sequence 1): 24 pairs; 4 * head_dim flops
  // per pair, per query head and layer.
  const double attn = 4 * 16 * 4 * layers * (1 + 2 + 3 + 4 + 5 + 9);
  EXPECT_DOUBLE_EQ(c.flops, 2 * linear * 6 + 2 * vocab * h * 2 + attn);
  // Linear weights and the final norm once, 6 embedding rows, lm_head (two logits rows); KV: the
  // 5 + 9 positions attention reads and the 6 it writes.
  EXPECT_DOUBLE_EQ(c.bytes, 4 * (linear + 6 * h + vocab * h) + kvb * (14 + 6));

  // No logits row: lm_head is not read.
  StepBatch quiet = b;
  quiet.logit_rows.clear();
  EXPECT_DOUBLE_EQ(l.model->step_cost(quiet, kvb).bytes, 4 * (linear + 6 * h) + kvb * 20);
}

// Reads layer 0's K pages to the host.
std::vector<float> k_pages(Loaded& l) {
  const Tensor& k = l.kv->layer(0).k;
  std::vector<float> host(static_cast<size_t>(k.numel()));
  l.backend->download(host.data(), k);
  return host;
}

TEST(LlamaModel, BadStepsFailBeforeTouchingTheCache) {
  TempDir dir("badstep");
  ASSERT_TRUE(write_synthetic_model(tiny_spec(DType::f32), dir.str()).is_ok());
  Loaded l = load(dir.str(), std::nullopt, /*max_batch_tokens=*/16);
  ASSERT_TRUE(l.model);
  prompt_logits(l);
  const std::vector<float> before = k_pages(l);
  auto logits_buf = l.backend->allocate(300 * 20 * sizeof(float));
  ASSERT_TRUE(logits_buf.has_value());
  auto expect_invalid = [&](StepBatch b, const std::string& needle) {
    const Tensor logits = logits_buf->view(DType::f32, {static_cast<int64_t>(b.logit_rows.size()), 300});
    const Status st = l.model->forward(b, *l.kv, logits);
    EXPECT_EQ(st.code(), StatusCode::invalid_argument) << st.to_string();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
    EXPECT_EQ(k_pages(l), before) << "a failed step changed the KV cache";
  };
  expect_invalid(make_step({SeqChunk{1, {5, 300, 6}, 0, false}}, kPageSize, kPagesPerSeq), "token id 300");
  expect_invalid(make_step({SeqChunk{1, {-1}, 0, false}}, kPageSize, kPagesPerSeq), "token id -1");
  expect_invalid(make_step({SeqChunk{1, std::vector<int32_t>(17, 5), 0, false}}, kPageSize, kPagesPerSeq), "max_batch_tokens");
  expect_invalid(make_step({SeqChunk{1, {5}, 64, false}}, kPageSize, 5), "max_position");
  StepBatch bad_page = make_step({SeqChunk{1, {5, 6}, 0, false}}, kPageSize, kPagesPerSeq);
  bad_page.block_table[0] = 1000;
  expect_invalid(bad_page, "page id 1000");
  StepBatch bad_pos = make_step({SeqChunk{1, {5, 6}, 0, false}}, kPageSize, kPagesPerSeq);
  bad_pos.positions[1] = 7;
  expect_invalid(bad_pos, "position 7");
}

}  // namespace
}  // namespace brigade
