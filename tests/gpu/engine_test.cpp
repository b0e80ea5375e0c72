// The engine on a GPU (topology device: cuda): the executor's device path end to end, i.e.
// tokens fed and sampled on the GPU, decode steps padded to buckets and replayed as CUDA Graphs.
//
// What is compared:
//   - against the CPU engine (f32 activations): the GPU engine's greedy tokens follow the CPU's
//     as long as the CPU's choice is decisive. Each GPU token is checked against the CPU logits
//     of the same context (teacher-forced along the GPU's tokens): the GPU may pick another
//     token than the CPU's argmax only when the CPU logits of the two lie within the bf16
//     tolerance of this model (kLogitsTol of the row's largest |logit|, see model_test.cpp);
//   - against itself: CUDA Graph replays give exactly the tokens of the same steps run eagerly
//     (greedy and seeded device sampling), replays happen after warm-up, and in-flight depth 1,
//     2 and 3 give identical tokens. (The GPU host path is not compared exactly: its eager
//     attention caps the KV split count by the context, the device path's steps do not, so
//     the two sum in different orders.)
#include <gtest/gtest.h>

#include "brigade/engine.h"
#include "models/make_model.h"
#include "tests/engine_test_util.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/models/model_test_util.h"

namespace brigade {
namespace {

using namespace gpu_test;

constexpr double kLogitsTol = 4e-2;

// `kind`: "" (small_gpu_model), "moe" (qwen3_moe) or "deepseek" (deepseek_v3 of the same shape:
// MLA over the latent cache, grouped sigmoid routing, a shared expert).
std::string write_model(const testing::TempDir& dir, DType dtype, const std::string& kind = "") {
  SyntheticModelSpec spec = kind.empty() ? small_gpu_model(21) : small_gpu_moe_model(21);
  if (kind == "deepseek") {
    spec.arch = "deepseek_v3";
    spec.mlp_only_layers.clear();
    spec.n_group = 4;
    spec.topk_group = 2;
    spec.q_lora_rank = 64;
    spec.kv_lora_rank = 128;
    spec.qk_nope_head_dim = 32;
    spec.qk_rope_head_dim = 32;
    spec.v_head_dim = 32;
  }
  spec.max_position = 512;
  spec.dtype = dtype;
  EXPECT_TRUE(write_synthetic_model(spec, dir.str()).is_ok());
  return dir.str();
}

EngineOptions options(const std::string& model, const std::string& device, const std::string& step_path = "auto") {
  EngineOptions o = testing::test_engine_options(model, 2);
  auto& inst = o.topology.instances.front();
  inst.kv.memory_mb = 64;
  inst.executors.front().device = device;
  inst.executors.front().step_path = step_path;
  return o;
}

using testing::greedy_ids;

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 53 + salt * 7) % 990 + 5);
  return p;
}

std::vector<int32_t> generate(Engine& e, const GenerateOptions& r) {
  auto c = e.generate(r);
  EXPECT_TRUE(c.has_value()) << c.status().to_string();
  return c ? c->token_ids : std::vector<int32_t>{};
}

class GpuEngine : public ::testing::TestWithParam<DType> {};

TEST_P(GpuEngine, GreedyTokensFollowTheCpuWhereItsChoiceIsDecisive) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir dir("gpu_engine");
  const std::string model = write_model(dir, GetParam());
  auto gpu_engine = Engine::create(options(model, "cuda"));
  ASSERT_TRUE(gpu_engine.has_value()) << gpu_engine.status().to_string();
  const auto prompt = prompt_of(24, 1);
  const int n = 16;
  const auto got = generate(**gpu_engine, greedy_ids(prompt, n));
  ASSERT_EQ(static_cast<int>(got.size()), n);

  // CPU logits of every position of prompt + got, in one teacher-forced prefill.
  LoadOptions lo;
  lo.max_batch_tokens = 256;
  lo.progress = false;
  auto cpu_model = Model::load(model, cpu(), lo);
  ASSERT_TRUE(cpu_model.has_value()) << cpu_model.status().to_string();
  auto kv = KvCache::allocate(cpu(), (*cpu_model)->kv_layout(8, 16, DType::f32));
  ASSERT_TRUE(kv.has_value());
  std::vector<int32_t> ctx = prompt;
  ctx.insert(ctx.end(), got.begin(), got.end() - 1);
  const StepBatch b = testing::make_step({{0, ctx, 0, true}}, 16, 8);
  const auto logits = testing::run_step(**cpu_model, cpu(), *kv, b);
  const int vocab = (*cpu_model)->config().vocab_size;
  int agree = 0;
  for (int k = 0; k < n; ++k) {
    const float* row = logits.data() + static_cast<size_t>(prompt.size() - 1 + static_cast<size_t>(k)) * vocab;
    const int best = testing::argmax(row, vocab);
    float scale = 0.0f;
    for (int i = 0; i < vocab; ++i) scale = std::max(scale, std::abs(row[i]));
    if (got[static_cast<size_t>(k)] == best) {
      ++agree;
      continue;
    }
    EXPECT_LE(row[best] - row[got[static_cast<size_t>(k)]], 2 * kLogitsTol * scale)
        << "token " << k << ": the GPU chose " << got[static_cast<size_t>(k)] << " where the CPU's " << best
        << " was decisively ahead";
  }
  EXPECT_GE(agree, n / 2) << "the GPU agreed with the CPU's argmax on " << agree << " of " << n << " tokens";
}

