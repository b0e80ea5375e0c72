#include "models/qwen_vision.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

#include "models/step_inputs.h"

namespace brigade {

// What one pass encodes, planned on the host: its rows in the order the blocks see them (window
// by window for Qwen2.5-VL, else the processor's), their rotary positions, the attention
// sequences and where each merged token goes.
struct QwenVisionPass {
  int64_t first_token = 0;  // the pass's first row of encode()'s out
  int64_t n_rows = 0;
  int64_t n_tokens = 0;
  std::vector<float> pixels;           // [n_rows, patch_width]
  std::vector<int32_t> positions;      // [2 n_rows]: each row's patch row (h), then its column (w)
  std::vector<int32_t> image_lens;     // rows of each image: the full-attention sequences
  std::vector<int32_t> window_lens;    // rows of each window (Qwen2.5-VL): the windowed sequences
  std::vector<int32_t> unpermute;      // [n_tokens]: the merged row of the pass behind output token t
  std::vector<float> pos_embed;        // Qwen3-VL: [n_rows, hidden] each row's resampled position embedding
};

namespace {

// Patch rows per pass: as many images as fit (one image may exceed it alone, up to kMaxPatches),
// at most kImagesPerPass of them (bounding the attention's block table, images x pages).
constexpr int64_t kRowsPerPass = 4096;
constexpr size_t kImagesPerPass = 64;

int64_t patches_of(const StepImage& im) { return int64_t{im.grid_h} * im.grid_w; }

// One axis of Qwen3-VL's bilinear resampling (align_corners) of a side-long axis of the position
// table to n patches, in f32 as get_vision_interpolation_indices_and_weights: patch i's two taps
// (floor(src) and the next, clamped to the table) and their weights.
struct AxisTaps {
  int tap[2];
  float weight[2];
};

std::vector<AxisTaps> axis_taps(int n, int side) {
  std::vector<AxisTaps> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const float src = static_cast<float>(i) * static_cast<float>(side - 1) / static_cast<float>(std::max(n - 1, 1));
    const float floor = std::floor(src);
    for (int o = 0; o < 2; ++o) {
      out[static_cast<size_t>(i)].tap[o] = std::clamp(static_cast<int>(floor) + o, 0, side - 1);
      out[static_cast<size_t>(i)].weight[o] = std::max(1.0f - std::fabs(src - floor - static_cast<float>(o)), 0.0f);
    }
  }
  return out;
}

// Appends to p.pos_embed the resampled position embeddings of the image's rows [row0, p.n_rows),
// whose patch rows are p.positions[r] and columns wpos[r]: the four taps' table rows times their
// weights (row tap 0 with column taps 0, 1, then row tap 1 with both), summed in that order in
// f32 as transformers sums them.
void resample_positions(const VisionConfig& v, std::span<const float> table, const StepImage& im, int64_t row0,
                        const std::vector<int32_t>& wpos, QwenVisionPass& p) {
  const int64_t h = v.hidden_size;
  const int side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(v.num_position_embeddings))));
  const std::vector<AxisTaps> ys = axis_taps(im.grid_h, side), xs = axis_taps(im.grid_w, side);
  p.pos_embed.resize(static_cast<size_t>(p.n_rows * h), 0.0f);
  for (int64_t r = row0; r < p.n_rows; ++r) {
    const AxisTaps& y = ys[static_cast<size_t>(p.positions[static_cast<size_t>(r)])];
    const AxisTaps& x = xs[static_cast<size_t>(wpos[static_cast<size_t>(r)])];
    float* dst = p.pos_embed.data() + r * h;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        const float weight = y.weight[a] * x.weight[b];
        const float* src = table.data() + (int64_t{y.tap[a]} * side + x.tap[b]) * h;
        for (int64_t c = 0; c < h; ++c) dst[c] += src[c] * weight;
      }
  }
}

