// The MTP modules (Model::forward_mtp) of DeepSeek-V3 (MLA, models/deepseek.cpp) and GLM-4.5
// (the Llama decoder, models/llama.cpp) against the references that scripts/make_fixtures.py
// deepseek_v3_mtp / glm4_moe_mtp compute with transformers' own DeepseekV3 / Glm4Moe layers
// composed as SGLang's DeepseekModelNextN / Glm4MoeModelNextN run them: per position i, the
// module's logits from the token at i + 1 and the target's final-norm hidden state at i
// (teacher-forced over the whole sequence), and a chain of three greedy drafts, each fed the
// module's own normed output. GLM's module also from llama.cpp's GGUF (gguf_glm4moe: blk.3.nextn.*
// and a sparse layer, reference mtp.json over transformers' layers the same way). Also: the
// module's K/V is the last layer of the pool, chunks over its cached entries equal one pass, and
// what is refused. The same for GLM-4.7-Flash's, DeepSeek-V3.2's and GLM-5's modules (the last two
// with their own DSA indexer): glm4_moe_lite_mtp / deepseek_v32_mtp / glm_moe_dsa_mtp.
#include <gtest/gtest.h>

#include <algorithm>

#include "cpu/cpu_backend.h"
#include "hf_fixture.h"
#include "mtp_cases.h"
#include "models/inspect.h"
#include "models/model.h"

