// The vision towers on the CPU backend. Gemma 3's: one 896x896 image (4096 patches of 14 pixels)
// through SigLIP-400M-wide layers (hidden 1152, MLP 4304, 16 heads of 72) and the projector into
// Gemma 3 4B's 2560 dims, bf16 weights as the Hub stores them. Gemma 3's tower has 27 layers; the
// bench runs `layers` of them (the argument) to stay short, and reports:
//   GFLOPS   = the encoder's flops (Gemma3Vision::flops_per_image: the matmuls and the attention's
//              4 * hidden per patch pair) per second;
//   of_sgemm = that over the f32 GEMM ceiling measured in the same run (cpu/membw.h), the
//              fraction of the machine's matmul rate the tower reaches;
//   per_image_s_27 = the time a whole 27-layer tower would take at the measured time per layer.
// Qwen2.5-VL 7B's: one 448x448 image (32x32 patches of 14 pixels, 256 tokens) through blocks of
// its width (hidden 1280, gated MLP 3420, 16 heads of 80; windows of 112 pixels, every second
// block here attending over the whole image, where the real tower has 4 of 32), its merger into
// 3584 dims; per_image_s_32 = a whole 32-block tower at the measured time per block.
// Qwen3-VL 8B's: the same image (28x28 patches of 16 pixels, 196 tokens) through blocks of its
// width (hidden 1152, MLP 4304 with gelu_tanh, 16 heads of 72, full attention, learned position
// embeddings resampled to the grid), a DeepStack tap after block 1 and the merger into 4096
// dims; per_image_s_27 = a whole 27-block tower at the measured time per block (the real one
// has 3 taps; the bench's one is counted 13.5 times, so it overstates by a few percent).
// LLaVA-OneVision 7B's: SigLIP so400m/14 at 384 pixels (hidden 1152, MLP 4304, 16 heads of 72,
// 27 x 27 patches a tile, the stride dropping 6 pixels a side), the projector into Qwen2 7B's 3584
// dims, anyres_max_9 over its 36 pinpoints. Argument 1 picks the images: 0 = one lone 1536 x 2048
// image (the 1536 x 2304 pinpoint: its base tile and 4 x 6 tiles, the 108 x 162 feature grid cut
// to 108 x 144 and resized to 70 x 93; the smallest image anyres_max_9 resizes has 12 tiles);
// 1 = three images of one prompt (each its base tile alone). per_call_s_26 = the call with a whole
// 26-layer tower at the measured time per layer (the projector into 3584 dims, as heavy as a few
// layers, is counted in that time and so overstated).
// SmolVLM-256M's: SigLIP-B/16 at 512 pixels (hidden 768, MLP 3072, 12 heads of 64, 32 x 32 patches
// a tile), the pixel shuffle by 4 and the projection into SmolLM2-135M's 576 dims; one 2048 x 2048
// image, as Idefics3ImageProcessor cuts it (4 x 4 tiles and the global tile: 17 tiles, 1088
// tokens); per_image_s_12 = a whole 12-layer tower at the measured time per layer.
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

#include "bench/bench_ceilings.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "cpu/cpu_backend.h"
#include "cpu/membw.h"
#include "models/anyres.h"
#include "models/checkpoint.h"
#include "models/clip_vision.h"
#include "models/gemma3_vision.h"
#include "models/tile_vision.h"
#include "models/qwen_vision.h"
#include "models/weight_loader.h"

