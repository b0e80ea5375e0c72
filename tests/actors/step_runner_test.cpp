// The executor's StepRunner: the device path (tokens fed and sampled on the backend, decode
// steps padded to buckets between begin_step/end_step) against the host path, on the CPU
// backend, whose token ops are plain loops.
#include "actors/executor/step_runner.h"

#include <caf/all.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "actors/executor/executor_actor.h"
#include "actors/step_codec.h"
#include "cpu/cpu_backend.h"
#include "messages/registry.h"
#include "messages/types.h"
#include "models/make_model.h"
#include "models/synthetic_tokenizer.h"
#include "models/tokenizer.h"
#include "tests/engine_test_util.h"

namespace brigade {
namespace {

namespace fs = std::filesystem;

// The CPU backend, plus what the device path must respect to be replayable as a graph
// (core/backend.h): no download or synchronize between begin_step and end_step. Records step
// keys and the bytes each run downloads.
//
// With `defer` it behaves like a device whose copies land late: download_async takes the bytes
// in op order (as a stream would) but writes a poison into the destination, which gets the
// bytes only in wait_download; download_done says "not yet" `not_ready_polls` times per ticket,
// or with `busy_until_next_forward` until a later forward was queued (a device whose step takes
// longer than the host needs to queue the next one) or the test said no forward will come
// (`no_more_forwards`; no clock: a loaded machine must not change the order the test checks).
// `log` records each forward ("forward": its embedding) and each wait_download ("wait").
class RecordingBackend final : public Backend {
 public:
  RecordingBackend() : cpu_(make_cpu_backend({2})) {}
  std::vector<uint64_t> keys;
  size_t downloaded = 0;
  bool defer = false;
  int not_ready_polls = 0;
  bool busy_until_next_forward = false;
  std::atomic<bool> no_more_forwards{false};  // set by the test thread, read by the executor's thread
  std::vector<std::string> log;
  int open_tickets() const { return static_cast<int>(tickets_.size()); }