// Appends image im to plan p: its rows in window order (Qwen2.5-VL) or as the processor wrote
// them, their row positions (p.positions) and column positions (wpos), its sequences and tokens,
// and (Qwen3-VL, a non-empty table) its position embeddings.
void plan_image(const VisionConfig& v, std::span<const float> table, const StepImage& im, QwenVisionPass& p,
                std::vector<int32_t>& wpos) {
  const int m = v.merge, unit = m * m, hm = im.grid_h / m, wm = im.grid_w / m;
  const int64_t pw = v.patch_width();
  std::vector<int32_t> order, lens;
  if (v.kind == VisionKind::qwen2_5_vl) {
    qwen_window_order(hm, wm, v.window_size / m / v.patch_size, order, lens);
  } else {
    order.resize(static_cast<size_t>(hm) * wm);
    std::iota(order.begin(), order.end(), 0);
  }
  p.image_lens.push_back(hm * wm * unit);
  for (int32_t len : lens) p.window_lens.push_back(len * unit);
  const int64_t token0 = p.n_tokens, row0 = p.n_rows;
  p.unpermute.resize(static_cast<size_t>(token0 + int64_t{hm} * wm));
  for (size_t k = 0; k < order.size(); ++k) {
    const int32_t t = order[k];  // the image's merged token, row-major
    p.unpermute[static_cast<size_t>(token0 + t)] = static_cast<int32_t>(token0 + static_cast<int64_t>(k));
    for (int j = 0; j < unit; ++j) {  // its merge block's patches, row-major
      const float* src = im.pixels->data() + (int64_t{t} * unit + j) * pw;
      std::copy(src, src + pw, p.pixels.begin() + (p.n_rows++) * pw);
      p.positions.push_back((t / wm) * m + j / m);
      wpos.push_back((t % wm) * m + j % m);
    }
  }
  p.n_tokens += int64_t{hm} * wm;
  if (table.empty()) return;
  if (v.kind != VisionKind::glm4v) return resample_positions(v, table, im, row0, wpos, p);
  const int64_t h = v.hidden_size;
  const int side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(v.num_position_embeddings))));
  p.pos_embed.resize(static_cast<size_t>(p.n_rows * h), 0.0f);
  for (int64_t r = row0; r < p.n_rows; ++r)
    glm4v_position_embedding(table, side, h, im.grid_h, im.grid_w, p.positions[static_cast<size_t>(r)],
                             wpos[static_cast<size_t>(r)], p.pos_embed.data() + r * h);
}

// The plan of images, whose first token is encode()'s out row first_token; table: Qwen3-VL's
// position embeddings (GLM's), else empty.
QwenVisionPass plan_pass(const VisionConfig& v, std::span<const float> table, std::span<const StepImage> images,
                         int64_t first_token) {
  QwenVisionPass p;
  p.first_token = first_token;
  int64_t total = 0;
  for (const StepImage& im : images) total += patches_of(im);
  p.pixels.resize(static_cast<size_t>(total * v.patch_width()));
  std::vector<int32_t> wpos;
  for (const StepImage& im : images) plan_image(v, table, im, p, wpos);
  p.positions.insert(p.positions.end(), wpos.begin(), wpos.end());
  return p;
}

// VisionRotaryEmbedding: inv_freq[i] = 1 / theta^(2i / (d/2)) for i < d/4 (in f32, as torch),
// the first d/4 pairs rotated by the row, the next d/4 by the column. Qwen3-VL's
// Qwen3VLVisionRotaryEmbedding lays out its cos and sin the same way ([h, w, h, w] quarters).
// Pixtral's PixtralVisionRotaryEmbedding takes the d/2 frequencies 1 / theta^(2j/d), the even
// ones (j = 2i, the same as Qwen's) for the row, the odd ones (j = 2i + 1) for the column.
RopeConfig vision_rope(const VisionConfig& v) {
  const int d = v.head_dim(), quarter = d / 4;
  RopeConfig rope;
  rope.rotary_dim = d;
  rope.sections = {quarter, quarter};
  const bool pixtral = v.kind == VisionKind::pixtral;
  for (int axis = 0; axis < 2; ++axis)
    for (int i = 0; i < quarter; ++i) {
      const int j = 2 * i + (pixtral ? axis : 0);
      rope.inv_freq.push_back(1.0f / std::pow(v.rope_theta, static_cast<float>(2 * j) / static_cast<float>(d)));
    }
  return rope;
}

}  // namespace

void qwen_window_order(int hm, int wm, int side, std::vector<int32_t>& order, std::vector<int32_t>& lens) {
  BRIGADE_CHECK(hm > 0 && wm > 0 && side > 0, "window order of a non-empty image, windows of at least one token");
  order.clear();
  lens.clear();
  for (int wy = 0; wy < hm; wy += side)
    for (int wx = 0; wx < wm; wx += side) {
      const int h = std::min(side, hm - wy), w = std::min(side, wm - wx);
      for (int y = wy; y < wy + h; ++y)
        for (int x = wx; x < wx + w; ++x) order.push_back(y * wm + x);
      lens.push_back(h * w);
    }
}

