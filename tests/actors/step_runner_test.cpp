// The executor's StepRunner: the device path (tokens fed and sampled on the backend, decode
// steps padded to buckets between begin_step/end_step) against the host path, on the CPU
// backend, whose token ops are plain loops.
#include "actors/executor/step_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>

#include "cpu/cpu_backend.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

// The CPU backend, plus what the device path must respect to be replayable as a graph
// (core/backend.h): no download or synchronize between begin_step and end_step. Records step
// keys and the bytes each run downloads.
class RecordingBackend final : public Backend {
 public:
  RecordingBackend() : cpu_(make_cpu_backend({2})) {}
  std::vector<uint64_t> keys;
  size_t downloaded = 0;

  std::string name() const override { return "recording " + cpu_->name(); }
  DType activation_dtype() const override { return cpu_->activation_dtype(); }
  Expected<Buffer> allocate(size_t bytes) override { return cpu_->allocate(bytes); }
  void upload(const Tensor& dst, const void* src) override { cpu_->upload(dst, src); }
  void download(void* dst, const Tensor& src) override {
    EXPECT_FALSE(in_step_) << "download() inside a step";
    downloaded += src.nbytes();
    cpu_->download(dst, src);
  }
  Expected<OwnedTensor> prepare_weight(const Tensor& host, std::optional<DType> want) override {
    return cpu_->prepare_weight(host, want);
  }
  void synchronize() override {
    EXPECT_FALSE(in_step_) << "synchronize() inside a step";
    cpu_->synchronize();
  }
  void embedding(const Tensor& t, const Tensor& ids, const Tensor& out) override { cpu_->embedding(t, ids, out); }
  void matmul(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out) override { cpu_->matmul(x, w, b, out); }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) override { cpu_->rms_norm(x, w, eps, out); }
  void add_rms_norm(const Tensor& r, const Tensor& x, const Tensor& w, float eps, const Tensor& out) override {
    cpu_->add_rms_norm(r, x, w, eps, out);
  }
  void add(const Tensor& a, const Tensor& b) override { cpu_->add(a, b); }
  void silu_mul(const Tensor& g, const Tensor& out) override { cpu_->silu_mul(g, out); }
  void qk_head_norm(const Tensor& qkv, const QkvLayout& l, const Tensor& q, const Tensor& k, float eps) override {
    cpu_->qk_head_norm(qkv, l, q, k, eps);
  }
  void rope(const Tensor& qkv, const QkvLayout& l, const Tensor& pos, const RopeConfig& r) override {
    cpu_->rope(qkv, l, pos, r);
  }
  void write_kv(const KvLayer& c, const Tensor& qkv, const QkvLayout& l, const Tensor& slots) override {
    cpu_->write_kv(c, qkv, l, slots);
  }
  void attention(const Tensor& qkv, const QkvLayout& l, const KvLayer& c, const AttentionMeta& m, float scale,
                 const Tensor& out) override {
    cpu_->attention(qkv, l, c, m, scale, out);
  }
  void gather_rows(const Tensor& x, const Tensor& rows, const Tensor& out) override { cpu_->gather_rows(x, rows, out); }
  void argmax(const Tensor& logits, const Tensor& tokens) override { cpu_->argmax(logits, tokens); }
  void sample(const Tensor& logits, const Tensor& p, const Tensor& tokens) override { cpu_->sample(logits, p, tokens); }
  void gather_tokens(const Tensor& table, const Tensor& index, const Tensor& tokens) override {
    cpu_->gather_tokens(table, index, tokens);
  }
  void scatter_tokens(const Tensor& tokens, const Tensor& index, const Tensor& table) override {
    cpu_->scatter_tokens(tokens, index, table);
  }
  void begin_step(uint64_t key) override {
    EXPECT_FALSE(in_step_) << "begin_step inside a step";
    in_step_ = true;
    keys.push_back(key);
  }
  void end_step() override {
    EXPECT_TRUE(in_step_) << "end_step without begin_step";
    in_step_ = false;
  }

 private:
  std::unique_ptr<Backend> cpu_;
  bool in_step_ = false;
};

