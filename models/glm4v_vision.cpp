// QwenVision's GLM-4.1V / 4.5V parts (VisionKind::glm4v, models/qwen_vision.h): the loader of
// Glm4vVisionModel's tensors (under the names qwen_vl_tensors gives them), its bicubic position
// embeddings and its downsample + merger; the blocks are qwen_vision.cpp's (gated, RMSNorm).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/qwen_vision.h"

namespace brigade {

namespace {

// torch's get_cubic_upsample_coefficients (A = -0.75) for the offset t in [0, 1) of the sample
// from its tap 1: the weights of taps 0..3.
void cubic_coefficients(float t, float w[4]) {
  constexpr float A = -0.75f;
  const auto conv1 = [](float x) { return ((A + 2.0f) * x - (A + 3.0f)) * x * x + 1.0f; };
  const auto conv2 = [](float x) { return ((A * x - 5.0f * A) * x + 8.0f * A) * x - 4.0f * A; };
  w[0] = conv2(t + 1.0f);
  w[1] = conv1(t);
  w[2] = conv1(1.0f - t);
  w[3] = conv2(2.0f - t);
}

// grid_sample's source coordinate (align_corners false) of the patch centre i of n along an axis of
// size side: the grid holds ((i + 0.5) / n) * 2 - 1, unnormalized as torch's CPU kernel does it,
// (g + 1) * (side / 2) - 0.5, all f32.
float source_coordinate(int i, int n, int side) {
  const float g = ((static_cast<float>(i) + 0.5f) / static_cast<float>(n)) * 2.0f - 1.0f;
  return (g + 1.0f) * (static_cast<float>(side) / 2.0f) - 0.5f;
}

}  // namespace

void glm4v_position_embedding(std::span<const float> table, int side, int64_t hidden, int grid_h, int grid_w,
                              int row, int col, float* dst) {
  const float ix = source_coordinate(col, grid_w, side), iy = source_coordinate(row, grid_h, side);
  const float fx = std::floor(ix), fy = std::floor(iy);
  float wx[4], wy[4];
  cubic_coefficients(ix - fx, wx);
  cubic_coefficients(iy - fy, wy);
  int xs[4], ys[4];  // border padding: taps clamped to the table
  for (int k = 0; k < 4; ++k) {
    xs[k] = std::clamp(static_cast<int>(fx) - 1 + k, 0, side - 1);
    ys[k] = std::clamp(static_cast<int>(fy) - 1 + k, 0, side - 1);
  }
  for (int64_t c = 0; c < hidden; ++c) {
    float rows[4];
    for (int r = 0; r < 4; ++r) {
      const float* at = table.data() + int64_t{ys[r]} * side * hidden + c;
      rows[r] = at[xs[0] * hidden] * wx[0] + at[xs[1] * hidden] * wx[1] + at[xs[2] * hidden] * wx[2] +
                at[xs[3] * hidden] * wx[3];
    }
    dst[c] = rows[0] * wy[0] + rows[1] * wy[1] + rows[2] * wy[2] + rows[3] * wy[3];
  }
}

// Glm4vVisionModel: patch_embed.proj (weight as the flattened matrix, bias), post_conv_layernorm,
// embeddings.position_embedding, blocks.* (norm1, norm2, attn.qkv [+ bias], attn.proj, mlp.gate_proj
// / up_proj / down_proj), then the merger's tensors.
Status QwenVision::load_glm4v(WeightLoader& w, const std::string& prefix) {
  const int64_t h = v_.hidden_size, inter = v_.intermediate_size;
  w.quantize_linear(false);
  const int64_t bytes_before = w.n_bytes();
  pos_table_.clear();
  BRIGADE_ASSIGN_OR_RETURN(patch_w_, w.matrix(prefix + "patch_embed.proj.weight", h, v_.patch_width()));
  BRIGADE_ASSIGN_OR_RETURN(patch_b_, w.vector_f32({prefix + "patch_embed.proj.bias"}, {h}));
  BRIGADE_ASSIGN_OR_RETURN(ln_pre_, w.vector_f32({prefix + "post_conv_layernorm.weight"}, {h}));
  BRIGADE_RETURN_IF_ERROR(load_position_table(w, prefix + "embeddings.position_embedding.weight"));
  layers_.clear();
  layers_.resize(static_cast<size_t>(v_.n_layers));
  for (int l = 0; l < v_.n_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const std::string at = prefix + "blocks." + std::to_string(l) + ".";
    BRIGADE_ASSIGN_OR_RETURN(L.norm1_w, w.vector_f32({at + "norm1.weight"}, {h}));
    BRIGADE_ASSIGN_OR_RETURN(L.norm2_w, w.vector_f32({at + "norm2.weight"}, {h}));
    BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.matrix(at + "attn.qkv.weight", 3 * h, h));
    if (v_.qkv_bias) {
      BRIGADE_ASSIGN_OR_RETURN(L.qkv_b, w.vector_f32({at + "attn.qkv.bias"}, {3 * h}));
    }
    BRIGADE_ASSIGN_OR_RETURN(L.proj, w.matrix(at + "attn.proj.weight", h, h));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_in, w.fused({at + "mlp.gate_proj.weight", at + "mlp.up_proj.weight"},
                                               {inter, inter}, h));
    BRIGADE_ASSIGN_OR_RETURN(L.mlp_out, w.matrix(at + "mlp.down_proj.weight", h, inter));
  }
  BRIGADE_RETURN_IF_ERROR(load_glm4v_merger(w, prefix));
  deepstack_.clear();
  w.quantize_linear(true);
  weight_bytes_ = static_cast<double>(w.n_bytes() - bytes_before);
  return Status::ok();
}