void flatten_qwen_patch_embed(std::map<std::string, RawTensor>& tensors) {
  for (const char* name : {"visual.patch_embed.proj.weight", "model.visual.patch_embed.proj.weight",
                           "visual.downsample.weight", "model.visual.downsample.weight"}) {  // GLM's Conv2d too
    const auto it = tensors.find(name);
    if (it == tensors.end() || it->second.shape.size() < 2) continue;
    std::vector<int64_t>& shape = it->second.shape;
    const int64_t cols = std::accumulate(shape.begin() + 1, shape.end(), int64_t{1}, std::multiplies<>());
    shape = {shape[0], cols};
  }
}

Status QwenVision::load_block(WeightLoader& w, const std::string& prefix, int l, Layer& L) {
  const int64_t h = v_.hidden_size, inter = v_.intermediate_size;
  const std::string at = prefix + "blocks." + std::to_string(l) + ".";
  auto vec = [&](const std::string& name, int64_t n) { return w.vector_f32({at + name}, {n}); };
  L.full = !qwen2_5_ || std::find(v_.fullatt_blocks.begin(), v_.fullatt_blocks.end(), l) != v_.fullatt_blocks.end();
  const auto tap = std::find(v_.deepstack_layers.begin(), v_.deepstack_layers.end(), l);
  L.tap = tap == v_.deepstack_layers.end() ? -1 : static_cast<int>(tap - v_.deepstack_layers.begin());
  BRIGADE_ASSIGN_OR_RETURN(L.norm1_w, vec("norm1.weight", h));
  BRIGADE_ASSIGN_OR_RETURN(L.norm2_w, vec("norm2.weight", h));
  if (!qwen2_5_) {
    BRIGADE_ASSIGN_OR_RETURN(L.norm1_b, vec("norm1.bias", h));
    BRIGADE_ASSIGN_OR_RETURN(L.norm2_b, vec("norm2.bias", h));
  }
  BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.matrix(at + "attn.qkv.weight", 3 * h, h));  // q, k, v heads: the fused layout
  BRIGADE_ASSIGN_OR_RETURN(L.qkv_b, vec("attn.qkv.bias", 3 * h));
  BRIGADE_ASSIGN_OR_RETURN(L.proj, w.matrix(at + "attn.proj.weight", h, h));
  BRIGADE_ASSIGN_OR_RETURN(L.proj_b, vec("attn.proj.bias", h));
  if (qwen2_5_) {  // gate | up as one matmul for silu_mul
    const std::string gate = at + "mlp.gate_proj.", up = at + "mlp.up_proj.";
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_in, w.fused({gate + "weight", up + "weight"}, {inter, inter}, h));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_in_b, w.vector_f32({gate + "bias", up + "bias"}, {inter, inter}));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_out, w.matrix(at + "mlp.down_proj.weight", h, inter));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_out_b, vec("mlp.down_proj.bias", h));
  } else {
    const std::string fc1 = qwen3_ ? "mlp.linear_fc1." : "mlp.fc1.", fc2 = qwen3_ ? "mlp.linear_fc2." : "mlp.fc2.";
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_in, w.matrix(at + fc1 + "weight", inter, h));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_in_b, vec(fc1 + "bias", inter));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_out, w.matrix(at + fc2 + "weight", h, inter));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_out_b, vec(fc2 + "bias", h));
  }
  return Status::ok();
}