class StepRunnerPaths : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("brigade_step_runner_test_" + std::to_string(::getpid()));
    Status st = write_synthetic_model(testing::tiny_llama(512, 256, 11), dir_.string());
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;

  // A runner over its own backend, model and KV pool (64 pages of 16 tokens; sequence s uses
  // pages [8 s, 8 s + 8)).
  struct Rig {
    RecordingBackend backend;
    std::unique_ptr<Model> model;
    std::unique_ptr<StepRunner> runner;
  };
  static std::unique_ptr<Rig> rig(bool device) {
    auto r = std::make_unique<Rig>();
    LoadOptions lo;
    lo.max_batch_tokens = 64;
    lo.progress = false;
    auto m = Model::load(dir_.string(), r->backend, lo);
    EXPECT_TRUE(m.has_value()) << m.status().to_string();
    r->model = std::move(*m);
    auto kv = KvCache::allocate(r->backend, r->model->kv_layout(64, 16, DType::f32));
    EXPECT_TRUE(kv.has_value());
    StepRunnerOptions o;
    o.device_steps = device;
    o.max_step_tokens = lo.max_batch_tokens;
    r->runner = std::make_unique<StepRunner>(r->backend, *r->model, std::move(*kv), o);
    return r;
  }
};
fs::path StepRunnerPaths::dir_;

// A tiny scheduler: each sequence prefills its prompt in chunks of up to 10 tokens from its
// start step, then decodes one token a step with use_last_sampled, for n_out tokens.
struct SeqPlan {
  uint64_t id;
  int start_step;
  std::vector<int32_t> prompt;
  int n_out;
  SamplingConfig sampling;
  int logprobs = -1;
};

std::map<uint64_t, std::vector<int32_t>> drive(StepRunner& runner, const std::vector<SeqPlan>& seqs,
                                               RecordingBackend* rec = nullptr,
                                               std::vector<size_t>* decode_bytes = nullptr) {
  std::map<uint64_t, std::vector<int32_t>> out;
  std::map<uint64_t, int> pos;
  for (int step = 0; step < 40; ++step) {
    PlannedStep p;
    p.step_id = static_cast<uint64_t>(step);
    bool decode_only = true;
    for (const SeqPlan& s : seqs) {
      auto& got = out[s.id];
      if (step < s.start_step || static_cast<int>(got.size()) >= s.n_out) continue;
      SeqWorkItem w;
      w.seq_id = s.id;
      w.start_pos = pos[s.id];
      const int n_prompt = static_cast<int>(s.prompt.size());
      if (w.start_pos < n_prompt) {
        const int n = std::min(10, n_prompt - w.start_pos);
        w.tokens.assign(s.prompt.begin() + w.start_pos, s.prompt.begin() + w.start_pos + n);
        w.sample = w.start_pos + n == n_prompt;
        decode_only = false;
      } else {
        w.tokens = {0};
        w.use_last_sampled = true;
        w.sample = true;
      }
      const int end = w.start_pos + static_cast<int>(w.tokens.size());
      for (int pg = 0; pg * 16 < end; ++pg) w.block_table.push_back(static_cast<int32_t>(s.id * 8 + static_cast<uint64_t>(pg)));
      w.sampling = s.sampling;
      w.n_generated = static_cast<uint32_t>(got.size());
      w.logprobs = s.logprobs;
      w.prompt_len = n_prompt;
      pos[s.id] = end;
      p.seqs.push_back(w);
    }
    if (p.seqs.empty()) break;
    if (rec) rec->downloaded = 0;
    auto r = runner.run(p);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (!r) break;
    for (const SampledResult& t : *r) out[t.seq_id].push_back(t.token);
    if (rec && decode_bytes && decode_only) decode_bytes->push_back(rec->downloaded);
  }
  return out;
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 37 + salt) % 500 + 3);
  return p;
}

