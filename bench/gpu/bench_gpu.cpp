// GPU end-to-end benchmark: decode tokens/s at several batch sizes (CUDA Graphs off and on) and
// prefill tokens/s, for a model with random weights made in memory (default synthetic:llama3-8b).
//
// Ceilings measured in the same run (gpu/roofline.h): HBM copy bandwidth (read + write bytes/s)
// and the bf16 GEMM rate. For each case:
//   hbm  = achieved bytes/s over the copy bandwidth (the HBM roofline of a memory-bound step;
//          1.0 = at the roof);
//   gemm = achieved FLOP/s over the GEMM rate;
// bytes and flops per step are the engine's roofline model (Model::step_cost, the same numbers
// /metrics reports): every linear weight once, the embedding rows, lm_head, the KV rows attention
// reads and writes; 2 flops per weight per token (lm_head per sampled row) plus attention.
// Decode sequences start at --ctx tokens of (zeroed) KV and grow by one per step; one step =
// forward + device argmax. Each result is also printed as one "RESULT key=value ..." line.
// Then decode through the whole engine (actors, scheduler, the executor's device path with its
// graph buckets; device: cuda) at --engine-batches: tokens/s once every sequence has its first
// token, i.e. what serving adds on top of the model-only numbers (0 batches = skipped), with the
// scheduler keeping 1 or 2 steps in flight (--engine-depths): at depth 2 the executor queues the
// next step on the GPU before it waits for the current one's tokens.
// Between the model-only and the engine runs, the same model with fp8 weights (E4M3 linear layers,
// bf16 embedding and lm_head; LoadOptions::weight_dtype = f8e4m3) decodes at --fp8-batches with
// graphs on (RESULT name=decode_fp8); its hbm counts the bytes that model reads (one per
// linear-layer parameter) and its gemm is relative to the fp8 GEMM rate measured in the same run
// (RESULT name=ceilings_fp8; 0 batches = skipped).
//
// Usage: bench_gpu [--model SPEC] [--batches 1,8,64,256] [--ctx 512] [--steps 32] [--prefill 2048]
//                  [--engine-batches 1,64] [--engine-depths 1,2]
//                  [--fp8-batches 1,64]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <condition_variable>
#include <mutex>

#include "brigade/engine.h"
#include "gpu/cuda_backend.h"
#include "gpu/roofline.h"
#include "models/model.h"