// prefix: the merger's, ending in '.'. Qwen2-VL's ln_q, mlp.0, mlp.2 (Qwen2.5-VL's ln_q an
// RMSNorm without bias); Qwen3-VL's norm, linear_fc1, linear_fc2.
Status QwenVision::load_merger(WeightLoader& w, const std::string& prefix, bool postshuffle, Merger& m) {
  const int64_t h = v_.hidden_size, wide = int64_t{v_.merge} * v_.merge * h, norm = postshuffle ? wide : h;
  const std::string ln = qwen3_ ? "norm." : "ln_q.", fc1 = qwen3_ ? "linear_fc1." : "mlp.0.",
                    fc2 = qwen3_ ? "linear_fc2." : "mlp.2.";
  m.postshuffle = postshuffle;
  BRIGADE_ASSIGN_OR_RETURN(m.norm_w, w.vector_f32({prefix + ln + "weight"}, {norm}));
  if (!qwen2_5_) {
    BRIGADE_ASSIGN_OR_RETURN(m.norm_b, w.vector_f32({prefix + ln + "bias"}, {norm}));
  }
  BRIGADE_ASSIGN_OR_RETURN(m.in, w.matrix(prefix + fc1 + "weight", wide, wide));
  BRIGADE_ASSIGN_OR_RETURN(m.in_b, w.vector_f32({prefix + fc1 + "bias"}, {wide}));
  BRIGADE_ASSIGN_OR_RETURN(m.out, w.matrix(prefix + fc2 + "weight", text_hidden_, wide));
  BRIGADE_ASSIGN_OR_RETURN(m.out_b, w.vector_f32({prefix + fc2 + "bias"}, {text_hidden_}));
  return Status::ok();
}

// Qwen3-VL's pos_embed (GLM's embeddings.position_embedding) [num_position_embeddings, hidden], staged through the backend as f32 (the
// loader's conversion of bf16 / f16) and kept on the host, where encode() resamples it.
Status QwenVision::load_position_table(WeightLoader& w, const std::string& name) {
  const int64_t n = v_.num_position_embeddings, h = v_.hidden_size;
  const auto side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(n))));
  if (n <= 0 || side * side != n)
    return invalid_argument("vision_config.num_position_embeddings " + std::to_string(n) + " is not a square");
  std::vector<int64_t> columns(static_cast<size_t>(h));
  std::iota(columns.begin(), columns.end(), int64_t{0});
  BRIGADE_ASSIGN_OR_RETURN(OwnedTensor table, w.gathered_f32({name}, n, h, Slice{}, columns));
  pos_table_.resize(static_cast<size_t>(n * h));
  backend_->download(pos_table_.data(), table.tensor);
  return Status::ok();
}

Status QwenVision::load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden) {
  if (!v.dynamic()) return invalid_argument("QwenVision loads a Qwen2-VL, Qwen2.5-VL, Qwen3-VL or Pixtral tower");
  if (backend.activation_dtype() != DType::f32 || !backend.supports_vision())
    return unsupported("the Qwen2-VL and Pixtral vision towers run on a backend with vision ops and f32 activations; " +
                       backend.name() + " does not");
  const char* act = v.kind == VisionKind::qwen2_5_vl || v.kind == VisionKind::pixtral || v.kind == VisionKind::glm4v ? "silu"
                    : v.kind == VisionKind::qwen3_vl ? "gelu_pytorch_tanh"
                                                     : "quick_gelu";
  if (v.hidden_act != act)
    return unsupported("config.json: vision_config.hidden_act '" + v.hidden_act + "'; supported: " + act);
  if (v.out_hidden_size != text_hidden)
    return invalid_argument("config.json: the vision merger's output width " + std::to_string(v.out_hidden_size) +
                            " differs from the language model's hidden_size " + std::to_string(text_hidden));
  backend_ = &backend;
  sc_ = Scratch{};
  v_ = v;
  text_hidden_ = text_hidden;
  qwen2_5_ = v.kind == VisionKind::qwen2_5_vl;
  qwen3_ = v.kind == VisionKind::qwen3_vl;
  pixtral_ = v.kind == VisionKind::pixtral;
  glm4v_ = v.kind == VisionKind::glm4v;
  gated_ = qwen2_5_ || pixtral_ || glm4v_;
  rope_ = vision_rope(v);
  if (pixtral_) return load_pixtral(w);
  const int64_t h = v.hidden_size;
  const std::string prefix = w.has("visual.patch_embed.proj.weight") || !w.has("model.visual.patch_embed.proj.weight")
                                 ? "visual." : "model.visual.";
  if (glm4v_) return load_glm4v(w, prefix);
  w.quantize_linear(false);
  const int64_t bytes_before = w.n_bytes();
  BRIGADE_ASSIGN_OR_RETURN(patch_w_, w.matrix(prefix + "patch_embed.proj.weight", h, v.patch_width()));
  patch_b_ = OwnedTensor{};
  pos_table_.clear();
  if (qwen3_) {
    BRIGADE_ASSIGN_OR_RETURN(patch_b_, w.vector_f32({prefix + "patch_embed.proj.bias"}, {h}));
    BRIGADE_RETURN_IF_ERROR(load_position_table(w, prefix + "pos_embed.weight"));
  }
  layers_.clear();
  layers_.resize(static_cast<size_t>(v.n_layers));
  for (int l = 0; l < v.n_layers; ++l)
    BRIGADE_RETURN_IF_ERROR(load_block(w, prefix, l, layers_[static_cast<size_t>(l)]));
  BRIGADE_RETURN_IF_ERROR(load_merger(w, prefix + "merger.", false, merger_));
  deepstack_.clear();
  deepstack_.resize(v.deepstack_layers.size());
  for (size_t k = 0; k < deepstack_.size(); ++k) {
    const std::string at = prefix + "deepstack_merger_list." + std::to_string(k) + ".";
    BRIGADE_RETURN_IF_ERROR(load_merger(w, at, true, deepstack_[k]));
  }
  w.quantize_linear(true);
  weight_bytes_ = static_cast<double>(w.n_bytes() - bytes_before);
  return Status::ok();
}

