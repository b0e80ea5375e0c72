// The Gemma 3 vision tower on the CPU backend: one 896x896 image (4096 patches of 14 pixels)
// through SigLIP-400M-wide layers (hidden 1152, MLP 4304, 16 heads of 72) and the projector into
// Gemma 3 4B's 2560 dims, bf16 weights as the Hub stores them. Gemma 3's tower has 27 layers; the
// bench runs `layers` of them (the argument) to stay short, and reports:
//   GFLOPS   = the encoder's flops (Gemma3Vision::flops_per_image: the matmuls and the attention's
//              4 * hidden per patch pair) per second;
//   of_sgemm = that over the f32 GEMM ceiling measured in the same run (cpu/membw.h), the
//              fraction of the machine's matmul rate the tower reaches;
//   per_image_s_27 = the time a whole 27-layer tower would take at the measured time per layer.
// Run: BRIGADE_BENCH_THREADS=2 build/bench/bench_vision (threads default to all cores).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "cpu/cpu_backend.h"
#include "cpu/membw.h"
#include "models/checkpoint.h"
#include "models/gemma3_vision.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

int bench_threads() {
  const char* env = std::getenv("BRIGADE_BENCH_THREADS");
  return env ? std::atoi(env) : 0;
}

double sgemm_gflops() {
  static const double g = [] {
    ThreadPool pool(bench_threads());
    return measure_f32_gemm_gflops(pool, 512, 10);
  }();
  return g;
}

constexpr int kTextHidden = 2560;

VisionConfig siglip_400m(int layers) {
  VisionConfig v;
  v.hidden_size = 1152;
  v.intermediate_size = 4304;
  v.n_layers = layers;
  v.n_heads = 16;
  v.image_size = 896;
  v.patch_size = 14;
  v.tokens_per_image = 256;
  v.image_token = 0;
  return v;
}

// bf16 tensors of the tower and projector, values ~ N(0, 1/fan_in) (norm weights ~1), kept in
// `store` while the checkpoint is used.
std::map<std::string, RawTensor> vision_tensors(const VisionConfig& v, std::vector<std::vector<uint16_t>>& store) {
  std::mt19937 rng(7);
  std::map<std::string, RawTensor> out;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean, float stddev) {
    RawTensor t;
    t.name = name;
    t.file = "bench";
    t.dtype = DType::bf16;
    t.shape = std::move(shape);
    std::normal_distribution<float> d(mean, stddev);
    auto& buf = store.emplace_back(static_cast<size_t>(t.numel()));
    for (auto& x : buf) x = f32_to_bf16(d(rng));
    t.bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buf.data()), buf.size() * 2);
    out.emplace(name, std::move(t));
  };
  const int64_t h = v.hidden_size, i = v.intermediate_size;
  const float sh = 1.0f / std::sqrt(static_cast<float>(h)), si = 1.0f / std::sqrt(static_cast<float>(i));
  add("vision_tower.embeddings.patch_embedding.weight", {h, v.patch_width()}, 0.0f, 0.04f);
  add("vision_tower.embeddings.patch_embedding.bias", {h}, 0.0f, 0.1f);
  add("vision_tower.embeddings.position_embedding.weight", {v.n_patches(), h}, 0.0f, 0.5f);
  for (int l = 0; l < v.n_layers; ++l) {
    const std::string p = "vision_tower.encoder.layers." + std::to_string(l) + ".";
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      add(p + "self_attn." + proj + ".weight", {h, h}, 0.0f, sh);
      add(p + "self_attn." + proj + ".bias", {h}, 0.0f, 0.1f);
    }
    for (const char* ln : {"layer_norm1", "layer_norm2"}) {
      add(p + ln + ".weight", {h}, 1.0f, 0.1f);
      add(p + ln + ".bias", {h}, 0.0f, 0.1f);
    }
    add(p + "mlp.fc1.weight", {i, h}, 0.0f, sh);
    add(p + "mlp.fc1.bias", {i}, 0.0f, 0.1f);
    add(p + "mlp.fc2.weight", {h, i}, 0.0f, si);
    add(p + "mlp.fc2.bias", {h}, 0.0f, 0.1f);
  }
  add("vision_tower.post_layernorm.weight", {h}, 1.0f, 0.1f);
  add("vision_tower.post_layernorm.bias", {h}, 0.0f, 0.1f);
  add("multi_modal_projector.mm_soft_emb_norm.weight", {h}, 0.0f, 0.1f);
  add("multi_modal_projector.mm_input_projection_weight", {1, h, kTextHidden}, 0.0f, sh);
  return out;
}

void BM_Gemma3VisionImage(benchmark::State& state) {
  const VisionConfig v = siglip_400m(static_cast<int>(state.range(0)));
  std::vector<std::vector<uint16_t>> store;
  ModelConfig mc;
  mc.vision = v;
  auto ck = Checkpoint::from_memory("bench", mc, vision_tensors(v, store));
  auto backend = make_cpu_backend({bench_threads()});
  WeightLoader w(*ck, *backend, std::nullopt);
  Gemma3Vision tower;
  if (Status st = tower.load(w, *backend, v, kTextHidden); !st.is_ok()) {
    state.SkipWithError(st.to_string().c_str());
    return;
  }
  auto pixels = std::make_shared<std::vector<float>>(static_cast<size_t>(3) * v.image_size * v.image_size);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : *pixels) x = u(rng);
  const std::vector<StepImage> images = {{0, pixels}};
  auto out = backend->allocate(static_cast<size_t>(v.tokens_per_image) * kTextHidden * sizeof(float));
  const Tensor feats = out->view(DType::f32, {v.tokens_per_image, kTextHidden});
  sgemm_gflops();
  double seconds = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (Status st = tower.encode(images, feats); !st.is_ok()) state.SkipWithError(st.to_string().c_str());
    backend->synchronize();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double iters = static_cast<double>(state.iterations()), gflop = tower.flops_per_image() / 1e9;
  state.counters["GFLOPS"] = benchmark::Counter(iters * gflop, benchmark::Counter::kIsRate);
  state.counters["of_sgemm"] = benchmark::Counter(iters * gflop / sgemm_gflops(), benchmark::Counter::kIsRate);
  state.counters["sgemm_GFLOPS"] = sgemm_gflops();
  // Gemma 3's whole tower: the measured time per layer (the ends, patch embedding and projector,
  // counted in) times 27.
  state.counters["per_image_s_27"] = seconds / iters * 27.0 / v.n_layers;
}
BENCHMARK(BM_Gemma3VisionImage)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

}  // namespace
}  // namespace brigade

BENCHMARK_MAIN();