namespace brigade {
namespace {

using bench::bench_threads;
using bench::sgemm_gflops;

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
// Random bf16 tensors for a synthetic checkpoint, kept in `store` while it is used.
struct TensorMaker {
  std::vector<std::vector<uint16_t>>& store;
  std::map<std::string, RawTensor> out;
  std::mt19937 rng{7};
  void operator()(const std::string& name, std::vector<int64_t> shape, float mean, float stddev) {
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
  }
};

std::map<std::string, RawTensor> vision_tensors(const VisionConfig& v, std::vector<std::vector<uint16_t>>& store) {
  TensorMaker add{store, {}};
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
  return std::move(add.out);
}

// Uniform pixels in [-1, 1] (what normalised images span).
std::shared_ptr<std::vector<float>> random_pixels(size_t n) {
  auto pixels = std::make_shared<std::vector<float>>(n);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : *pixels) x = u(rng);
  return pixels;
}

// Loads `tower` from the synthetic checkpoint and times encode(images) into [tokens, text_hidden]:
// GFLOPS and of_sgemm for flops(tower) per pass (the loaded tower counts them), and `whole` = the
// measured time times whole_scale (the whole tower from the layers run).
template <typename Tower, typename Flops>
void run_tower(benchmark::State& state, const VisionConfig& v, std::map<std::string, RawTensor> tensors, Tower& tower,
               int text_hidden, const std::vector<StepImage>& images, int tokens, Flops flops, const char* whole,
               double whole_scale) {
  ModelConfig mc;
  mc.vision = v;
  auto ck = Checkpoint::from_memory("bench", mc, std::move(tensors));
  auto backend = make_cpu_backend({bench_threads()});
  WeightLoader w(*ck, *backend, std::nullopt);
  if (Status st = tower.load(w, *backend, v, text_hidden); !st.is_ok()) {
    state.SkipWithError(st.to_string().c_str());
    return;
  }
  auto out = backend->allocate(static_cast<size_t>(tokens) * text_hidden * sizeof(float));
  const Tensor feats = out->view(DType::f32, {tokens, text_hidden});
  std::vector<Buffer> taps;  // Qwen3-VL's DeepStack outputs
  std::vector<Tensor> deepstack;
  if constexpr (requires { tower.n_deepstack(); })
    for (int k = 0; k < tower.n_deepstack(); ++k) {
      taps.push_back(std::move(*backend->allocate(static_cast<size_t>(tokens) * text_hidden * sizeof(float))));
      deepstack.push_back(taps.back().view(DType::f32, {tokens, text_hidden}));
    }
  sgemm_gflops();
  double seconds = 0.0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    Status st;
    if constexpr (requires { tower.n_deepstack(); }) st = tower.encode(images, feats, deepstack);
    else st = tower.encode(images, feats);
    if (!st.is_ok()) state.SkipWithError(st.to_string().c_str());
    backend->synchronize();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double iters = static_cast<double>(state.iterations()), gflop = flops(tower) / 1e9;
  state.counters["GFLOPS"] = benchmark::Counter(iters * gflop, benchmark::Counter::kIsRate);
  state.counters["of_sgemm"] = benchmark::Counter(iters * gflop / sgemm_gflops(), benchmark::Counter::kIsRate);
  state.counters["sgemm_GFLOPS"] = sgemm_gflops();
  state.counters[whole] = seconds / iters * whole_scale;
}

void BM_Gemma3VisionImage(benchmark::State& state) {
  const VisionConfig v = siglip_400m(static_cast<int>(state.range(0)));
  std::vector<std::vector<uint16_t>> store;
  Gemma3Vision tower;
  const std::vector<StepImage> images = {{0, random_pixels(size_t{3} * v.image_size * v.image_size)}};
  // Gemma 3's whole tower: the measured time per layer (the ends, patch embedding and projector,
  // counted in) times 27.
  run_tower(state, v, vision_tensors(v, store), tower, kTextHidden, images, v.tokens_per_image,
            [](const Gemma3Vision& t) { return t.flops_per_image(); }, "per_image_s_27", 27.0 / v.n_layers);
}
BENCHMARK(BM_Gemma3VisionImage)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

constexpr int kQwenTextHidden = 3584;  // Qwen2.5-VL 7B

VisionConfig qwen25_vl_7b(int layers) {
  VisionConfig v;
  v.kind = VisionKind::qwen2_5_vl;
  v.hidden_size = 1280;
  v.intermediate_size = 3420;
  v.n_layers = layers;
  v.n_heads = 16;
  v.patch_size = 14;
  v.merge = 2;
  v.temporal_patch = 2;
  v.out_hidden_size = kQwenTextHidden;
  v.window_size = 112;
  for (int l = 1; l < layers; l += 2) v.fullatt_blocks.push_back(l);
  v.hidden_act = "silu";
  v.image_token = 0;
  return v;
}

// A Qwen tower block's attention: fused q|k|v and the output projection, with biases.
void add_attention(TensorMaker& add, const std::string& p, int64_t h) {
  const float sh = 1.0f / std::sqrt(static_cast<float>(h));
  add(p + "attn.qkv.weight", {3 * h, h}, 0.0f, sh);
  add(p + "attn.qkv.bias", {3 * h}, 0.0f, 0.1f);
  add(p + "attn.proj.weight", {h, h}, 0.0f, sh);
  add(p + "attn.proj.bias", {h}, 0.0f, 0.1f);
}

std::map<std::string, RawTensor> qwen_tensors(const VisionConfig& v, std::vector<std::vector<uint16_t>>& store) {
  TensorMaker add{store, {}};
  const int64_t h = v.hidden_size, i = v.intermediate_size, m = h * v.merge * v.merge;
  const float sh = 1.0f / std::sqrt(static_cast<float>(h)), si = 1.0f / std::sqrt(static_cast<float>(i));
  add("visual.patch_embed.proj.weight", {h, v.patch_width()}, 0.0f, 0.04f);
  for (int l = 0; l < v.n_layers; ++l) {
    const std::string p = "visual.blocks." + std::to_string(l) + ".";
    add(p + "norm1.weight", {h}, 1.0f, 0.1f);
    add(p + "norm2.weight", {h}, 1.0f, 0.1f);
    add_attention(add, p, h);
    for (const char* proj : {"gate_proj", "up_proj"}) {
      add(p + "mlp." + proj + ".weight", {i, h}, 0.0f, sh);
      add(p + "mlp." + proj + ".bias", {i}, 0.0f, 0.1f);
    }
    add(p + "mlp.down_proj.weight", {h, i}, 0.0f, si);
    add(p + "mlp.down_proj.bias", {h}, 0.0f, 0.1f);
  }
  add("visual.merger.ln_q.weight", {h}, 1.0f, 0.1f);
  add("visual.merger.mlp.0.weight", {m, m}, 0.0f, 1.0f / std::sqrt(static_cast<float>(m)));
  add("visual.merger.mlp.0.bias", {m}, 0.0f, 0.1f);
  add("visual.merger.mlp.2.weight", {kQwenTextHidden, m}, 0.0f, 1.0f / std::sqrt(static_cast<float>(m)));
  add("visual.merger.mlp.2.bias", {kQwenTextHidden}, 0.0f, 0.1f);
  return std::move(add.out);
}

// One square image of grid x grid patches through a Qwen tower of v's blocks from make_tensors;
// `whole` scales the time to `blocks` blocks.
template <typename MakeTensors>
void run_qwen_tower(benchmark::State& state, const VisionConfig& v, MakeTensors make_tensors, int text_hidden, int grid,
                    const char* whole, int blocks) {
  std::vector<std::vector<uint16_t>> store;
  QwenVision tower;
  const std::vector<StepImage> images = {{0, random_pixels(static_cast<size_t>(grid * grid * v.patch_width())), grid, grid}};
  run_tower(state, v, make_tensors(v, store), tower, text_hidden, images, v.image_tokens(grid, grid),
            [grid](const QwenVision& t) { return t.flops(grid, grid); }, whole, static_cast<double>(blocks) / v.n_layers);
}

void BM_Qwen25VisionImage(benchmark::State& state) {
  // 32 patches of 14: 448 pixels a side.
  run_qwen_tower(state, qwen25_vl_7b(static_cast<int>(state.range(0))), qwen_tensors, kQwenTextHidden, 32,
                 "per_image_s_32", 32);
}
BENCHMARK(BM_Qwen25VisionImage)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

constexpr int kQwen3TextHidden = 4096;  // Qwen3-VL 8B

VisionConfig qwen3_vl_8b(int layers) {
  VisionConfig v;
  v.kind = VisionKind::qwen3_vl;
  v.hidden_size = 1152;
  v.intermediate_size = 4304;
  v.n_layers = layers;
  v.n_heads = 16;
  v.patch_size = 16;
  v.merge = 2;
  v.temporal_patch = 2;
  v.out_hidden_size = kQwen3TextHidden;
  v.num_position_embeddings = 2304;
  v.deepstack_layers = {layers - 1};
  v.hidden_act = "gelu_pytorch_tanh";
  v.image_token = 0;
  return v;
}

std::map<std::string, RawTensor> qwen3_tensors(const VisionConfig& v, std::vector<std::vector<uint16_t>>& store) {
  TensorMaker add{store, {}};
  const int64_t h = v.hidden_size, i = v.intermediate_size, m = h * v.merge * v.merge;
  const float sh = 1.0f / std::sqrt(static_cast<float>(h)), si = 1.0f / std::sqrt(static_cast<float>(i)),
              sm = 1.0f / std::sqrt(static_cast<float>(m));
  add("visual.patch_embed.proj.weight", {h, v.patch_width()}, 0.0f, 0.04f);
  add("visual.patch_embed.proj.bias", {h}, 0.0f, 0.1f);
  add("visual.pos_embed.weight", {v.num_position_embeddings, h}, 0.0f, 0.5f);
  for (int l = 0; l < v.n_layers; ++l) {
    const std::string p = "visual.blocks." + std::to_string(l) + ".";
    for (const char* norm : {"norm1", "norm2"}) {
      add(p + norm + ".weight", {h}, 1.0f, 0.1f);
      add(p + norm + ".bias", {h}, 0.0f, 0.1f);
    }
    add_attention(add, p, h);
    add(p + "mlp.linear_fc1.weight", {i, h}, 0.0f, sh);
    add(p + "mlp.linear_fc1.bias", {i}, 0.0f, 0.1f);
    add(p + "mlp.linear_fc2.weight", {h, i}, 0.0f, si);
    add(p + "mlp.linear_fc2.bias", {h}, 0.0f, 0.1f);
  }
  auto merger = [&](const std::string& p, int64_t norm) {
    add(p + "norm.weight", {norm}, 1.0f, 0.1f);
    add(p + "norm.bias", {norm}, 0.0f, 0.1f);
    add(p + "linear_fc1.weight", {m, m}, 0.0f, sm);
    add(p + "linear_fc1.bias", {m}, 0.0f, 0.1f);
    add(p + "linear_fc2.weight", {kQwen3TextHidden, m}, 0.0f, sm);
    add(p + "linear_fc2.bias", {kQwen3TextHidden}, 0.0f, 0.1f);
  };
  merger("visual.merger.", h);
  for (size_t k = 0; k < v.deepstack_layers.size(); ++k) merger("visual.deepstack_merger_list." + std::to_string(k) + ".", m);
  return std::move(add.out);
}

void BM_Qwen3VisionImage(benchmark::State& state) {
  // 28 patches of 16: 448 pixels a side.
  run_qwen_tower(state, qwen3_vl_8b(static_cast<int>(state.range(0))), qwen3_tensors, kQwen3TextHidden, 28,
                 "per_image_s_27", 27);
}
BENCHMARK(BM_Qwen3VisionImage)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

constexpr int kOnevisionTextHidden = 3584;  // Qwen2 7B

VisionConfig onevision_7b(int layers) {
  VisionConfig v = siglip_400m(layers);
  v.kind = VisionKind::llava;
  v.image_size = 384;
  v.merge = 1, v.temporal_patch = 1;
  v.hidden_act = "gelu_pytorch_tanh";
  v.projector_act = "gelu";
  v.projector_bias = true;
  v.feature_layers = {layers};  // vision_feature_layer -1 of the layers run
  v.anyres.tile = 384;
  v.anyres.side = v.patches_per_side();
  for (int h = 1; h <= 6; ++h)
    for (int w = 1; w <= 6; ++w) v.anyres.pinpoints.push_back({384 * h, 384 * w});
  v.anyres.max_area = 9;
  return v;
}

std::map<std::string, RawTensor> onevision_tensors(const VisionConfig& v, std::vector<std::vector<uint16_t>>& store) {
  std::map<std::string, RawTensor> out = vision_tensors(v, store);
  for (const char* gemma : {"multi_modal_projector.mm_soft_emb_norm.weight", "multi_modal_projector.mm_input_projection_weight",
                            "vision_tower.post_layernorm.weight", "vision_tower.post_layernorm.bias"})
    out.erase(gemma);
  TensorMaker add{store, {}};
  const int64_t h = v.hidden_size, t = kOnevisionTextHidden;
  add("multi_modal_projector.linear_1.weight", {t, h}, 0.0f, 1.0f / std::sqrt(static_cast<float>(h)));
  add("multi_modal_projector.linear_1.bias", {t}, 0.0f, 0.1f);
  add("multi_modal_projector.linear_2.weight", {t, t}, 0.0f, 1.0f / std::sqrt(static_cast<float>(t)));
  add("multi_modal_projector.linear_2.bias", {t}, 0.0f, 0.1f);
  add("image_newline", {t}, 0.0f, 1.0f);
  out.merge(add.out);
  return out;
}

void BM_LlavaOnevisionImages(benchmark::State& state) {
  const VisionConfig v = onevision_7b(static_cast<int>(state.range(0)));
  std::vector<std::vector<uint16_t>> store;
  ClipVision tower;
  const size_t tile = size_t{3} * 384 * 384;
  std::vector<StepImage> images;
  if (state.range(1) == 0) {
    const int tiles = 1 + anyres_layout(v.anyres, 1536, 2048).tiles();
    images.push_back({0, random_pixels(tile * static_cast<size_t>(tiles)), 1536, 2048});
  } else {
    for (int k = 0; k < 3; ++k) images.push_back({0, random_pixels(tile), 0, 0});
  }
  int tokens = 0;
  for (const StepImage& im : images) tokens += v.image_features(im.grid_h, im.grid_w);
  state.SetLabel(state.range(1) == 0 ? "one 1536x2048 image, 25 tiles, " + std::to_string(tokens) + " tokens"
                                     : "three images of one prompt, base only, " + std::to_string(tokens) + " tokens");
  run_tower(state, v, onevision_tensors(v, store), tower, kOnevisionTextHidden, images, tokens,
            [&images](const ClipVision& t) {
              double f = 0.0;
              for (const StepImage& im : images) f += t.flops(im);
              return f;
            },
            "per_call_s_26", 26.0 / v.n_layers);
}
BENCHMARK(BM_LlavaOnevisionImages)->Args({1, 0})->Args({1, 1})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

constexpr int kSmolVlmTextHidden = 576;  // SmolLM2-135M

VisionConfig smolvlm_256m(int layers) {
  VisionConfig v;
  v.kind = VisionKind::idefics3;
  v.hidden_size = 768;
  v.intermediate_size = 3072;
  v.n_layers = layers;
  v.n_heads = 12;
  v.image_size = 512;
  v.patch_size = 16;
  v.temporal_patch = 1;
  v.merge = 4;
  v.hidden_act = "gelu_pytorch_tanh";
  v.final_norm = true;
  v.image_token = 0;
  return v;
}

// vision_tensors' tower under Idefics3's names (vision_model.*), its connector in place of Gemma 3's projector.
std::map<std::string, RawTensor> smolvlm_tensors(const VisionConfig& v, std::vector<std::vector<uint16_t>>& store) {
  std::map<std::string, RawTensor> out;
  for (auto& [name, t] : vision_tensors(v, store)) {
    if (!name.starts_with("vision_tower.")) continue;
    t.name = "vision_model." + name.substr(std::string("vision_tower.").size());
    out.emplace(t.name, std::move(t));
  }
  TensorMaker add{store, {}};
  const int64_t merged = int64_t{v.merge} * v.merge * v.hidden_size;
  add("connector.modality_projection.proj.weight", {kSmolVlmTextHidden, merged}, 0.0f,
      1.0f / std::sqrt(static_cast<float>(merged)));
  out.merge(add.out);
  return out;
}

void BM_SmolVLMImage(benchmark::State& state) {
  const VisionConfig v = smolvlm_256m(static_cast<int>(state.range(0)));
  std::vector<std::vector<uint16_t>> store;
  TileVision tower;
  const int tiles = 4 * 4 + 1;
  std::vector<StepImage> images;
  for (int k = 0; k < tiles; ++k)
    images.push_back({0, random_pixels(size_t{3} * 512 * 512), v.patches_per_side(), v.patches_per_side()});
  const int tokens = tiles * v.image_tokens(v.patches_per_side(), v.patches_per_side());
  state.SetLabel("one 2048x2048 image, 17 tiles, " + std::to_string(tokens) + " tokens");
  run_tower(state, v, smolvlm_tensors(v, store), tower, kSmolVlmTextHidden, images, tokens,
            [tiles](const TileVision& t) { return tiles * t.flops_per_tile(); }, "per_image_s_12", 12.0 / v.n_layers);
}
BENCHMARK(BM_SmolVLMImage)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);

}  // namespace
}  // namespace brigade

BENCHMARK_MAIN();
