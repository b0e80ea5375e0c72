// CUDA Graph steps (Backend::begin_step / end_step): decode steps replayed from a graph give the
// logits of eager steps; the first step of a bucket runs eagerly, the second captures, the rest
// replay; a step whose ops differ (another batch size under the same key) runs eagerly; steps
// queued while the previous one still runs (the executor's steps in flight) stage their inputs
// in the other pinned arena, and their tokens come back through download_async.
#include "tests/gpu/gpu_test_util.h"
#include "tests/models/model_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

struct GraphRun {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> kv;
  OwnedTensor logits;
};

GraphRun make_run(int batch) {
  LoadOptions o;
  o.max_batch_tokens = 64;
  o.progress = false;
  auto m = Model::load("synthetic:tiny", *gpu(), o);
  EXPECT_TRUE(m.has_value()) << m.status().to_string();
  GraphRun r;
  r.model = std::move(*m);
  auto kv = KvCache::allocate(*gpu(), r.model->kv_layout(64, 16, DType::bf16));
  EXPECT_TRUE(kv.has_value());
  r.kv = std::make_unique<KvCache>(std::move(*kv));
  r.logits = empty(*gpu(), DType::f32, {batch, r.model->config().vocab_size});
  return r;
}

// Decode step `step` of `batch` sequences (each sequence has `step` tokens before it).
StepBatch decode_step(int batch, int step) {
  std::vector<testing::SeqChunk> chunks;
  for (int s = 0; s < batch; ++s) chunks.push_back({s, {static_cast<int32_t>((s * 31 + step * 7) % 1000)}, step, false});
  return testing::make_step(chunks, 16, 8);
}

std::vector<float> forward(GraphRun& r, const StepBatch& b, bool as_step, uint64_t key) {
  if (as_step) gpu()->begin_step(key);
  const Tensor logits = r.logits.tensor.rows(0, b.n_seqs());
  const Status st = r.model->forward(b, *r.kv, logits);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  if (as_step) gpu()->end_step();
  return get(*gpu(), logits);
}

TEST(GpuGraphs, ReplayedStepsMatchEagerSteps) {
  BRIGADE_REQUIRE_GPU();
  const int batch = 4;
  GraphRun eager = make_run(batch), graphed = make_run(batch);
  const CudaGraphStats before = gpu()->graph_stats();
  for (int step = 0; step < 12; ++step) {
    const StepBatch b = decode_step(batch, step);
    const auto want = forward(eager, b, false, 0);
    const auto got = forward(graphed, b, true, 100);
    EXPECT_LT(rel_error(got, want), 1e-2) << "step " << step;
  }
  const CudaGraphStats after = gpu()->graph_stats();
  EXPECT_EQ(after.captures - before.captures, 1);
  EXPECT_EQ(after.eager_steps - before.eager_steps, 1);
  EXPECT_EQ(after.replays - before.replays, 11);

  // Same key, different batch: the signature differs, so the step runs eagerly and still matches.
  GraphRun small = make_run(2);
  const StepBatch b2 = decode_step(2, 0);
  const auto want2 = forward(small, b2, false, 0);
  GraphRun small_graphed = make_run(2);
  const auto got2 = forward(small_graphed, b2, true, 100);
  EXPECT_LT(rel_error(got2, want2), 1e-2);
  EXPECT_EQ(gpu()->graph_stats().eager_steps - after.eager_steps, 1);
}

// As the executor queues steps: step k+1 is queued before step k's logits are awaited, and a
// long GEMM queued before each step keeps the device busy, so step k still runs when step k+1
// begins. Each step's inputs differ, so a step reading an arena its successor overwrote would
// give wrong logits.
TEST(GpuGraphs, StepsQueuedBehindARunningStepGiveTheEagerLogits) {
  BRIGADE_REQUIRE_GPU();
  const int batch = 4, n_steps = 12;
  GraphRun eager = make_run(batch), graphed = make_run(batch);
  const int64_t vocab = graphed.model->config().vocab_size;
  const int64_t big = 8192;  // ~1 TFLOP a GEMM: a millisecond or more on any sm_90 part
  OwnedTensor a = empty(*gpu(), DType::bf16, {big, big}), w = empty(*gpu(), DType::bf16, {big, big}),
              c = empty(*gpu(), DType::bf16, {big, big});
  std::vector<Buffer> host;
  for (int i = 0; i < n_steps; ++i) {
    auto h = gpu()->allocate_host(static_cast<size_t>(batch * vocab) * sizeof(float));
    ASSERT_TRUE(h.has_value()) << h.status().to_string();
    host.push_back(std::move(*h));
  }
  std::vector<std::vector<float>> want;  // first: the eager run synchronises after each step
  for (int step = 0; step < n_steps; ++step) want.push_back(forward(eager, decode_step(batch, step), false, 0));
  const CudaGraphStats before = gpu()->graph_stats();
  std::vector<uint64_t> tickets;
  for (int step = 0; step < n_steps; ++step) {
    const StepBatch b = decode_step(batch, step);
    gpu()->matmul(a.tensor, w.tensor, Tensor(), c.tensor);
    gpu()->begin_step(200);
    const Tensor logits = graphed.logits.tensor.rows(0, batch);
    const Status st = graphed.model->forward(b, *graphed.kv, logits);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    gpu()->end_step();
    tickets.push_back(gpu()->download_async(host[static_cast<size_t>(step)].data(), logits));
    if (step > 0) gpu()->wait_download(tickets[static_cast<size_t>(step - 1)]);
  }
  gpu()->wait_download(tickets.back());
  for (int step = 0; step < n_steps; ++step) {
    const float* h = static_cast<const float*>(host[static_cast<size_t>(step)].data());
    const std::vector<float> got(h, h + batch * vocab);
    EXPECT_LT(rel_error(got, want[static_cast<size_t>(step)]), 1e-2) << "step " << step;
  }
  const CudaGraphStats after = gpu()->graph_stats();
  // One graph per arena: both arenas were used, each warmed once and captured once.
  EXPECT_EQ(after.captures - before.captures, 2);
  EXPECT_EQ(after.replays - before.replays + after.eager_steps - before.eager_steps, n_steps);
}

TEST(GpuBackend, DownloadTicketsLandAndRetire) {
  BRIGADE_REQUIRE_GPU();
  std::mt19937 rng(3);
  const std::vector<float> values = random_values(rng, 1 << 16);
  OwnedTensor t = put(*gpu(), DType::f32, {1 << 16}, values);
  auto h = gpu()->allocate_host(values.size() * sizeof(float));
  ASSERT_TRUE(h.has_value());
  const uint64_t ticket = gpu()->download_async(h->data(), t.tensor);
  while (!gpu()->download_done(ticket)) {
  }
  gpu()->wait_download(ticket);
  const float* got = static_cast<const float*>(h->data());
  EXPECT_EQ(std::vector<float>(got, got + values.size()), values);
}

}  // namespace
}  // namespace brigade