namespace brigade {
namespace {

using testing::fixture_dir;
using testing::make_step;

constexpr int kPageSize = 4, kPages = 16;
constexpr float kTol = 1e-4f;

using testing::MtpCase;

std::vector<MtpCase> read_cases(const std::string& expected) { return testing::read_mtp_cases(expected); }

std::unique_ptr<Model> load_mtp(const std::string& model, Backend& backend) {
  LoadOptions o = testing::test_load_options();
  o.mtp = true;
  return testing::load_or_fail(model, backend, o);
}

// A checkpoint with the module, its reference, and a checkpoint of the same architecture whose
// config declares a module that transformers did not save (num_nextn_predict_layers 1, no
// weights), or "" for none.
struct MtpFixture {
  std::string name;
  std::string model;
  std::string expected;
  std::string without_weights;
};

MtpFixture hf(const std::string& name, const std::string& without_weights) {
  return {name, fixture_dir(name), fixture_dir(name) + "/expected.json", without_weights};
}

void PrintTo(const MtpFixture& f, std::ostream* os) { *os << f.name; }

class MtpModule : public ::testing::TestWithParam<MtpFixture> {};

float row_diff(const float* got, const std::vector<float>& want) {
  float d = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) d = std::max(d, std::fabs(got[i] - want[i]));
  return d;
}

// Host helpers over one backend: a device buffer viewed as a tensor, its rows back as floats.
struct Runner {
  Backend& backend;
  Model& model;
  const KvCache& kv;
  int64_t hidden() const { return model.config().hidden_size; }
  Tensor alloc(DType t, int64_t rows, int64_t cols, std::vector<Buffer>& keep) {
    auto buf = backend.allocate(dtype_bytes(t, rows * cols));
    EXPECT_TRUE(buf.has_value());
    keep.push_back(std::move(*buf));
    return keep.back().view(t, {rows, cols});
  }
  // The target's forward over `b`, with every row's final-norm hidden state into `hidden_out`.
  void target(StepBatch b, const Tensor& hidden_out) {
    b.logit_rows.clear();
    b.hidden_rows.resize(static_cast<size_t>(b.n_tokens()));
    for (int r = 0; r < b.n_tokens(); ++r) b.hidden_rows[static_cast<size_t>(r)] = r;
    b.hidden = hidden_out;
    const Status st = model.forward(b, kv, Tensor());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  // forward_mtp; returns the logits of b.logit_rows on the host.
  std::vector<float> mtp(const StepBatch& b, std::vector<Buffer>& keep) {
    const int64_t vocab = model.config().vocab_size, r = static_cast<int64_t>(b.logit_rows.size());
    const Tensor logits = alloc(DType::f32, r, vocab, keep);
    const Status st = model.forward_mtp(b, kv, logits);
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    std::vector<float> host(static_cast<size_t>(r * vocab));
    backend.download(host.data(), logits);
    return host;
  }
};

// The MTP batch over positions [from, to) of `tokens`: each row feeds the token after its position.
StepBatch shifted(const std::vector<int32_t>& tokens, int from, int to) {
  const std::vector<int32_t> next(tokens.begin() + from + 1, tokens.begin() + to + 1);
  return make_step({{0, next, from, true}}, kPageSize, kPages);
}

TEST_P(MtpModule, TeacherForcedLogitsAndDraftChainMatchTheReference) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_mtp(GetParam().model, *backend);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(model->n_mtp_layers(), 1);
  const int vocab = model->config().vocab_size;
  const auto cases = read_cases(GetParam().expected);
  ASSERT_FALSE(cases.empty());
  for (const MtpCase& c : cases) {
    const int n = static_cast<int>(c.tokens.size());
    ASSERT_EQ(static_cast<int>(c.mtp_logits.size()), n - 1);
    auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value());
    Runner run{*backend, *model, *kv};
    std::vector<Buffer> keep;
    const DType act = backend->activation_dtype();
    // The target over positions 0..n-2 (its hidden states there), then the module over the same.
    const Tensor h = run.alloc(act, n - 1, run.hidden(), keep);
    const std::vector<int32_t> fed(c.tokens.begin(), c.tokens.end() - 1);
    run.target(make_step({{0, fed, 0, true}}, kPageSize, kPages), h);
    StepBatch b = shifted(c.tokens, 0, n - 1);
    b.prev_hidden = h;
    b.hidden_rows = {n - 2};
    Tensor g = run.alloc(act, 1, run.hidden(), keep);
    b.hidden = g;
    const auto logits = run.mtp(b, keep);
    float worst = 0.0f;
    for (int i = 0; i < n - 1; ++i)
      worst = std::max(worst, row_diff(logits.data() + static_cast<size_t>(i) * vocab, c.mtp_logits[static_cast<size_t>(i)]));
    EXPECT_LE(worst, kTol) << n << " tokens";
    RecordProperty("mtp_max_abs_diff_" + std::to_string(n), std::to_string(worst));
    // The chain: draft 1 from the last position, then each draft fed back with the module's output.
    std::vector<int32_t> drafts = {testing::argmax(logits.data() + static_cast<size_t>(n - 2) * vocab, vocab)};
    for (int j = 1; j < static_cast<int>(c.chain_drafts.size()); ++j) {
      StepBatch s = make_step({{0, {drafts.back()}, n - 2 + j, true}}, kPageSize, kPages);
      s.prev_hidden = g;
      const Tensor out = run.alloc(act, 1, run.hidden(), keep);
      s.hidden_rows = {0};
      s.hidden = out;
      const auto row = run.mtp(s, keep);
      EXPECT_LE(row_diff(row.data(), c.chain_logits[static_cast<size_t>(j)]), kTol) << "chain step " << j;
      drafts.push_back(testing::argmax(row.data(), vocab));
      g = out;
    }
    EXPECT_EQ(drafts, c.chain_drafts);
  }
}

// The module over the sequence in chunks of 5, each over the entries the earlier ones cached
// (what successive steps do), gives every row's logits as one pass.
TEST_P(MtpModule, ChunksOverCachedEntriesEqualOnePass) {
  auto backend = make_cpu_backend({.n_threads = 2});
  auto model = load_mtp(GetParam().model, *backend);
  ASSERT_NE(model, nullptr);
  const int vocab = model->config().vocab_size;
  const MtpCase c = read_cases(GetParam().expected).back();
  const int n = static_cast<int>(c.tokens.size());
  auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  Runner run{*backend, *model, *kv};
  std::vector<Buffer> keep;
  float worst = 0.0f;
  for (int at = 0; at < n - 1; at += 5) {
    const int end = std::min(n - 1, at + 5);
    const Tensor h = run.alloc(backend->activation_dtype(), end - at, run.hidden(), keep);
    const std::vector<int32_t> fed(c.tokens.begin() + at, c.tokens.begin() + end);
    run.target(make_step({{0, fed, at, true}}, kPageSize, kPages), h);
    StepBatch b = shifted(c.tokens, at, end);
    b.prev_hidden = h;
    const auto logits = run.mtp(b, keep);
    for (int i = at; i < end; ++i)
      worst = std::max(worst, row_diff(logits.data() + static_cast<size_t>(i - at) * vocab, c.mtp_logits[static_cast<size_t>(i)]));
  }
  EXPECT_LE(worst, kTol);
}