namespace brigade {
namespace {

struct Options {
  std::string model = "synthetic:llama3-8b";
  std::vector<int> batches = {1, 8, 64, 256};
  int ctx = 512;
  int steps = 32;
  int prefill = 2048;
  std::vector<int> engine_batches = {1, 64};
  std::vector<int> engine_depths = {1, 2};  // scheduler.max_inflight_steps
  std::vector<int> fp8_batches = {1, 64};
};

constexpr int kPageSize = 16;
constexpr int kWarmup = 3;  // eager, capture, one replay

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") o.model = v;
    else if (k == "--ctx") o.ctx = std::atoi(v.c_str());
    else if (k == "--steps") o.steps = std::atoi(v.c_str());
    else if (k == "--prefill") o.prefill = std::atoi(v.c_str());
    else if (k == "--batches" || k == "--engine-batches" || k == "--engine-depths" || k == "--fp8-batches") {
      auto& list = k == "--batches"          ? o.batches
                   : k == "--engine-batches" ? o.engine_batches
                   : k == "--engine-depths"  ? o.engine_depths
                                             : o.fp8_batches;
      list.clear();
      std::stringstream ss(v);
      std::string b;
      while (std::getline(ss, b, ',')) if (std::atoi(b.c_str()) > 0) list.push_back(std::atoi(b.c_str()));
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && o.ctx > 0 && o.steps > 0 && o.prefill >= 0 && !o.batches.empty();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Bench {
  CudaBackend& gpu;
  Model& model;
  KvCache& kv;
  double copy_gbps, gemm_tflops;
  int pages_per_seq;  // per decode sequence
  int prefill_pages;  // of the prefill sequence
  const char* name;   // of the decode RESULT lines

  const ModelConfig& cfg() const { return model.config(); }
  // K and V of every layer, per token (the KV cache's layout, scales included).
  double kv_bytes_per_token() const {
    return static_cast<double>(kv.layout().page_bytes()) / kv.layout().page_size;
  }

  // One decode step of `batch` sequences whose contexts hold ctx tokens before it.
  StepBatch decode_batch(int batch, int ctx, std::mt19937& rng) const {
    StepBatch b;
    b.max_blocks = pages_per_seq;
    b.q_start.push_back(0);
    for (int s = 0; s < batch; ++s) {
      b.tokens.push_back(static_cast<int32_t>(rng() % static_cast<unsigned>(cfg().vocab_size)));
      b.positions.push_back(ctx);
      b.slots.push_back((s * pages_per_seq + ctx / kPageSize) * kPageSize + ctx % kPageSize);
      b.q_start.push_back(s + 1);
      b.ctx_len.push_back(ctx + 1);
      for (int p = 0; p < pages_per_seq; ++p) b.block_table.push_back(s * pages_per_seq + p);
      b.logit_rows.push_back(s);
    }
    return b;
  }

  void step(const StepBatch& b, const Tensor& logits, const Tensor& tokens, bool graphs) {
    if (graphs) gpu.begin_step(static_cast<uint64_t>(b.n_seqs()));
    const Status st = model.forward(b, kv, logits);
    BRIGADE_CHECK(st.is_ok(), "benchmark step runs");
    gpu.argmax(logits, tokens);
    if (graphs) gpu.end_step();
  }

  void decode(int batch, int ctx, int steps, bool graphs) {
    std::mt19937 rng(static_cast<unsigned>(batch));
    auto lbuf = gpu.allocate(static_cast<size_t>(batch) * cfg().vocab_size * 4);
    auto tbuf = gpu.allocate(static_cast<size_t>(batch) * 4);
    BRIGADE_CHECK(lbuf.has_value() && tbuf.has_value(), "GPU memory for logits");
    const Tensor logits = lbuf->view(DType::f32, {batch, cfg().vocab_size});
    const Tensor tokens = tbuf->view(DType::i32, {batch});
    for (int s = 0; s < kWarmup; ++s) step(decode_batch(batch, ctx + s, rng), logits, tokens, graphs);
    gpu.synchronize();
    std::vector<StepBatch> batches;  // made before the clock starts
    double bytes = 0.0, flops = 0.0;   // per step on average, by the engine's roofline model
    for (int s = 0; s < steps; ++s) {
      batches.push_back(decode_batch(batch, ctx + kWarmup + s, rng));
      const StepCost c = model.step_cost(batches.back(), kv_bytes_per_token());
      bytes += c.bytes / steps;
      flops += c.flops / steps;
    }
    const CudaGraphStats g0 = gpu.graph_stats();
    const auto t0 = std::chrono::steady_clock::now();
    for (const StepBatch& b : batches) step(b, logits, tokens, graphs);
    gpu.synchronize();
    const double secs = seconds_since(t0);
    const CudaGraphStats g1 = gpu.graph_stats();
    const double step_s = secs / steps;
    std::printf("RESULT name=%s batch=%d graphs=%s ctx=%d tok_s=%.1f ms_step=%.3f hbm=%.3f gemm=%.4f replays=%lld\n",
                name, batch, graphs ? "on" : "off", ctx, batch / step_s, step_s * 1e3, bytes / step_s / (copy_gbps * 1e9),
                flops / step_s / (gemm_tflops * 1e12), static_cast<long long>(g1.replays - g0.replays));
    std::fflush(stdout);
  }

  void prefill(int n) {
    std::vector<int32_t> toks(static_cast<size_t>(n));
    std::mt19937 rng(7);
    for (auto& t : toks) t = static_cast<int32_t>(rng() % static_cast<unsigned>(cfg().vocab_size));
    StepBatch b;
    b.max_blocks = prefill_pages;
    b.q_start = {0, n};
    b.ctx_len = {n};
    for (int i = 0; i < n; ++i) {
      b.tokens.push_back(toks[static_cast<size_t>(i)]);
      b.positions.push_back(i);
      b.slots.push_back(i);  // sequence 0's pages are 0, 1, ...
    }
    for (int p = 0; p < prefill_pages; ++p) b.block_table.push_back(p);
    b.logit_rows = {n - 1};
    auto lbuf = gpu.allocate(static_cast<size_t>(cfg().vocab_size) * 4);
    BRIGADE_CHECK(lbuf.has_value(), "GPU memory for logits");
    const Tensor logits = lbuf->view(DType::f32, {1, cfg().vocab_size});
    double best = 1e30;
    for (int r = 0; r < 4; ++r) {  // the first run warms up (cuBLASLt plans)
      gpu.synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      BRIGADE_CHECK(model.forward(b, kv, logits).is_ok(), "prefill step runs");
      gpu.synchronize();
      if (r > 0) best = std::min(best, seconds_since(t0));
    }
    const double flops = model.step_cost(b, kv_bytes_per_token()).flops;
    std::printf("RESULT name=prefill tokens=%d tok_s=%.1f ms=%.2f gemm=%.3f\n", n, n / best, best * 1e3,
                flops / best / (gemm_tflops * 1e12));
    std::fflush(stdout);
  }
};

struct Ceilings {
  double copy_gbps, gemm_tflops;
};

// One model's measurements: decode at `batches` (graphs on, and off when eager_too), prefill of
// `prefill` tokens (0: none); decode results are printed as RESULT name=<name>.
struct ModelRun {
  std::optional<DType> weights;  // LoadOptions::weight_dtype
  std::vector<int> batches;
  bool eager_too;
  int prefill;
  const char* name;
};
int run_model(CudaBackend& gpu, const Options& o, const ModelRun& r, const Ceilings& c);

int run(const Options& o) {
  if (cuda_device_count() == 0) {
    std::printf("bench_gpu: no CUDA device; nothing measured\n");
    return 0;
  }
  auto made = make_cuda_backend();
  if (!made) {
    std::fprintf(stderr, "bench_gpu: %s\n", made.status().to_string().c_str());
    return 1;
  }
  CudaBackend& gpu = **made;
  std::printf("device: %s\n", gpu.name().c_str());
  const double copy = measure_copy_bandwidth_gbps(gpu), gemm = measure_bf16_gemm_tflops(gpu);
  std::printf("RESULT name=ceilings copy_gbps=%.1f gemm_tflops=%.1f\n", copy, gemm);
  std::fflush(stdout);
  const Ceilings ceilings{copy, gemm};
  // One model at a time on the device: the bf16 one is freed before the fp8 one loads.
  if (const int rc = run_model(gpu, o, {std::nullopt, o.batches, true, o.prefill, "decode"}, ceilings); rc != 0)
    return rc;
  if (o.fp8_batches.empty()) return 0;
  // fp8 rows: their gemm fraction is of the fp8 GEMM rate (what their matmuls can reach).
  const double fp8_gemm = measure_fp8_gemm_tflops(gpu);
  std::printf("RESULT name=ceilings_fp8 gemm_tflops=%.1f\n", fp8_gemm);
  std::fflush(stdout);
  if (fp8_gemm <= 0.0) {
    std::fprintf(stderr, "bench_gpu: this GPU cannot run fp8 weights; no fp8 rows\n");
    return 0;
  }
  return run_model(gpu, o, {DType::f8e4m3, o.fp8_batches, false, 0, "decode_fp8"}, {copy, fp8_gemm});
}

int run_model(CudaBackend& gpu, const Options& o, const ModelRun& r, const Ceilings& c) {
  const int max_batch = std::max(*std::max_element(r.batches.begin(), r.batches.end()), 1);
  LoadOptions lo;
  lo.max_batch_tokens = std::max(r.prefill, max_batch);
  lo.progress = false;
  lo.weight_dtype = r.weights;
  const auto t0 = std::chrono::steady_clock::now();
  auto model = Model::load(o.model, gpu, lo);
  if (!model) {
    std::fprintf(stderr, "bench_gpu: %s\n", model.status().to_string().c_str());
    return 1;
  }
  std::printf("model: %s (%s weights), %.2fB params, %.2f GB of weights, loaded in %.1f s\n", o.model.c_str(),
              r.weights ? dtype_name(*r.weights) : "bf16", (*model)->n_params() * 1e-9,
              (*model)->weight_bytes() * 1e-9, seconds_since(t0));
  // Decode sequence s owns pages [s * pages_per_seq, ...); the prefill sequence pages [0, ...).
  const int pages_per_seq = (o.ctx + kWarmup + o.steps + 1 + kPageSize - 1) / kPageSize;
  const int prefill_pages = (r.prefill + kPageSize - 1) / kPageSize;
  auto kv = KvCache::allocate(gpu, (*model)->kv_layout(std::max(max_batch * pages_per_seq, prefill_pages), kPageSize,
                                                       DType::bf16));
  if (!kv) {
    std::fprintf(stderr, "bench_gpu: %s\n", kv.status().to_string().c_str());
    return 1;
  }
  // Zeroed KV: attention over it costs what it costs over real keys and values.
  for (int l = 0; l < (*model)->config().n_layers; ++l)
    for (const Tensor* t : {&kv->layer(l).k, &kv->layer(l).v})
      if (cudaMemsetAsync(t->data, 0, t->nbytes(), static_cast<cudaStream_t>(gpu.stream())) != cudaSuccess) return 1;
  Bench bench{gpu, **model, *kv, c.copy_gbps, c.gemm_tflops, pages_per_seq, prefill_pages, r.name};
  for (int b : r.batches) {
    if (r.eager_too) bench.decode(b, o.ctx, o.steps, false);
    bench.decode(b, o.ctx, o.steps, true);
  }
  if (r.prefill > 0) bench.prefill(r.prefill);
  return 0;
}

// `batch` requests of 32 prompt tokens and `steps` generated tokens each, submitted together.
// Returns the decode tokens/s counted from the moment every request has its first token.
double engine_round(Engine& engine, int batch, int steps) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    int n_first = 0, n_done = 0;
    int64_t tokens_after = 0;  // tokens that arrived once every request had its first
    std::chrono::steady_clock::time_point all_first, last;
  } sh;
  std::vector<int> seen(static_cast<size_t>(batch), 0);
  for (int i = 0; i < batch; ++i) {
    GenerateOptions r;
    for (int t = 0; t < 32; ++t) r.prompt_ids.push_back((i * 131 + t * 7) % 1000 + 10);
    r.max_tokens = steps;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    auto id = engine.submit(r, [&sh, &seen, i, batch](const Event& ev) {
      std::lock_guard<std::mutex> lock(sh.mu);
      const auto now = std::chrono::steady_clock::now();
      int& n = seen[static_cast<size_t>(i)];
      if (sh.n_first == batch) sh.tokens_after += static_cast<int64_t>(ev.token_ids.size());
      if (n == 0 && !ev.token_ids.empty() && ++sh.n_first == batch) sh.all_first = now;
      n += static_cast<int>(ev.token_ids.size());
      sh.last = now;
      if (ev.finish != FinishReason::none && ++sh.n_done == batch) sh.cv.notify_all();
    });
    if (!id) {
      std::fprintf(stderr, "bench_gpu: engine submit: %s\n", id.status().to_string().c_str());
      return 0.0;
    }
  }
  std::unique_lock<std::mutex> lock(sh.mu);
  sh.cv.wait(lock, [&] { return sh.n_done == batch; });
  const double s = std::chrono::duration<double>(sh.last - sh.all_first).count();
  return s > 0 ? static_cast<double>(sh.tokens_after) / s : 0.0;
}

int engine_decode(const Options& o) {
  if (o.engine_batches.empty() || cuda_device_count() == 0) return 0;
  const int max_batch = *std::max_element(o.engine_batches.begin(), o.engine_batches.end());
  const int steps = std::max(o.steps, 16);
  for (int depth : o.engine_depths) {
    EngineOptions eo;
    eo.model_path = o.model;
    eo.progress = false;
    auto& inst = eo.topology.instances.front();
    inst.executors.front().device = "cuda";
    inst.kv.memory_mb = 16384;
    inst.scheduler.max_running = max_batch;
    inst.scheduler.max_step_tokens = std::max(2048, max_batch);
    inst.scheduler.max_inflight_steps = depth;
    auto engine = Engine::create(eo);
    if (!engine) {
      std::fprintf(stderr, "bench_gpu: engine: %s\n", engine.status().to_string().c_str());
      return 1;
    }
    for (int b : o.engine_batches) {
      engine_round(**engine, b, 8);  // warm-up: captures the graphs of this bucket (both arenas)
      engine_round(**engine, b, 8);
      const double tok_s = engine_round(**engine, b, steps);
      std::printf("RESULT name=engine_decode batch=%d depth=%d steps=%d tok_s=%.1f ms_step=%.3f\n", b, depth, steps,
                  tok_s, tok_s > 0 ? 1e3 * b / tok_s : 0.0);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace brigade

int main(int argc, char** argv) {
  brigade::Options o;
  if (!brigade::parse(argc, argv, o)) {
    std::fprintf(stderr, "usage: bench_gpu [--model SPEC] [--batches 1,8,64,256] [--ctx 512] [--steps 32] [--prefill 2048] "
                 "[--engine-batches 1,64] [--engine-depths 1,2] [--fp8-batches 1,64]\n");
    return 2;
  }
  const int rc = brigade::run(o);  // the model-only benchmark's model is freed before the engine loads its own
  return rc != 0 ? rc : brigade::engine_decode(o);
}