double QwenVision::flops(int grid_h, int grid_w) const {
  if (grid_h < v_.merge || grid_w < v_.merge) return 0.0;  // no such image: encode() refuses it
  const double p = double{1} * grid_h * grid_w, h = v_.hidden_size, inter = v_.intermediate_size;
  const double unit = double{1} * v_.merge * v_.merge, wide = unit * h, tokens = p / unit;
  double window_pairs = p * p;
  if (qwen2_5_) {
    std::vector<int32_t> order, lens;
    qwen_window_order(grid_h / v_.merge, grid_w / v_.merge, v_.window_size / v_.merge / v_.patch_size, order, lens);
    window_pairs = 0.0;
    for (int32_t len : lens) window_pairs += (len * unit) * (len * unit);
  }
  double total = 2.0 * p * h * static_cast<double>(v_.patch_width());
  for (const Layer& L : layers_)
    total += 2.0 * p * (4.0 * h * h + (gated_ ? 3.0 : 2.0) * h * inter) + 4.0 * h * (L.full ? p * p : window_pairs);
  if (pixtral_)  // merging_layer, linear_1, linear_2
    return total + 2.0 * tokens * (wide * h + h * text_hidden_ + double{1} * text_hidden_ * text_hidden_);
  if (glm4v_)  // downsample, proj, gate | up, down
    return total + 2.0 * tokens * text_hidden_ * (wide + text_hidden_ + 3.0 * v_.merger_intermediate);
  const double n_mergers = 1.0 + static_cast<double>(deepstack_.size());
  return total + n_mergers * 2.0 * tokens * (wide * wide + wide * text_hidden_);
}

Status QwenVision::check_images(std::span<const StepImage> images) const {
  const int m = v_.merge;
  for (size_t i = 0; i < images.size(); ++i) {
    const StepImage& im = images[i];
    const std::string grid = "image " + std::to_string(i) + ": a grid of " + std::to_string(im.grid_h) + " x " +
                             std::to_string(im.grid_w) + " patches";
    if (im.grid_h <= 0 || im.grid_w <= 0 || im.grid_h % m != 0 || im.grid_w % m != 0)
      return invalid_argument(grid + "; grid_h and grid_w must be positive multiples of spatial_merge_size " +
                              std::to_string(m));
    if (patches_of(im) > kMaxPatches)
      return invalid_argument(grid + " is more than the " + std::to_string(kMaxPatches) +
                              " the vision tower takes; resize it smaller (max_pixels)");
    const size_t want = static_cast<size_t>(patches_of(im) * v_.patch_width());
    const size_t got = im.pixels == nullptr ? 0 : im.pixels->size();
    if (got != want)
      return invalid_argument(grid + " needs " + std::to_string(want) + " floats ([" + std::to_string(patches_of(im)) +
                              ", " + std::to_string(v_.patch_width()) + "]); got " + std::to_string(got));
  }
  return Status::ok();
}

Status QwenVision::upload_i32(OwnedTensor& t, const std::vector<int32_t>& host) {
  const auto n = static_cast<int64_t>(host.size());
  if (t.tensor.numel() < n) {
    BRIGADE_ASSIGN_OR_RETURN(t, alloc_tensor(*backend_, DType::i32, 1, n));
  }
  backend_->upload(Tensor(t.tensor.data, DType::i32, {n}), host.data());
  return Status::ok();
}