// post_layernorm; downsample (Conv2d [text, hidden, merge, merge] flattened to [text, hidden merge^2]:
// column c * unit + k is channel c of the block's patch k, read patch-major as the rows hold
// the block's patches one after another); merger.proj, post_projection_norm, gate_proj | up_proj,
// down_proj.
Status QwenVision::load_glm4v_merger(WeightLoader& w, const std::string& prefix) {
  const int64_t h = v_.hidden_size, unit = int64_t{v_.merge} * v_.merge, t = text_hidden_, ctx = v_.merger_intermediate;
  std::vector<int64_t> patch_major(static_cast<size_t>(unit * h));
  for (int64_t j = 0; j < unit * h; ++j) patch_major[static_cast<size_t>(j)] = (j % h) * unit + j / h;
  merger_ = Merger{};
  Merger& m = merger_;
  const std::string mg = prefix + "merger.";
  BRIGADE_ASSIGN_OR_RETURN(m.norm_w, w.vector_f32({prefix + "post_layernorm.weight"}, {h}));
  BRIGADE_ASSIGN_OR_RETURN(m.merge, w.matrix_columns(prefix + "downsample.weight", t, unit * h, patch_major));
  BRIGADE_ASSIGN_OR_RETURN(m.merge_b, w.vector_f32({prefix + "downsample.bias"}, {t}));
  BRIGADE_ASSIGN_OR_RETURN(m.in, w.matrix(mg + "proj.weight", t, t));
  BRIGADE_ASSIGN_OR_RETURN(m.proj_norm_w, w.vector_f32({mg + "post_projection_norm.weight"}, {t}));
  BRIGADE_ASSIGN_OR_RETURN(m.proj_norm_b, w.vector_f32({mg + "post_projection_norm.bias"}, {t}));
  BRIGADE_ASSIGN_OR_RETURN(m.gate_up, w.fused({mg + "gate_proj.weight", mg + "up_proj.weight"}, {ctx, ctx}, t));
  BRIGADE_ASSIGN_OR_RETURN(m.out, w.matrix(mg + "down_proj.weight", t, ctx));
  return Status::ok();
}

// The pass's n rows of sc_.x through post_layernorm, the downsample over each merge block, the
// merger, into out in the images' token order.
void QwenVision::run_glm4v_merger(int64_t n, const Tensor& out) {
  Backend& b = *backend_;
  const Merger& m = merger_;
  const int64_t unit = int64_t{v_.merge} * v_.merge, tokens = n / unit, wide = unit * v_.hidden_size;
  b.rms_norm(sc_.x.tensor.rows(0, n), m.norm_w.tensor, v_.eps, sc_.normed.tensor.rows(0, n));
  const Tensor grouped(sc_.normed.tensor.data, DType::f32, {tokens, wide});
  const Tensor down = sc_.proj.tensor.rows(0, tokens), merged = sc_.merged.tensor.rows(0, tokens);
  b.matmul(grouped, m.merge.tensor, m.merge_b.tensor, down);
  b.matmul(down, m.in.tensor, Tensor(), merged);
  b.layer_norm(merged, m.proj_norm_w.tensor, m.proj_norm_b.tensor, v_.projector_eps, down);
  b.gelu(down);
  const Tensor gate_up = sc_.glm_mlp.tensor.rows(0, tokens), act = sc_.glm_act.tensor.rows(0, tokens);
  b.matmul(down, m.gate_up.tensor, Tensor(), gate_up);
  b.silu_mul(gate_up, act);
  b.matmul(act, m.out.tensor, Tensor(), merged);
  b.gather_rows(merged, Tensor(sc_.unpermute.tensor.data, DType::i32, {tokens}), out);
}

}  // namespace brigade
