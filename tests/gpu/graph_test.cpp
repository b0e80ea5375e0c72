// CUDA Graph steps (Backend::begin_step / end_step): decode steps replayed from a graph give the
// logits of eager steps; the first step of a bucket runs eagerly, the second captures, the rest
// replay; a step whose ops differ (another batch size under the same key) runs eagerly.
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

}  // namespace
}  // namespace brigade