  uint64_t download_async(void* dst, const Tensor& src) override {
    if (!defer) return Backend::download_async(dst, src);
    EXPECT_FALSE(in_step_) << "download_async() inside a step";
    downloaded += src.nbytes();
    Ticket t{dst, std::vector<uint8_t>(src.nbytes()), not_ready_polls, forwards_};
    cpu_->download(t.bytes.data(), src);
    std::memset(dst, 0x7f, src.nbytes());
    tickets_[next_ticket_] = std::move(t);
    return next_ticket_++;
  }
  bool download_done(uint64_t ticket) override {
    if (!defer) return true;
    Ticket& t = tickets_.at(ticket);
    if (busy_until_next_forward)
      return forwards_ > t.forwards || no_more_forwards.load();
    if (t.polls == 0) return true;
    --t.polls;
    return false;
  }
  void wait_download(uint64_t ticket) override {
    log.push_back("wait");
    if (!defer) return;
    auto it = tickets_.find(ticket);
    ASSERT_NE(it, tickets_.end()) << "a ticket is waited for once";
    std::memcpy(it->second.dst, it->second.bytes.data(), it->second.bytes.size());
    tickets_.erase(it);
  }

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
  void embedding(const Tensor& t, const Tensor& ids, const Tensor& out) override {
    log.push_back("forward");
    ++forwards_;
    cpu_->embedding(t, ids, out);
  }
  void matmul(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& out) override { cpu_->matmul(x, w, b, out); }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& out) override { cpu_->rms_norm(x, w, eps, out); }
  void add_rms_norm(const Tensor& r, const Tensor& x, const Tensor& w, float eps, const Tensor& out) override {
    cpu_->add_rms_norm(r, x, w, eps, out);
  }
  void add(const Tensor& a, const Tensor& b) override { cpu_->add(a, b); }
  void silu_mul(const Tensor& g, const Tensor& out) override { cpu_->silu_mul(g, out); }
  void gelu_tanh_mul(const Tensor& g, const Tensor& out) override { cpu_->gelu_tanh_mul(g, out); }
  void scale(const Tensor& x, float s) override { cpu_->scale(x, s); }
  void softcap(const Tensor& x, float cap) override { cpu_->softcap(x, cap); }
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
  void copy(const Tensor& dst, const Tensor& src) override {
    EXPECT_FALSE(in_step_) << "copy() inside a step";
    log.push_back("copy");
    cpu_->copy(dst, src);
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
  struct Ticket {
    void* dst;
    std::vector<uint8_t> bytes;
    int polls;
    int forwards;  // forwards queued before this copy
  };
  int forwards_ = 0;
  std::unique_ptr<Backend> cpu_;
  bool in_step_ = false;
  std::map<uint64_t, Ticket> tickets_;
  uint64_t next_ticket_ = 1;
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
// start step, then decodes one token a step with use_last_sampled, for n_out tokens. Plans do
// not depend on the tokens, so steps can be planned ahead of their results.
struct SeqPlan {
  uint64_t id;
  int start_step;
  std::vector<int32_t> prompt;
  int n_out;
  SamplingConfig sampling;
  int logprobs = -1;
};

class TinyPlanner {
 public:
  explicit TinyPlanner(std::vector<SeqPlan> seqs) : seqs_(std::move(seqs)) {}
  // The next step's plan; empty when every sequence has all its tokens planned.
  PlannedStep next(bool* decode_only = nullptr) {
    PlannedStep p;
    p.step_id = static_cast<uint64_t>(step_);
    bool decodes = true;
    for (const SeqPlan& s : seqs_) {
      int& planned = planned_[s.id];
      if (step_ < s.start_step || planned >= s.n_out) continue;
      SeqWorkItem w;
      w.seq_id = s.id;
      w.start_pos = pos_[s.id];
      const int n_prompt = static_cast<int>(s.prompt.size());
      if (w.start_pos < n_prompt) {
        const int n = std::min(10, n_prompt - w.start_pos);
        w.tokens.assign(s.prompt.begin() + w.start_pos, s.prompt.begin() + w.start_pos + n);
        w.sample = w.start_pos + n == n_prompt;
        decodes = false;
      } else {
        w.tokens = {0};
        w.use_last_sampled = true;
        w.sample = true;
      }
      const int end = w.start_pos + static_cast<int>(w.tokens.size());
      for (int pg = 0; pg * 16 < end; ++pg) w.block_table.push_back(static_cast<int32_t>(s.id * 8 + static_cast<uint64_t>(pg)));
      w.sampling = s.sampling;
      w.n_generated = static_cast<uint32_t>(planned);
      w.logprobs = s.logprobs;
      w.prompt_len = n_prompt;
      pos_[s.id] = end;
      if (w.sample) ++planned;
      p.seqs.push_back(w);
    }
    ++step_;
    if (decode_only) *decode_only = decodes;
    return p;
  }

 private:
  std::vector<SeqPlan> seqs_;
  std::map<uint64_t, int> planned_, pos_;
  int step_ = 0;
};

using Tokens = std::map<uint64_t, std::vector<int32_t>>;

void collect(Tokens& out, const std::vector<SampledResult>& r) {
  for (const SampledResult& t : r) out[t.seq_id].push_back(t.token);
}

Tokens drive(StepRunner& runner, const std::vector<SeqPlan>& seqs, RecordingBackend* rec = nullptr,
             std::vector<size_t>* decode_bytes = nullptr) {
  Tokens out;
  TinyPlanner planner(seqs);
  for (;;) {
    bool decode_only = false;
    const PlannedStep p = planner.next(&decode_only);
    if (p.seqs.empty()) break;
    if (rec) rec->downloaded = 0;
    auto r = runner.run(p);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (!r) break;
    collect(out, *r);
    if (rec && decode_bytes && decode_only) decode_bytes->push_back(rec->downloaded);
  }
  return out;
}

// As the executor runs steps when the scheduler keeps two in flight: each step starts before
// the previous one is finished.
Tokens drive_in_flight(StepRunner& runner, const std::vector<SeqPlan>& seqs, RecordingBackend& rec) {
  Tokens out;
  TinyPlanner planner(seqs);
  std::optional<InFlightStep> prev;
  for (;;) {
    const PlannedStep p = planner.next();
    if (p.seqs.empty()) break;
    auto started = runner.start(p);
    EXPECT_TRUE(started.has_value()) << started.status().to_string();
    if (!started) break;
    if (prev) {
      if (prev->pending() && rec.not_ready_polls > 0) {
        EXPECT_FALSE(runner.ready(*prev));
      }
      collect(out, runner.finish(*prev));
    }
    prev = std::move(*started);
  }
  if (prev) collect(out, runner.finish(*prev));
  EXPECT_EQ(runner.n_pending(), 0);
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

SamplingConfig seeded(uint64_t seed) {
  SamplingConfig c;
  c.temperature = 0.8f;
  c.top_k = 40;
  c.top_p = 0.9f;
  c.seed = seed;
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
  for (uint64_t id : {1, 2, 3, 4, 5}) {  // seeded too: one sampling rule and stream on both paths
    EXPECT_EQ(got.at(id), want.at(id)) << "sequence " << id;
    EXPECT_EQ(static_cast<int>(got.at(id).size()), seqs[id - 1].n_out);
  }
  EXPECT_TRUE(host->backend.keys.empty()) << "the host path runs no backend steps";
  EXPECT_FALSE(dev->backend.keys.empty()) << "decode steps ran as backend steps";

  // The seeded sequence's stream does not depend on its neighbours.
  auto alone = rig(true);
  EXPECT_EQ(drive(*alone->runner, {seqs[3]}).at(4), got.at(4));
}

// A seeded request's tokens depend on its seed and logits only: not on the path, nor on asking
// for logprobs (which moves its rows to the host sampler on the device path), with min_p too.
TEST_F(StepRunnerPaths, SeededTokensDoNotDependOnThePathOrOnLogprobs) {
  SamplingConfig c = seeded(21);
  c.top_k = 0;
  c.min_p = 0.02f;
  const std::vector<SeqPlan> plain = {{1, 0, prompt_of(7, 1), 24, c}};
  const std::vector<SeqPlan> with_logprobs = {{1, 0, prompt_of(7, 1), 24, c, 3}};
  const Tokens want = drive(*rig(false)->runner, plain);
  EXPECT_EQ(drive(*rig(false)->runner, with_logprobs), want);
  EXPECT_EQ(drive(*rig(true)->runner, plain), want);
  EXPECT_EQ(drive(*rig(true)->runner, with_logprobs), want);
  std::set<int32_t> distinct(want.at(1).begin(), want.at(1).end());
  EXPECT_GT(distinct.size(), 3u) << "the draws are not all the argmax";
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

// Steps in flight against steps one at a time: the same tokens, for sequences that join and
// leave, with device-sampled rows (those steps stay in flight) and rows for the host sampler
// (logprobs, penalties: those steps complete in start()), on a backend whose copies land late.
TEST_F(StepRunnerPaths, StepsInFlightGiveTheTokensOfStepsRunOneAtATime) {
  SamplingConfig penalised = greedy();
  penalised.presence_penalty = 0.7f;
  const std::vector<SeqPlan> seqs = {
      {1, 0, prompt_of(5, 1), 16, greedy()},
      {2, 1, prompt_of(23, 2), 12, seeded(7)},
      {3, 3, prompt_of(4, 3), 5, greedy(), 1},  // logprobs
      {4, 6, prompt_of(8, 4), 7, penalised},
      {5, 9, prompt_of(2, 5), 9, seeded(8)},
  };
  const Tokens want = drive(*rig(true)->runner, seqs);
  auto dev = rig(true);
  dev->backend.defer = true;
  dev->backend.not_ready_polls = 2;
  const Tokens got = drive_in_flight(*dev->runner, seqs, dev->backend);
  EXPECT_EQ(got, want);
  for (const SeqPlan& s : seqs) EXPECT_EQ(static_cast<int>(got.at(s.id).size()), s.n_out) << "sequence " << s.id;
  EXPECT_EQ(dev->backend.open_tickets(), 0) << "every download was waited for";
  EXPECT_EQ(dev->runner->n_tracked(), 5u);
}

// Each step's forward is queued before the previous step's tokens are waited for.
TEST_F(StepRunnerPaths, TheNextForwardIsQueuedBeforeThePreviousTokensAreAwaited) {
  const std::vector<SeqPlan> seqs = {{1, 0, prompt_of(6, 1), 6, greedy()}, {2, 0, prompt_of(9, 2), 6, seeded(3)}};
  auto dev = rig(true);
  dev->backend.defer = true;
  const Tokens got = drive_in_flight(*dev->runner, seqs, dev->backend);
  EXPECT_EQ(got, drive(*rig(true)->runner, seqs));
  // Six steps, each with sampling rows: F, then (F W) five times, then the last W.
  std::vector<std::string> want = {"forward"};
  for (int i = 0; i < 5; ++i) want.insert(want.end(), {"forward", "wait"});
  want.push_back("wait");
  EXPECT_EQ(dev->backend.log, want);
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

// A work item that copies the leading rows of another sequence's page (a prefix-cache match ending
// inside a cached page) samples what computing those rows gives, on both paths; the copy runs
// before the forward and outside any backend step. A copy that does not fit the item's start and
// block table is refused before anything is copied.
TEST_F(StepRunnerPaths, CopiedRowsGiveTheTokensOfComputedOnes) {
  for (bool device : {false, true}) {
    auto r = rig(device);
    const std::vector<int32_t> prompt = prompt_of(20, 5), extra = {41, 42, 43};
    SamplingConfig g = greedy();
    auto item = [&](uint64_t id, int start, std::vector<int32_t> tokens, std::vector<int32_t> pages) {
      SeqWorkItem w;
      w.seq_id = id;
      w.start_pos = start;
      w.tokens = std::move(tokens);
      w.block_table = std::move(pages);
      w.sample = true;
      w.sampling = g;
      w.logprobs = 0;
      w.prompt_len = 23;
      return w;
    };
    auto copying = [](SeqWorkItem w, int32_t src, int32_t dst, int rows) {
      w.copy_src = src;
      w.copy_dst = dst;
      w.copy_rows = rows;
      return w;
    };
    PlannedStep first;  // sequence 1 computes the prompt into pages 8 and 9 (rows 16..19 in 9)
    first.step_id = 1;
    first.seqs.push_back(item(1, 0, prompt, {8, 9}));
    ASSERT_TRUE(r->runner->run(first).has_value());
    std::vector<int32_t> whole = prompt;
    whole.insert(whole.end(), extra.begin(), extra.end());
    PlannedStep second;  // 2 reads page 8, copies 4 rows of 9 into 16; 3 computes everything
    second.step_id = 2;
    second.seqs.push_back(copying(item(2, 20, extra, {8, 16}), 9, 16, 4));
    second.seqs.push_back(item(3, 0, whole, {24, 25}));
    r->backend.log.clear();
    auto got = r->runner->run(second);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    ASSERT_EQ(got->size(), 2u);
    std::map<uint64_t, SampledResult> by_seq;
    for (const SampledResult& t : *got) by_seq[t.seq_id] = t;
    EXPECT_EQ(by_seq.at(2).token, by_seq.at(3).token) << "device " << device;
    EXPECT_NEAR(by_seq.at(2).logprob, by_seq.at(3).logprob, 1e-5) << "device " << device;
    ASSERT_FALSE(r->backend.log.empty());
    EXPECT_EQ(r->backend.log.front(), "copy") << "before the forward";
    // The destination page must be the block at the copied rows' position.
    PlannedStep bad;
    bad.step_id = 3;
    SeqWorkItem w = copying(item(4, 20, extra, {8, 32}), 9, 33, 4);
    bad.seqs.push_back(w);
    r->backend.log.clear();
    auto refused = r->runner->run(bad);
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.status().code(), StatusCode::invalid_argument);
    EXPECT_TRUE(std::find(r->backend.log.begin(), r->backend.log.end(), "copy") == r->backend.log.end());
    w.copy_dst = 32;
    w.copy_rows = 5;  // rows 15..19 would straddle two pages
    w.start_pos = 20;
    bad.seqs = {w};
    EXPECT_EQ(r->runner->run(bad).status().code(), StatusCode::invalid_argument);
  }
}

// A json_object sequence that starts after tokens the runner did not compute (a cached prefix of
// its own output after a preemption) rebuilds its matcher from the plan's history: after
// `{"a":1` a '}' may come; without the history the '1' alone breaks the object and only the end
// id is left. Bad words' output tail comes from the history the same way.
TEST_F(StepRunnerPaths, JsonAndSchemaMatchersAreRebuiltFromTheHistory) {
  auto tok = Tokenizer::load(dir_.string());
  ASSERT_TRUE(tok.has_value()) << tok.status().to_string();
  LoadOptions lo;
  lo.max_batch_tokens = 64;
  lo.progress = false;
  RecordingBackend backend;
  auto model = Model::load(dir_.string(), backend, lo);
  ASSERT_TRUE(model.has_value());
  auto kv = KvCache::allocate(backend, (*model)->kv_layout(8, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  StepRunnerOptions o;
  o.vocab = std::make_shared<const TokenTrie>(token_pieces(**tok));
  StepRunner runner(backend, **model, std::move(*kv), o);
  const auto byte = [](char c) { return static_cast<int32_t>(3 + static_cast<uint8_t>(c)); };  // synthetic ids
  const std::vector<int32_t> prompt = {5, 9, 14};
  std::vector<int32_t> out;
  for (char c : std::string(R"({"a":1)")) out.push_back(byte(c));
  // json_object, then a schema the output so far fits (its matcher rebuilt the same way).
  auto item = [&](uint64_t seq, bool with_history, bool schema) {
    SeqWorkItem w;
    w.seq_id = seq;
    w.tokens = {out.back()};
    w.start_pos = static_cast<int>(prompt.size() + out.size() - 1);
    if (with_history) {
      w.history = prompt;
      w.history.insert(w.history.end(), out.begin(), out.end() - 1);
    }
    w.block_table = {static_cast<int32_t>(seq)};
    w.sample = true;
    w.sampling.temperature = 0.0f;
    w.sampling.json_object = !schema;
    if (schema) w.sampling.json_schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})";
    w.sampling.end_ids = {kSyntheticEosId};
    w.sampling.logit_bias = {{byte('}'), 100.0f}};
    w.prompt_len = static_cast<int>(prompt.size());
    w.n_generated = static_cast<uint32_t>(out.size());
    return w;
  };
  // The cached prefix itself: each block's positions before the fed token are written by an
  // unconstrained prefill under another id (attention must not read unwritten KV).
  for (int32_t block = 0; block < 6; ++block) {
    SeqWorkItem w;
    w.seq_id = 100 + static_cast<uint64_t>(block);
    w.tokens = prompt;
    w.tokens.insert(w.tokens.end(), out.begin(), out.end() - 1);
    w.block_table = {block};
    w.prompt_len = static_cast<int>(prompt.size());
    PlannedStep p;
    p.seqs = {w};
    ASSERT_TRUE(runner.run(p).has_value());
  }
  for (bool schema : {false, true}) {
    const uint64_t first = schema ? 2 : 0;
    PlannedStep p;
    p.seqs = {item(first, true, schema), item(first + 1, false, schema)};
    auto r = runner.run(p);
    ASSERT_TRUE(r.has_value()) << r.status().to_string();
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[0].token, byte('}')) << "schema " << schema;
    // Without the history the matcher saw only "1": no object starts so, and the output ends.
    EXPECT_EQ((*r)[1].token, kSyntheticEosId) << "schema " << schema;
  }
  // Bad words read the output's last tokens from the history too: with `:1}` banned the '}' (at
  // +100) cannot follow `{"a":1`; without the history the runner saw only "1" and takes it.
  PlannedStep p;
  p.seqs = {item(4, true, false), item(5, false, false)};
  for (SeqWorkItem& w : p.seqs) {
    w.sampling.json_object = false;
    w.sampling.bad_words = {{byte(':'), byte('1'), byte('}')}};
  }
  auto r = runner.run(p);
  ASSERT_TRUE(r.has_value()) << r.status().to_string();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_NE((*r)[0].token, byte('}'));
  EXPECT_EQ((*r)[1].token, byte('}'));
}

// Speculative verification in the runner: a step that feeds a token and drafts returns the
// accepted drafts and the target's token, which are the tokens plain greedy decoding gives.
TEST_F(StepRunnerPaths, DraftsAreVerifiedAgainstPlainDecoding) {
  const std::vector<int32_t> prompt = {5, 9, 14, 33, 2, 71};
  auto item = [&](std::vector<int32_t> tokens, int start, int n_draft) {
    SeqWorkItem w;
    w.seq_id = 1;
    w.tokens = std::move(tokens);
    w.start_pos = start;
    w.block_table = {0};
    w.sample = true;
    w.sampling.temperature = 0.0f;
    w.prompt_len = static_cast<int>(prompt.size());
    w.n_draft = n_draft;
    return w;
  };
  auto step = [](SeqWorkItem w) {
    PlannedStep p;
    p.seqs.push_back(std::move(w));
    return p;
  };
  auto tokens = [](const Expected<std::vector<SampledResult>>& r) {
    std::vector<int32_t> out;
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (r) for (const auto& x : *r) out.push_back(x.token);
    return out;
  };
  auto plain = rig(false);
  std::vector<int32_t> t = tokens(plain->runner->run(step(item(prompt, 0, 0))));  // t[0]
  for (int i = 0; i < 3; ++i) {
    const auto next = tokens(plain->runner->run(step(item({t.back()}, static_cast<int>(prompt.size()) + i, 0))));
    ASSERT_EQ(next.size(), 1u);
    t.push_back(next[0]);
  }
  for (bool device : {false, true}) {
    auto r = rig(device);
    ASSERT_EQ(tokens(r->runner->run(step(item(prompt, 0, 0)))), std::vector<int32_t>{t[0]});
    const int at = static_cast<int>(prompt.size());
    const int32_t wrong = (t[2] + 1) % 512;
    EXPECT_EQ(tokens(r->runner->run(step(item({t[0], t[1], wrong}, at, 2)))), (std::vector<int32_t>{t[1], t[2]}))
        << "device " << device << ": the second draft is rejected";
    // The rejected position is computed again, now with the right drafts: all accepted + bonus.
    EXPECT_EQ(tokens(r->runner->run(step(item({t[2]}, at + 2, 0)))), std::vector<int32_t>{t[3]}) << "device " << device;
  }
  auto r = rig(false);
  ASSERT_TRUE(r->runner->run(step(item(prompt, 0, 0))).has_value());
  const int at = static_cast<int>(prompt.size());
  EXPECT_EQ(tokens(r->runner->run(step(item({t[0], t[1], t[2]}, at, 2)))), (std::vector<int32_t>{t[1], t[2], t[3]}))
      << "every draft accepted, then the bonus token";
  // Malformed drafts are refused before anything runs.
  SeqWorkItem bad = item({t[3], 4}, at + 3, 2);
  EXPECT_EQ(r->runner->run(step(bad)).status().code(), StatusCode::invalid_argument) << "more drafts than tokens after the first";
  bad = item({t[3], 4}, at + 3, 1);
  bad.use_last_sampled = true;
  EXPECT_EQ(r->runner->run(step(bad)).status().code(), StatusCode::invalid_argument) << "drafts after an unseen token";
  bad = item({t[3], 4}, at + 3, 1);
  bad.sample = false;
  EXPECT_EQ(r->runner->run(step(bad)).status().code(), StatusCode::invalid_argument) << "drafts nobody verifies";
  bad = item({t[3], 4000}, at + 3, 1);
  EXPECT_EQ(r->runner->run(step(bad)).status().code(), StatusCode::invalid_argument) << "a draft outside the vocabulary";
}

struct ExecutorConfig : caf::actor_system_config {
  ExecutorConfig() { register_message_types(*this); }
};

// The executor actor with the scheduler's two steps in flight, over a backend whose copies land
// late: replies come in plan order, with the tokens of steps run one at a time, and each step's
// forward is queued before the previous step's tokens are awaited.
TEST_F(StepRunnerPaths, TheExecutorKeepsTheNextStepQueuedBehindTheOneInFlight) {
  const std::vector<SeqPlan> seqs = {{1, 0, prompt_of(6, 1), 8, greedy()}, {2, 0, prompt_of(9, 2), 8, seeded(5)},
                                     {3, 2, prompt_of(3, 3), 4, greedy(), 2}};
  const Tokens want = drive(*rig(true)->runner, seqs);

  auto res = std::make_shared<ExecutorResources>();
  auto owned = std::make_unique<RecordingBackend>();
  RecordingBackend* backend = owned.get();
  backend->defer = true;
  backend->busy_until_next_forward = true;
  res->backend = std::move(owned);
  LoadOptions lo;
  lo.max_batch_tokens = 64;
  lo.progress = false;
  auto m = Model::load(dir_.string(), *res->backend, lo);
  ASSERT_TRUE(m.has_value()) << m.status().to_string();
  res->model = std::move(*m);
  auto kv = KvCache::allocate(*res->backend, res->model->kv_layout(64, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  res->kv = std::move(*kv);
  res->runner.device_steps = true;
  res->runner.max_step_tokens = lo.max_batch_tokens;

  ExecutorConfig cfg;
  caf::actor_system sys{cfg};
  auto exe = spawn_executor(sys, res);
  res.reset();
  caf::scoped_actor self{sys};
  TinyPlanner planner(seqs);
  Tokens got;
  uint64_t expect_id = 0;
  int in_flight = 0;
  for (bool more = true; more || in_flight > 0;) {
    while (more && in_flight < 2) {
      const PlannedStep p = planner.next();
      if (p.seqs.empty()) {
        more = false;
        backend->no_more_forwards = true;  // the last steps' copies may land now
        break;
      }
      self->send(exe, encode_step_plan(p));
      ++in_flight;
    }
    if (in_flight == 0) break;
    self->receive(
        [&](const step_result_msg& r) {
          const DecodedStepResult d = decode_step_result(r.reader());
          EXPECT_EQ(d.step_id, expect_id++) << "replies in plan order";
          EXPECT_TRUE(d.error.empty()) << d.error;
          collect(got, d.sampled);
        },
        caf::after(std::chrono::seconds(60)) >> [&] { FAIL() << "no step result"; });
    --in_flight;
  }
  EXPECT_EQ(got, want);
  // Step 0 (both prompts) and every later step sample. The logprobs rows of sequence 3 (steps
  // 2-5) go to the host sampler: those steps complete at once, without a ticket. Every other
  // step is awaited only once the next forward is queued, except the last.
  const auto& log = backend->log;
  int forwards = 0, waits = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i] == "forward") {
      ++forwards;
    } else {
      ++waits;
      if (i + 1 < log.size()) {
        EXPECT_GE(forwards, waits + 1) << "wait " << waits << " came before the next forward";
      }
    }
  }
  EXPECT_GT(waits, 3);
  self->send_exit(exe, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace brigade