TEST_P(MtpModule, KvLayoutHasTheModuleAsItsLastLayer) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto with = load_mtp(GetParam().model, *backend);
  auto without = testing::load_or_fail(GetParam().model, *backend);
  ASSERT_NE(with, nullptr);
  ASSERT_NE(without, nullptr);
  // DSA's index keys take pool layers after the latent ones (DsaKeyPlan); in the DSA fixtures one
  // key row per pool layer (index_head_dim 32 of a 40-wide latent row), so the module's keys add
  // one more.
  const ModelConfig& config = with->config();
  const auto& shared = config.dsa.shared;
  const int n_keys = config.dsa.enabled() ? 1 + static_cast<int>(std::count(shared.begin(), shared.end(), false)) : 0;
  EXPECT_EQ(with->kv_layout(4, 16, DType::bf16).n_layers, config.n_layers + 1 + n_keys);
  EXPECT_EQ(without->kv_layout(4, 16, DType::bf16).n_layers, config.n_layers + std::max(n_keys - 1, 0));
  EXPECT_EQ(without->n_mtp_layers(), 0);
  EXPECT_GT(with->n_params(), without->n_params());
  // The target's own forward and its roofline cost are unchanged by the module (same logits with
  // either pool).
  const MtpCase c = read_cases(GetParam().expected).front();
  std::vector<std::vector<float>> got;
  for (Model* m : {with.get(), without.get()}) {
    auto kv = KvCache::allocate(*backend, m->kv_layout(kPages, kPageSize, DType::f32));
    ASSERT_TRUE(kv.has_value());
    got.push_back(testing::run_step(*m, *backend, *kv, make_step({{0, c.tokens, 0, true}}, kPageSize, kPages)));
  }
  EXPECT_EQ(got[0], got[1]);
  const StepBatch step = make_step({{0, c.tokens, 0, true}}, kPageSize, kPages);
  EXPECT_EQ(with->step_cost(step, 64.0).bytes, without->step_cost(step, 64.0).bytes);
  EXPECT_EQ(with->step_cost(step, 64.0).flops, without->step_cost(step, 64.0).flops);
  const auto info = inspect_model(GetParam().model);
  ASSERT_TRUE(info.has_value());
  EXPECT_NE(format_model_info(*info).find("mtp modules:   1 (num_nextn_predict_layers"), std::string::npos);
}