Status QwenVision::allocate_scratch(int64_t rows) {
  Backend& b = *backend_;
  const int64_t h = v_.hidden_size, inter = v_.intermediate_size, unit = int64_t{v_.merge} * v_.merge;
  const DType f32 = DType::f32;
  sc_ = Scratch{};
  for (auto [dst, cols] : {std::pair{&sc_.patches, v_.patch_width()}, {&sc_.x, h}, {&sc_.normed, h}, {&sc_.qkv, 3 * h},
                           {&sc_.attn, h}, {&sc_.mlp, gated_ ? 2 * inter : inter}, {&sc_.k, h}, {&sc_.v, h}}) {
    BRIGADE_ASSIGN_OR_RETURN(*dst, alloc_tensor(b, f32, rows, cols));
  }
  if (gated_) {
    BRIGADE_ASSIGN_OR_RETURN(sc_.mlp_act, alloc_tensor(b, f32, rows, inter));
  }
  if (pixtral_ || glm4v_) {
    BRIGADE_ASSIGN_OR_RETURN(sc_.proj, alloc_tensor(b, f32, rows / unit, text_hidden_));
  }
  if (glm4v_) {
    BRIGADE_ASSIGN_OR_RETURN(sc_.glm_mlp, alloc_tensor(b, f32, rows / unit, 2 * int64_t{v_.merger_intermediate}));
    BRIGADE_ASSIGN_OR_RETURN(sc_.glm_act, alloc_tensor(b, f32, rows / unit, v_.merger_intermediate));
  }
  if (qwen3_ || glm4v_) {
    BRIGADE_ASSIGN_OR_RETURN(sc_.pos_embed, alloc_tensor(b, f32, rows, h));
  }
  BRIGADE_ASSIGN_OR_RETURN(sc_.merged, alloc_tensor(b, f32, rows / unit, text_hidden_));
  BRIGADE_ASSIGN_OR_RETURN(sc_.positions, alloc_tensor(b, DType::i32, 1, 2 * rows));
  std::vector<int32_t> slots(static_cast<size_t>(rows));  // K/V row i is the pass's row i
  std::iota(slots.begin(), slots.end(), 0);
  BRIGADE_RETURN_IF_ERROR(upload_i32(sc_.slots, slots));
  sc_.rows = rows;
  return Status::ok();
}

// Sequences of lens[s] consecutive rows, each row seeing its whole sequence: pages of the largest
// size that divides every length, sequence s on the pages after those of the sequences before it.
Status QwenVision::upload_layout(const std::vector<int32_t>& lens, SeqLayout& d) {
  int page = 0, max_len = 0;
  for (int32_t len : lens) page = std::gcd(page, len), max_len = std::max(max_len, len);
  const int n = static_cast<int>(lens.size()), max_blocks = max_len / page;
  std::vector<int32_t> q_start{0}, table(static_cast<size_t>(n) * max_blocks, 0), until;
  for (int s = 0; s < n; ++s) {
    const int32_t len = lens[static_cast<size_t>(s)], first_page = q_start.back() / page;
    for (int i = 0; i < len / page; ++i) table[static_cast<size_t>(s) * max_blocks + i] = first_page + i;
    until.insert(until.end(), static_cast<size_t>(len), len - 1);
    q_start.push_back(q_start.back() + len);
  }
  BRIGADE_RETURN_IF_ERROR(upload_i32(d.q_start, q_start));
  BRIGADE_RETURN_IF_ERROR(upload_i32(d.ctx_len, lens));
  BRIGADE_RETURN_IF_ERROR(upload_i32(d.block_table, table));
  BRIGADE_RETURN_IF_ERROR(upload_i32(d.attend_until, until));
  d.page = page;
  d.meta = AttentionMeta{};
  d.meta.q_start = Tensor(d.q_start.tensor.data, DType::i32, {n + 1});
  d.meta.ctx_len = Tensor(d.ctx_len.tensor.data, DType::i32, {n});
  d.meta.block_table = Tensor(d.block_table.tensor.data, DType::i32, {n, max_blocks});
  d.meta.attend_until = Tensor(d.attend_until.tensor.data, DType::i32, {q_start.back()});
  d.meta.n_seqs = n;
  d.meta.max_q_len = d.meta.max_ctx_len = max_len;
  return Status::ok();
}