INSTANTIATE_TEST_SUITE_P(Weights, GpuEngine, ::testing::Values(DType::f32, DType::bf16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

// The device path with CUDA Graphs on and off runs the same kernels on the same shapes (inside
// a step the attention split count does not depend on the context either way), so the tokens
// are equal exactly: replays read the right staged inputs and write the right buffers. With
// `weights: fp8` too (the executor key reaching the load; fp8 matmuls and their activation
// quantization inside the captured steps). And for qwen3_moe ("moe": routing and experts inside
// the captured steps, no host round trip) and deepseek_v3 ("deepseek": MLA over the latent
// cache and the grouped, biased routing inside the captured steps).
class GpuEngineGraphs : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuEngineGraphs, ReplaysGiveTheTokensOfEagerSteps) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir dir("gpu_engine_graphs");
  const bool moe = GetParam() == "moe" || GetParam() == "deepseek";
  const std::string model = write_model(dir, DType::bf16, moe ? GetParam() : "");
  GenerateOptions seeded = greedy_ids(prompt_of(11, 3), 24);
  seeded.sampling.temperature = 0.7f;
  seeded.sampling.top_k = 50;
  seeded.sampling.seed = 5;
  const std::vector<GenerateOptions> reqs = {greedy_ids(prompt_of(30, 2), 40), seeded, greedy_ids(prompt_of(3, 4), 24)};
  std::vector<std::vector<int32_t>> by_mode[2];
  CudaGraphStats stats[2];
  for (int graphs = 0; graphs < 2; ++graphs) {
    CudaBackend* backend = nullptr;
    EngineOptions o = options(model, "cpu");  // the factory below makes the backend
    o.topology.instances.front().executors.front().weights = moe ? "auto" : GetParam();
    o.backend_factory = [&backend, graphs]() -> std::unique_ptr<Backend> {
      CudaBackendOptions co;
      co.use_graphs = graphs == 1;
      auto b = make_cuda_backend(co);
      EXPECT_TRUE(b.has_value()) << b.status().to_string();
      if (!b) return nullptr;
      backend = b->get();
      return std::move(*b);
    };
    auto e = Engine::create(o);
    ASSERT_TRUE(e.has_value()) << e.status().to_string();
    ASSERT_NE(backend, nullptr);
    for (const auto& r : reqs) by_mode[graphs].push_back(generate(**e, r));
    stats[graphs] = backend->graph_stats();
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(static_cast<int>(by_mode[1][i].size()), reqs[i].max_tokens);
    EXPECT_EQ(by_mode[1][i], by_mode[0][i]) << "request " << i;
  }
  EXPECT_EQ(stats[0].replays, 0);
  // 85 decode steps of bucket 1 (the widths stay at 16 pages): one eager warm-up, one capture,
  // replays after that; each prefill runs outside a step.
  EXPECT_GE(stats[1].captures, 1);
  EXPECT_GE(stats[1].replays, 70) << "eager " << stats[1].eager_steps << ", captures " << stats[1].captures;
  EXPECT_LE(stats[1].eager_steps, 4);
}

INSTANTIATE_TEST_SUITE_P(Weights, GpuEngineGraphs, ::testing::Values("auto", "fp8", "moe", "deepseek"),
                         [](const auto& p) { return p.param; });

TEST(GpuEngineSteps, InflightDepthDoesNotChangeTokens) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir dir("gpu_engine_depth");
  const std::string model = write_model(dir, DType::bf16);
  std::vector<GenerateOptions> reqs = {greedy_ids(prompt_of(5, 3), 20), greedy_ids(prompt_of(40, 4), 12)};
  GenerateOptions seeded = greedy_ids(prompt_of(9, 5), 16);  // the device sampler
  seeded.sampling.temperature = 0.8f;
  seeded.sampling.top_p = 0.9f;
  seeded.sampling.seed = 7;
  reqs.push_back(seeded);
  GenerateOptions penalised = seeded;  // the host sampler, fed its logits row
  penalised.sampling.frequency_penalty = 0.4f;
  penalised.logprobs = 1;
  reqs.push_back(penalised);
  std::vector<std::vector<int32_t>> first;
  for (int depth : {1, 2, 3}) {
    EngineOptions o = options(model, "cuda");
    o.topology.instances.front().scheduler.max_inflight_steps = depth;
    auto e = Engine::create(o);
    ASSERT_TRUE(e.has_value()) << e.status().to_string();
    // One request at a time: every depth runs the same steps (batch composition on the GPU
    // changes GEMM shapes, hence the last bits).
    std::vector<std::vector<int32_t>> got;
    for (const auto& r : reqs) got.push_back(generate(**e, r));
    if (first.empty()) first = got;
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(static_cast<int>(got[i].size()), reqs[i].max_tokens);
      EXPECT_EQ(got[i], first[i]) << "depth " << depth << ", request " << i;
    }
  }
}