TEST_P(MtpModule, RefusesWhatItCannotRun) {
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions o = testing::test_load_options();
  o.mtp = true;
  // The deepseek_v3 / glm4_moe fixtures' configs say num_nextn_predict_layers 1 (transformers'
  // default), but transformers saved no MTP weights.
  if (!GetParam().without_weights.empty()) {
    auto none = Model::load(fixture_dir(GetParam().without_weights), *backend, o);
    ASSERT_FALSE(none.has_value());
    EXPECT_EQ(none.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(none.status().message().find("eh_proj"), std::string::npos) << none.status().message();
  }
  auto llama = Model::load(fixture_dir("llama"), *backend, o);
  ASSERT_FALSE(llama.has_value());
  EXPECT_EQ(llama.status().code(), StatusCode::unsupported);
  EXPECT_NE(llama.status().message().find("MTP"), std::string::npos);
  // forward_mtp without the module, and without prev_hidden.
  auto plain = testing::load_or_fail(GetParam().model, *backend);
  ASSERT_NE(plain, nullptr);
  auto kv = KvCache::allocate(*backend, plain->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  const StepBatch b = make_step({{0, {5, 6}, 0, false}}, kPageSize, kPages);
  EXPECT_EQ(plain->forward_mtp(b, *kv, Tensor()).code(), StatusCode::unsupported);
  auto model = load_mtp(GetParam().model, *backend);
  ASSERT_NE(model, nullptr);
  auto kv2 = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv2.has_value());
  auto buf = backend->allocate(sizeof(float) * static_cast<size_t>(model->config().vocab_size));
  ASSERT_TRUE(buf.has_value());
  const Status st = model->forward_mtp(b, *kv2, buf->view(DType::f32, {1, model->config().vocab_size}));
  EXPECT_EQ(st.code(), StatusCode::invalid_argument);
  EXPECT_NE(st.message().find("prev_hidden"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MtpModule,
                         ::testing::Values(hf("deepseek_v3_mtp", "deepseek_v3"), hf("glm4_moe_mtp", "glm4_moe"),
                                           // GLM-4.7-Flash's, DeepSeek-V3.2's and GLM-5's modules (MLA; the
                                           // last two with their own DSA indexer).
                                           hf("glm4_moe_lite_mtp", ""), hf("deepseek_v32_mtp", ""),
                                           hf("glm_moe_dsa_mtp", ""),
                                           // llama.cpp's glm4moe file: blk.3.nextn.* beside a sparse
                                           // layer (scripts/make_gguf_fixtures.py gguf_glm4moe, mtp.json).
                                           MtpFixture{"gguf_glm4moe", fixture_dir("gguf_glm4moe") + "/model.gguf",
                                                      fixture_dir("gguf_glm4moe") + "/mtp.json", ""}),
                         [](const ::testing::TestParamInfo<MtpFixture>& p) { return p.param.name; });

// GLM-4.5-Air's form: the glm4_moe_step fixture stores an MTP layer of random tensors (no
// reference) with two shared experts and no q/k norms or biases. It loads with the module and
// runs it to finite logits.
TEST(MtpModuleGlm, TheAirLayoutsModuleLoadsAndRuns) {
  auto backend = make_cpu_backend({.n_threads = 1});
  auto model = load_mtp(fixture_dir("glm4_moe_step"), *backend);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->n_mtp_layers(), 1);
  const int vocab = model->config().vocab_size, n = 6;
  auto kv = KvCache::allocate(*backend, model->kv_layout(kPages, kPageSize, DType::f32));
  ASSERT_TRUE(kv.has_value());
  Runner run{*backend, *model, *kv};
  std::vector<Buffer> keep;
  const std::vector<int32_t> tokens = {3, 9, 17, 33, 41, 50, 7};
  const Tensor h = run.alloc(backend->activation_dtype(), n, run.hidden(), keep);
  run.target(make_step({{0, std::vector<int32_t>(tokens.begin(), tokens.begin() + n), 0, true}}, kPageSize, kPages), h);
  StepBatch b = shifted(tokens, 0, n);
  b.prev_hidden = h;
  const auto logits = run.mtp(b, keep);
  ASSERT_EQ(static_cast<int>(logits.size()), n * vocab);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

// DeepSeek-V3.2's / GLM-5's module runs its own indexer: without the module's indexer tensors it
// does not load, and GLM-5.x's index_share_for_mtp_iteration (draft steps reusing a choice) is
// refused by name under mtp while the target alone still loads.
TEST(MtpModuleDsa, RefusesAModuleWithoutItsIndexerAndIndexSharing) {
  auto backend = make_cpu_backend({.n_threads = 1});
  LoadOptions o = testing::test_load_options();
  o.mtp = true;
  {
    const testing::TempDir dir("mtp_no_indexer");
    testing::write_edited_fixture("deepseek_v32_mtp", dir, [](std::vector<testing::StEntry>& es) {
      std::erase_if(es, [](const testing::StEntry& e) { return e.name.starts_with("model.layers.2.self_attn.indexer."); });
    });
    auto m = Model::load(dir.str(), *backend, o);
    ASSERT_FALSE(m.has_value());
    EXPECT_NE(m.status().message().find("model.layers.2.self_attn.indexer."), std::string::npos) << m.status().message();
  }
  const testing::TempDir dir("mtp_index_share");
  testing::write_edited_fixture("glm_moe_dsa_mtp", dir, [](std::vector<testing::StEntry>&) {},
                                [](nlohmann::json& j) { j["index_share_for_mtp_iteration"] = true; });
  auto m = Model::load(dir.str(), *backend, o);
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.status().code(), StatusCode::unsupported);
  EXPECT_NE(m.status().message().find("index_share_for_mtp_iteration"), std::string::npos) << m.status().message();
  EXPECT_NE(testing::load_or_fail(dir.str(), *backend), nullptr);
}

}  // namespace
}  // namespace brigade