Status QwenVision::encode(std::span<const StepImage> images, const Tensor& out, std::span<const Tensor> deepstack) {
  if (static_cast<int>(deepstack.size()) != n_deepstack())
    return invalid_argument("vision encode: " + std::to_string(deepstack.size()) + " DeepStack outputs given; the " +
                            "tower has " + std::to_string(n_deepstack()) + " (deepstack_visual_indexes)");
  BRIGADE_RETURN_IF_ERROR(check_images(images));
  int64_t n_tokens = 0, total_rows = 0, largest = 0;
  for (const StepImage& im : images) {
    n_tokens += v_.image_features(im.grid_h, im.grid_w);
    total_rows += patches_of(im);
    largest = std::max(largest, patches_of(im));
  }
  BRIGADE_CHECK(out.ndim == 2 && out.dim(0) == n_tokens && out.dim(1) == text_hidden_,
                "vision encode: out [the images' tokens, text hidden]");
  for (const Tensor& d : deepstack)
    BRIGADE_CHECK(d.ndim == 2 && d.dim(0) == n_tokens && d.dim(1) == text_hidden_,
                  "vision encode: each DeepStack output [the images' tokens, text hidden]");
  const int64_t rows = std::max(largest, std::min(total_rows, kRowsPerPass));
  if (rows > sc_.rows) BRIGADE_RETURN_IF_ERROR(allocate_scratch(rows));
  int64_t first_token = 0;
  for (size_t first = 0; first < images.size();) {
    size_t end = first;
    int64_t pass_rows = 0;
    while (end < images.size() && end - first < kImagesPerPass && pass_rows + patches_of(images[end]) <= sc_.rows)
      pass_rows += patches_of(images[end++]);
    const QwenVisionPass pass = plan_pass(v_, pos_table_, images.subspan(first, end - first), first_token);
    BRIGADE_RETURN_IF_ERROR(encode_pass(pass, out, deepstack));
    first_token += pass.n_tokens;
    first = end;
  }
  return Status::ok();
}

Status QwenVision::encode_pass(const QwenVisionPass& p, const Tensor& out, std::span<const Tensor> deepstack) {
  Backend& b = *backend_;
  const int64_t n = p.n_rows;
  b.upload(sc_.patches.tensor.rows(0, n), p.pixels.data());
  BRIGADE_RETURN_IF_ERROR(upload_i32(sc_.positions, p.positions));
  BRIGADE_RETURN_IF_ERROR(upload_i32(sc_.unpermute, p.unpermute));
  BRIGADE_RETURN_IF_ERROR(upload_layout(p.image_lens, sc_.full));
  if (qwen2_5_) BRIGADE_RETURN_IF_ERROR(upload_layout(p.window_lens, sc_.window));
  const Tensor x = sc_.x.tensor.rows(0, n);
  if (pixtral_ || glm4v_) {  // ln_pre (GLM: post_conv_layernorm) over the patch embedding
    const Tensor embedded = sc_.normed.tensor.rows(0, n);
    b.matmul(sc_.patches.tensor.rows(0, n), patch_w_.tensor, patch_b_.tensor, embedded);
    b.rms_norm(embedded, ln_pre_.tensor, v_.eps, x);
  } else {
    b.matmul(sc_.patches.tensor.rows(0, n), patch_w_.tensor, patch_b_.tensor, x);
  }
  if (qwen3_ || glm4v_) {
    const Tensor pos = sc_.pos_embed.tensor.rows(0, n);
    b.upload(pos, p.pos_embed.data());
    b.add(x, pos);
  }
  for (const Layer& L : layers_) {
    run_block(L, n);
    if (L.tap >= 0) {
      const auto k = static_cast<size_t>(L.tap);
      run_merger(deepstack_[k], n, deepstack[k].rows(p.first_token, p.n_tokens));
    }
  }
  run_merger(merger_, n, out.rows(p.first_token, p.n_tokens));
  return Status::ok();
}