SamplingConfig greedy() {
  SamplingConfig c;
  c.temperature = 0.0f;
  return c;
}

TEST_F(StepRunnerPaths, DeviceGreedyTokensEqualTheHostPath) {
  SamplingConfig penalised = greedy();
  penalised.frequency_penalty = 0.5f;
  penalised.repetition_penalty = 1.3f;
  SamplingConfig seeded;
  seeded.temperature = 0.8f;
  seeded.top_p = 0.9f;
  seeded.seed = 42;
  const std::vector<SeqPlan> seqs = {
      {1, 0, prompt_of(5, 1), 12, greedy()},
      {2, 0, prompt_of(12, 2), 10, greedy(), 2},     // logprobs: the host sampler on either path
      {3, 2, prompt_of(20, 3), 9, penalised},        // joins in a mixed step; penalties on the host
      {4, 0, prompt_of(3, 4), 14, seeded},           // the device sampler's stream on the device path
      {5, 5, prompt_of(7, 5), 6, greedy()},
  };
  auto host = rig(false);
  auto dev = rig(true);
  const auto want = drive(*host->runner, seqs);
  const auto got = drive(*dev->runner, seqs);
  for (uint64_t id : {1, 2, 3, 5}) {
    EXPECT_EQ(got.at(id), want.at(id)) << "sequence " << id;
    EXPECT_EQ(static_cast<int>(got.at(id).size()), seqs[id - 1].n_out);
  }
  EXPECT_TRUE(host->backend.keys.empty()) << "the host path runs no backend steps";
  EXPECT_FALSE(dev->backend.keys.empty()) << "decode steps ran as backend steps";

  // The seeded sequence draws from the device stream, which does not depend on its neighbours.
  auto alone = rig(true);
  EXPECT_EQ(drive(*alone->runner, {seqs[3]}).at(4), got.at(4));
}

TEST_F(StepRunnerPaths, DecodeStepsReuseOneKeyAndDownloadOnlyTheTokens) {
  const std::vector<SeqPlan> seqs = {
      {1, 0, prompt_of(5, 1), 20, greedy()},
      {2, 0, prompt_of(9, 2), 20, greedy()},
      {3, 0, prompt_of(2, 3), 20, greedy()},
  };
  auto dev = rig(true);
  std::vector<size_t> bytes;
  drive(*dev->runner, seqs, &dev->backend, &bytes);
  ASSERT_GE(bytes.size(), 15u);
  for (size_t b : bytes) EXPECT_EQ(b, 3 * sizeof(int32_t)) << "three sampled tokens, no logits";
  // Three sequences pad to bucket 4; their block tables stay within 16 pages: one key.
  const auto& k = dev->backend.keys;
  ASSERT_EQ(k.size(), bytes.size());
  for (uint64_t key : k) EXPECT_EQ(key, k.front());
  auto host = rig(false);
  EXPECT_EQ(drive(*host->runner, seqs), drive(*rig(true)->runner, seqs));
}

TEST_F(StepRunnerPaths, AFeedWithoutASampledTokenIsRefusedAndChangesNothing) {
  auto dev = rig(true);
  PlannedStep p;
  SeqWorkItem w;
  w.seq_id = 9;
  w.tokens = {0};
  w.use_last_sampled = true;
  w.sample = true;
  w.block_table = {0};
  p.seqs.push_back(w);
  auto r = dev->runner->run(p);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(dev->runner->n_tracked(), 0u);
  // A bad token id fails inside the forward (checked before any op): the new slot is undone.
  w.use_last_sampled = false;
  w.tokens = {100000};
  p.seqs = {w};
  r = dev->runner->run(p);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  w.tokens = {17};
  p.seqs = {w};
  EXPECT_TRUE(dev->runner->run(p).has_value()) << "the runner still works";
}

}  // namespace
}  // namespace brigade
