#include "models/internvl_vision.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "models/step_inputs.h"

namespace brigade {
namespace {

std::string tower(const std::string& suffix) { return "vision_tower." + suffix; }

}  // namespace

Status InternVision::load_layer(WeightLoader& w, int l) {
  const int64_t h = v_.hidden_size, inter = v_.intermediate_size;
  const std::string pre = tower("encoder.layer." + std::to_string(l) + ".");
  VitLayer& L = layers_[static_cast<size_t>(l)];
  auto vec = [&](const std::string& name, int64_t n) { return w.vector_f32({pre + name}, {n}); };
  L.rms_norm = v_.rms_norm;
  BRIGADE_ASSIGN_OR_RETURN(L.ln1_w, vec("layernorm_before.weight", h));
  BRIGADE_ASSIGN_OR_RETURN(L.ln2_w, vec("layernorm_after.weight", h));
  if (!v_.rms_norm) {
    BRIGADE_ASSIGN_OR_RETURN(L.ln1_b, vec("layernorm_before.bias", h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln2_b, vec("layernorm_after.bias", h));
  }
  const std::string a = pre + "attention.";
  if (w.has(a + "qkv.weight")) {  // the remote layout's fused q|k|v
    BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.matrix(a + "qkv.weight", 3 * h, h));
    if (v_.qkv_bias) {
      BRIGADE_ASSIGN_OR_RETURN(L.qkv_b, w.vector_f32({a + "qkv.bias"}, {3 * h}));
    }
  } else {
    BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.fused({a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}, {h, h, h}, h));
    if (v_.qkv_bias) {
      BRIGADE_ASSIGN_OR_RETURN(L.qkv_b, w.vector_f32({a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"}, {h, h, h}));
    }
  }
  if (v_.qk_norm) {
    BRIGADE_ASSIGN_OR_RETURN(L.q_norm, w.vector_f32({a + "q_norm.weight"}, {h}));
    BRIGADE_ASSIGN_OR_RETURN(L.k_norm, w.vector_f32({a + "k_norm.weight"}, {h}));
  }
  BRIGADE_ASSIGN_OR_RETURN(L.o, w.rows_scaled(a + "projection_layer.weight", h, h, pre + "lambda_1"));
  BRIGADE_ASSIGN_OR_RETURN(L.o_b, w.rows_scaled(a + "projection_layer.bias", h, 0, pre + "lambda_1"));
  BRIGADE_ASSIGN_OR_RETURN(L.fc1, w.matrix(pre + "mlp.fc1.weight", inter, h));
  BRIGADE_ASSIGN_OR_RETURN(L.fc1_b, vec("mlp.fc1.bias", inter));
  BRIGADE_ASSIGN_OR_RETURN(L.fc2, w.rows_scaled(pre + "mlp.fc2.weight", h, inter, pre + "lambda_2"));
  BRIGADE_ASSIGN_OR_RETURN(L.fc2_b, w.rows_scaled(pre + "mlp.fc2.bias", h, 0, pre + "lambda_2"));
  return Status::ok();
}

Status InternVision::load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden) {
  if (backend.activation_dtype() != DType::f32)
    return unsupported("the InternVL vision tower runs on f32 activations; this backend's are " +
                       std::string(dtype_name(backend.activation_dtype())));
  BRIGADE_CHECK(v.kind == VisionKind::internvl && v.feature_layers.size() == 1 && v.merge > 0,
                "InternVision loads an InternVL tower read at one feature layer");
  backend_ = &backend;
  v_ = v;
  text_hidden_ = text_hidden;
  BRIGADE_ASSIGN_OR_RETURN(act_, vit_act(v.hidden_act));
  BRIGADE_ASSIGN_OR_RETURN(projector_act_, vit_act(v.projector_act));
  const int64_t h = v.hidden_size, t = text_hidden, merged = int64_t{v.merge} * v.merge * h;
  w.quantize_linear(false);
  auto vec = [&](const std::string& name, int64_t n) { return w.vector_f32({name}, {n}); };
  BRIGADE_ASSIGN_OR_RETURN(patch_w_, w.matrix(tower("embeddings.patch_embeddings.projection.weight"), h, v.patch_width()));
  BRIGADE_ASSIGN_OR_RETURN(patch_b_, vec(tower("embeddings.patch_embeddings.projection.bias"), h));
  BRIGADE_ASSIGN_OR_RETURN(cls_, vec(tower("embeddings.cls_token"), h));
  std::vector<int64_t> all_cols(static_cast<size_t>(h));
  std::iota(all_cols.begin(), all_cols.end(), 0);
  BRIGADE_ASSIGN_OR_RETURN(pos_, w.gathered_f32({tower("embeddings.position_embeddings")}, n_positions(), h, {}, all_cols));
  layers_.resize(static_cast<size_t>(v.feature_layers.front()));
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l) BRIGADE_RETURN_IF_ERROR(load_layer(w, l));
  for (VitLayer& L : layers_) L.qk_eps = v.qk_eps;
  if (v.final_norm) {
    BRIGADE_ASSIGN_OR_RETURN(final_w_, vec(tower("layernorm.weight"), h));
    BRIGADE_ASSIGN_OR_RETURN(final_b_, vec(tower("layernorm.bias"), h));
  }
  BRIGADE_ASSIGN_OR_RETURN(norm_w_, vec("multi_modal_projector.layer_norm.weight", merged));
  BRIGADE_ASSIGN_OR_RETURN(norm_b_, vec("multi_modal_projector.layer_norm.bias", merged));
  BRIGADE_ASSIGN_OR_RETURN(linear_1_, w.matrix("multi_modal_projector.linear_1.weight", t, merged));
  BRIGADE_ASSIGN_OR_RETURN(linear_1_b_, vec("multi_modal_projector.linear_1.bias", t));
  BRIGADE_ASSIGN_OR_RETURN(linear_2_, w.matrix("multi_modal_projector.linear_2.weight", t, t));
  BRIGADE_ASSIGN_OR_RETURN(linear_2_b_, vec("multi_modal_projector.linear_2.bias", t));
  w.quantize_linear(true);
  return Status::ok();
}

double InternVision::flops_per_tile() const {
  const double p = n_positions(), h = v_.hidden_size, inter = v_.intermediate_size, t = text_hidden_;
  const double f = tile_tokens(), m2 = static_cast<double>(v_.merge) * v_.merge;
  const double per_layer = 2.0 * p * (4.0 * h * h + 2.0 * h * inter) + 4.0 * h * p * p;
  return 2.0 * v_.n_patches() * h * static_cast<double>(v_.patch_width()) +
         static_cast<double>(layers_.size()) * per_layer + 2.0 * f * (m2 * h * t + t * t);
}

Status InternVision::allocate_scratch() {
  Backend& b = *backend_;
  const int64_t p = n_positions(), h = v_.hidden_size, f = tile_tokens(), patches = v_.n_patches();
  BRIGADE_RETURN_IF_ERROR(sc_.vit.allocate(b, v_, p));
  const int64_t g = sc_.vit.max_images;
  const DType f32 = DType::f32;
  BRIGADE_ASSIGN_OR_RETURN(sc_.shuffled, alloc_tensor(b, f32, g * patches, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.proj, alloc_tensor(b, f32, g * f, text_hidden_));
  BRIGADE_ASSIGN_OR_RETURN(sc_.cls_rows, alloc_tensor(b, f32, g, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.cls_ids, alloc_tensor(b, DType::i32, 1, g));
  BRIGADE_ASSIGN_OR_RETURN(sc_.shuffle_ids, alloc_tensor(b, DType::i32, 1, g * patches));
  // Constant per pass: tile i's class row i * p, and the pixel shuffle's patch rows (tile i's
  // token (r, c) is patches (m r + j, m c + k), k fastest, after the class row).
  const int side = v_.patches_per_side(), m = v_.merge;
  std::vector<int32_t> cls(static_cast<size_t>(g)), shuffle, zeros(static_cast<size_t>(g), 0);
  shuffle.reserve(static_cast<size_t>(g * patches));
  for (int64_t i = 0; i < g; ++i) {
    cls[static_cast<size_t>(i)] = static_cast<int32_t>(i * p);
    for (int r = 0; r < side / m; ++r)
      for (int c = 0; c < side / m; ++c)
        for (int j = 0; j < m; ++j)
          for (int k = 0; k < m; ++k)
            shuffle.push_back(static_cast<int32_t>(i * p + 1 + int64_t{m * r + j} * side + m * c + k));
  }
  b.upload(Tensor(sc_.cls_ids.tensor.data, DType::i32, {g}), cls.data());
  b.upload(Tensor(sc_.shuffle_ids.tensor.data, DType::i32, {g * patches}), shuffle.data());
  // The class token repeated g times (row 0 of cls_ gathered), scattered over each pass's class rows.
  b.upload(Tensor(sc_.proj.tensor.data, DType::i32, {g}), zeros.data());  // proj is free until the projector
  b.gather_rows(Tensor(cls_.tensor.data, f32, {1, h}), Tensor(sc_.proj.tensor.data, DType::i32, {g}), sc_.cls_rows.tensor);
  return Status::ok();
}

Status InternVision::encode(std::span<const StepImage> images, const Tensor& out) {
  const int side = v_.patches_per_side();
  const size_t tile_floats = size_t{3} * v_.image_size * v_.image_size;
  std::vector<const float*> tiles;
  for (const StepImage& im : images) {
    if (im.grid_w != side || im.grid_h <= 0 || im.grid_h % side != 0)
      return invalid_argument("an InternVL image is a column of tiles of " + std::to_string(side) + " x " +
                              std::to_string(side) + " patches (" + std::to_string(v_.image_size) +
                              " pixels a side): a grid of (tiles * " + std::to_string(side) + ") x " +
                              std::to_string(side) + "; got " + std::to_string(im.grid_h) + " x " +
                              std::to_string(im.grid_w));
    const size_t n_tiles = static_cast<size_t>(im.grid_h / side);
    if (im.pixels == nullptr || im.pixels->size() != n_tiles * tile_floats)
      return invalid_argument("an InternVL image of " + std::to_string(n_tiles) + " tiles must be " +
                              std::to_string(n_tiles * tile_floats) + " floats ([tiles, 3, " +
                              std::to_string(v_.image_size) + ", " + std::to_string(v_.image_size) + "]); got " +
                              std::to_string(im.pixels == nullptr ? 0 : im.pixels->size()));
    for (size_t k = 0; k < n_tiles; ++k) tiles.push_back(im.pixels->data() + k * tile_floats);
  }
  const int64_t f = tile_tokens();
  BRIGADE_CHECK(out.ndim == 2 && out.dim(0) == static_cast<int64_t>(tiles.size()) * f && out.dim(1) == text_hidden_,
                "InternVL vision encode: out [tiles * tile tokens, text hidden]");
  if (!sc_.vit.allocated()) BRIGADE_RETURN_IF_ERROR(allocate_scratch());
  return sc_.vit.each_pass(tiles.size(), [&](size_t first, int n) {
    encode_pass(tiles, first, n, out);
    return Status::ok();
  });
}

void InternVision::encode_pass(std::span<const float* const> tiles, size_t first, int n, const Tensor& out) {
  Backend& b = *backend_;
  const int64_t p = n_positions(), h = v_.hidden_size, f = tile_tokens(), rows = n * p, width = v_.patch_width();
  const int64_t patches = v_.n_patches(), merged = int64_t{v_.merge} * v_.merge * h;
  std::vector<float> host(static_cast<size_t>(rows * width), 0.0f);  // each tile's class row left zero
  for (int i = 0; i < n; ++i) unfold_square_patches(tiles[first + static_cast<size_t>(i)], v_, host.data() + (i * p + 1) * width);
  const Tensor patch_rows = sc_.vit.patches.tensor.rows(0, rows);
  b.upload(patch_rows, host.data());
  sc_.vit.attention.plan(n, p);

  const Tensor x = sc_.vit.x.tensor.rows(0, rows);
  const VitBuffers buf = sc_.vit.layer_buffers(rows);
  const Tensor& normed = buf.normed;
  b.matmul(patch_rows, patch_w_.tensor, patch_b_.tensor, x);
  b.scatter_rows(x, Tensor(sc_.cls_ids.tensor.data, DType::i32, {n}), sc_.cls_rows.tensor.rows(0, n));
  const Tensor pos(pos_.tensor.data, DType::f32, {p, h});
  for (int i = 0; i < n; ++i) b.add(x.rows(i * p, p), pos);
  for (const VitLayer& L : layers_) run_vit_layer(b, L, act_, v_.eps, x, buf, sc_.vit.attention);
  Tensor state = x;
  if (v_.final_norm) {
    b.layer_norm(x, final_w_.tensor, final_b_.tensor, v_.eps, normed);
    state = normed;
  }
  // Drop the class rows and shuffle: m^2 consecutive gathered rows are one token's [m^2 h] row.
  const Tensor shuffled = sc_.shuffled.tensor.rows(0, n * patches);
  b.gather_rows(state, Tensor(sc_.shuffle_ids.tensor.data, DType::i32, {n * patches}), shuffled);
  const Tensor tokens(shuffled.data, DType::f32, {n * f, merged});
  const Tensor tokens_normed(sc_.vit.normed.tensor.data, DType::f32, {n * f, merged});
  b.layer_norm(tokens, norm_w_.tensor, norm_b_.tensor, v_.projector_eps, tokens_normed);
  const Tensor proj = sc_.proj.tensor.rows(0, n * f);
  b.matmul(tokens_normed, linear_1_.tensor, linear_1_b_.tensor, proj);
  vit_activate(b, projector_act_, proj);
  b.matmul(proj, linear_2_.tensor, linear_2_b_.tensor, out.rows(static_cast<int64_t>(first) * f, n * f));
}

}  // namespace brigade