void QwenVision::run_block(const Layer& L, int64_t n) {
  Backend& b = *backend_;
  const int heads = v_.n_heads, hd = v_.head_dim();
  const float eps = v_.eps;
  const Tensor x = sc_.x.tensor.rows(0, n), normed = sc_.normed.tensor.rows(0, n), qkv = sc_.qkv.tensor.rows(0, n);
  const Tensor attn = sc_.attn.tensor.rows(0, n), mlp = sc_.mlp.tensor.rows(0, n);
  auto norm = [&](const OwnedTensor& w, const OwnedTensor& bias) {
    if (gated_) b.rms_norm(x, w.tensor, eps, normed);
    else b.layer_norm(x, w.tensor, bias.tensor, eps, normed);
  };
  const SeqLayout& seqs = L.full ? sc_.full : sc_.window;
  KvLayer kv;  // the pass's rows in order (slot i = row i), seen as pages of seqs.page rows
  kv.k = Tensor(sc_.k.tensor.data, DType::f32, {n / seqs.page, seqs.page, heads, hd});
  kv.v = Tensor(sc_.v.tensor.data, DType::f32, {n / seqs.page, seqs.page, heads, hd});
  const QkvLayout layout{heads, heads, hd};
  norm(L.norm1_w, L.norm1_b);
  b.matmul(normed, L.qkv.tensor, L.qkv_b.tensor, qkv);
  b.rope(qkv, layout, Tensor(sc_.positions.tensor.data, DType::i32, {2 * n}), rope_);
  b.write_kv(kv, qkv, layout, Tensor(sc_.slots.tensor.data, DType::i32, {n}));
  b.attention(qkv, layout, kv, seqs.meta, 1.0f / std::sqrt(static_cast<float>(hd)), attn);
  b.matmul(attn, L.proj.tensor, L.proj_b.tensor, normed);
  b.add(x, normed);
  norm(L.norm2_w, L.norm2_b);
  b.matmul(normed, L.mlp_in.tensor, L.mlp_in_b.tensor, mlp);
  if (gated_) {
    const Tensor act = sc_.mlp_act.tensor.rows(0, n);
    b.silu_mul(mlp, act);
    b.matmul(act, L.mlp_out.tensor, L.mlp_out_b.tensor, normed);
  } else {
    if (qwen3_) b.gelu_tanh(mlp);
    else b.quick_gelu(mlp);
    b.matmul(mlp, L.mlp_out.tensor, L.mlp_out_b.tensor, normed);
  }
  b.add(x, normed);
}

// The merged rows, in pass order, gathered into the images' token order. Grouping a merge block's
// merge^2 consecutive rows into one is a view; sc_.attn (n x hidden floats) holds the wide rows.
void QwenVision::run_merger(const Merger& m, int64_t n, const Tensor& out) {
  if (glm4v_) return run_glm4v_merger(n, out);
  Backend& b = *backend_;
  const int64_t unit = int64_t{v_.merge} * v_.merge, tokens = n / unit, wide = unit * v_.hidden_size;
  const Tensor grouped(sc_.normed.tensor.data, DType::f32, {tokens, wide});
  const Tensor merged = sc_.merged.tensor.rows(0, tokens);
  if (pixtral_) {  // RMSNorm, merging_layer, linear_1, GELU, linear_2
    b.rms_norm(sc_.x.tensor.rows(0, n), m.norm_w.tensor, v_.projector_eps, sc_.normed.tensor.rows(0, n));
    const Tensor patches(sc_.attn.tensor.data, DType::f32, {tokens, v_.hidden_size});
    b.matmul(grouped, m.merge.tensor, Tensor(), patches);
    const Tensor hidden = sc_.proj.tensor.rows(0, tokens);
    b.matmul(patches, m.in.tensor, m.in_b.tensor, hidden);
    b.gelu(hidden);
    b.matmul(hidden, m.out.tensor, m.out_b.tensor, merged);
    b.gather_rows(merged, Tensor(sc_.unpermute.tensor.data, DType::i32, {tokens}), out);
    return;
  }
  if (m.postshuffle) {
    b.layer_norm(Tensor(sc_.x.tensor.data, DType::f32, {tokens, wide}), m.norm_w.tensor, m.norm_b.tensor, v_.eps,
                 grouped);
  } else {
    const Tensor x = sc_.x.tensor.rows(0, n), normed = sc_.normed.tensor.rows(0, n);
    if (qwen2_5_) b.rms_norm(x, m.norm_w.tensor, v_.eps, normed);
    else b.layer_norm(x, m.norm_w.tensor, m.norm_b.tensor, v_.eps, normed);
  }
  const Tensor hidden(sc_.attn.tensor.data, DType::f32, {tokens, wide});
  b.matmul(grouped, m.in.tensor, m.in_b.tensor, hidden);
  b.gelu(hidden);
  b.matmul(hidden, m.out.tensor, m.out_b.tensor, merged);
  b.gather_rows(merged, Tensor(sc_.unpermute.tensor.data, DType::i32, {tokens}), out);
}

}  // namespace brigade