// kv.memory_fraction (vLLM's --gpu-memory-utilization) on the GPU: the pool is what the fraction
// of the device leaves once the model is loaded (far more pages than kv.memory_mb's 64 MiB, and
// less than the fraction of the device); a fraction below what is in use already is refused by
// name; --enforce-eager (cuda_graphs false) replays nothing and gives the same greedy tokens.
TEST(GpuEngineMemory, MemoryFractionSizesTheKvPool) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir dir("gpu_engine_fraction");
  const std::string model = write_model(dir, DType::bf16);
  EngineOptions o = options(model, "cuda");
  o.topology.instances.front().kv.memory_fraction = 0.3;
  auto e = Engine::create(o);
  ASSERT_TRUE(e.has_value()) << e.status().to_string();
  const EngineStats st = (*e)->stats();
  auto plain = Engine::create(options(model, "cuda"));
  ASSERT_TRUE(plain.has_value());
  EXPECT_GT(st.kv_pages_total, 8 * (*plain)->stats().kv_pages_total) << "0.3 of a GPU holds far more than 64 MiB";
  const auto greedy = generate(**e, greedy_ids(prompt_of(12, 1), 8));
  EXPECT_EQ(greedy, generate(**plain, greedy_ids(prompt_of(12, 1), 8)));
  plain->reset();
  e->reset();
  EngineOptions tiny = options(model, "cuda");
  tiny.topology.instances.front().kv.memory_fraction = 0.0001;
  auto refused = Engine::create(tiny);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("leaves no room for KV pages"), std::string::npos) << refused.status().message();
  EngineOptions eager = options(model, "cuda");
  eager.topology.instances.front().executors.front().cuda_graphs = false;
  auto ee = Engine::create(eager);
  ASSERT_TRUE(ee.has_value()) << ee.status().to_string();
  EXPECT_EQ(generate(**ee, greedy_ids(prompt_of(12, 1), 8)), greedy);
}

// tp > 1 on GPUs: one GPU per rank, joined by NCCL. With fewer GPUs than ranks the engine says
// which rank lacks its GPU; with two or more GPUs, tp 2 gives tp 1's greedy tokens where they are
// decisive (the all-reduce sums partial products in another order than one GEMM). The device
// machines have one GPU, so there only the refusal runs.
TEST(GpuEngineTp, RanksTakeOneGpuEach) {
  BRIGADE_REQUIRE_GPU();
  testing::TempDir dir("gpu_engine_tp");
  const std::string model = write_model(dir, DType::bf16);
  const int gpus = cuda_device_count();
  EngineOptions too_many = options(model, "cuda");
  too_many.topology.instances.front().executors.front().tp = 2;
  too_many.topology.instances.front().executors.front().device = "cuda:" + std::to_string(gpus - 1);
  auto refused = Engine::create(too_many);
  ASSERT_FALSE(refused.has_value()) << "rank 1 would need GPU " << gpus << ", which does not exist";
  EXPECT_NE(refused.status().message().find("tp rank 1 on cuda:" + std::to_string(gpus)), std::string::npos)
      << refused.status().message();
  if (gpus < 2) return;
  const std::vector<GenerateOptions> reqs = {greedy_ids(prompt_of(12, 1), 16), greedy_ids(prompt_of(40, 2), 16)};
  std::vector<std::vector<int32_t>> by_tp[2];
  for (int tp : {1, 2}) {
    EngineOptions o = options(model, "cuda");
    o.topology.instances.front().executors.front().tp = tp;
    auto e = Engine::create(o);
    ASSERT_TRUE(e.has_value()) << e.status().to_string();
    for (const auto& r : reqs) by_tp[tp - 1].push_back(generate(**e, r));
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(by_tp[1][i].size(), by_tp[0][i].size());
    // The first tokens follow decisive logits; later ones may fork after a near tie.
    EXPECT_EQ(by_tp[1][i][0], by_tp[0][i][0]) << "request " << i;
  }
}

}  // namespace
}  // namespace brigade
