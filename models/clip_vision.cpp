#include "models/clip_vision.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "models/image.h"
#include "models/step_inputs.h"

namespace brigade {
namespace {

std::string tower(const std::string& suffix) { return "vision_tower." + suffix; }

}  // namespace

Status ClipVision::load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden) {
  if (backend.activation_dtype() != DType::f32)
    return unsupported("the LLaVA vision tower runs on f32 activations; this backend's are " +
                       std::string(dtype_name(backend.activation_dtype())));
  BRIGADE_CHECK(v.kind == VisionKind::llava && !v.feature_layers.empty(), "ClipVision loads a LLaVA tower");
  backend_ = &backend;
  v_ = v;
  text_hidden_ = text_hidden;
  BRIGADE_ASSIGN_OR_RETURN(act_, vit_act(v.hidden_act));
  BRIGADE_ASSIGN_OR_RETURN(projector_act_, vit_act(v.projector_act));
  const int64_t h = v.hidden_size, t = text_hidden, n_pos = n_positions();
  w.quantize_linear(false);
  const int64_t bytes_before = w.n_bytes();
  auto vec = [&](const std::string& name, int64_t n) { return w.vector_f32({name}, {n}); };
  BRIGADE_ASSIGN_OR_RETURN(patch_w_, w.matrix(tower("embeddings.patch_embedding.weight"), h, v.patch_width()));
  if (v.class_token) {
    BRIGADE_ASSIGN_OR_RETURN(class_emb_, vec(tower("embeddings.class_embedding"), h));
    BRIGADE_ASSIGN_OR_RETURN(pre_w_, vec(tower("pre_layrnorm.weight"), h));
    BRIGADE_ASSIGN_OR_RETURN(pre_b_, vec(tower("pre_layrnorm.bias"), h));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(patch_b_, vec(tower("embeddings.patch_embedding.bias"), h));
  }
  std::vector<int64_t> all_cols(static_cast<size_t>(h));
  std::iota(all_cols.begin(), all_cols.end(), 0);
  BRIGADE_ASSIGN_OR_RETURN(pos_, w.gathered_f32({tower("embeddings.position_embedding.weight")}, n_pos, h, {}, all_cols));
  const int n_run = *std::max_element(v.feature_layers.begin(), v.feature_layers.end());
  layers_.resize(static_cast<size_t>(n_run));
  for (int l = 0; l < n_run; ++l)
    BRIGADE_RETURN_IF_ERROR(load_vit_layer(w, tower("encoder.layers." + std::to_string(l) + "."), h,
                                           v.intermediate_size, layers_[static_cast<size_t>(l)]));
  const int64_t n_states = static_cast<int64_t>(v.feature_layers.size());
  linear_1_.resize(v.feature_layers.size());
  for (int64_t f = 0; f < n_states; ++f) {
    BRIGADE_ASSIGN_OR_RETURN(linear_1_[static_cast<size_t>(f)],
                             w.matrix("multi_modal_projector.linear_1.weight", t, h * n_states, {}, Slice{f * h, h}));
  }
  BRIGADE_ASSIGN_OR_RETURN(linear_2_, w.matrix("multi_modal_projector.linear_2.weight", t, t));
  if (v.projector_bias) {
    BRIGADE_ASSIGN_OR_RETURN(linear_1_b_, vec("multi_modal_projector.linear_1.bias", t));
    BRIGADE_ASSIGN_OR_RETURN(linear_2_b_, vec("multi_modal_projector.linear_2.bias", t));
  }
  if (v.anyres.on()) {
    BRIGADE_ASSIGN_OR_RETURN(image_newline_, vec("image_newline", t));
  }
  w.quantize_linear(true);
  weight_bytes_ = static_cast<double>(w.n_bytes() - bytes_before);
  return Status::ok();
}

double ClipVision::flops(const StepImage& im) const {
  if (!v_.anyres.on()) return flops_per_tile();
  return (1.0 + anyres_layout(v_.anyres, im.grid_h, im.grid_w).tiles()) * flops_per_tile();  // 0 tiles: base only
}

double ClipVision::flops_per_tile() const {
  const double p = n_positions(), h = v_.hidden_size, inter = v_.intermediate_size, t = text_hidden_;
  const double f = n_features(), states = static_cast<double>(v_.feature_layers.size());
  const double per_layer = 2.0 * p * (4.0 * h * h + 2.0 * h * inter) + 4.0 * h * p * p;
  return 2.0 * v_.n_patches() * h * static_cast<double>(v_.patch_width()) +
         static_cast<double>(layers_.size()) * per_layer + 2.0 * f * (states * h * t + t * t);
}

Status ClipVision::allocate_scratch() {
  Backend& b = *backend_;
  BRIGADE_RETURN_IF_ERROR(sc_.vit.allocate(b, v_, n_positions()));
  const int64_t h = v_.hidden_size, f = n_features(), g = sc_.vit.max_images;
  const DType f32 = DType::f32;
  BRIGADE_ASSIGN_OR_RETURN(sc_.selected, alloc_tensor(b, f32, g * f, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.proj, alloc_tensor(b, f32, g * f, text_hidden_));
  BRIGADE_ASSIGN_OR_RETURN(sc_.proj_part, alloc_tensor(b, f32, g * f, text_hidden_));
  BRIGADE_ASSIGN_OR_RETURN(sc_.select_rows, alloc_tensor(b, DType::i32, 1, g * f));
  if (v_.anyres.on()) {  // the newline sits after the most tiles' features
    const int64_t newline = anyres_max_tiles(v_.anyres) * f;
    BRIGADE_ASSIGN_OR_RETURN(sc_.tile_features, alloc_tensor(b, f32, newline + 1, text_hidden_));
    const int64_t most = anyres_max_tokens(v_.anyres);
    BRIGADE_ASSIGN_OR_RETURN(sc_.pack_rows, alloc_tensor(b, DType::i32, 1, most));
    if (v_.anyres.onevision()) {
      BRIGADE_ASSIGN_OR_RETURN(sc_.blend_rows, alloc_tensor(b, DType::i32, most, 4));
      BRIGADE_ASSIGN_OR_RETURN(sc_.blend_weights, alloc_tensor(b, f32, most, 4));
    }
    b.copy(sc_.tile_features.tensor.rows(newline, 1), Tensor(image_newline_.tensor.data, f32, {1, text_hidden_}));
  }
  return Status::ok();
}

Status ClipVision::check_image(const StepImage& im) const {
  if (!v_.anyres.on()) return check_square_image(im, v_, /*check_grid=*/true);
  BRIGADE_RETURN_IF_ERROR(check_anyres_size(v_.anyres, im.grid_h, im.grid_w, "an image of this vision tower"));
  const int tiles = 1 + anyres_layout(v_.anyres, im.grid_h, im.grid_w).tiles();
  const size_t want = size_t{3} * v_.image_size * v_.image_size * static_cast<size_t>(tiles);
  if (im.pixels == nullptr || im.pixels->size() != want)
    return invalid_argument("an image of " + std::to_string(im.grid_h) + " x " + std::to_string(im.grid_w) +
                            " pixels is its base tile and " + std::to_string(tiles - 1) + " tiles: [" +
                            std::to_string(tiles) + ", 3, " + std::to_string(v_.image_size) + ", " +
                            std::to_string(v_.image_size) + "] pixels (" + std::to_string(want) + " floats); got " +
                            std::to_string(im.pixels == nullptr ? 0 : im.pixels->size()));
  return Status::ok();
}

Status ClipVision::encode(std::span<const StepImage> images, const Tensor& out) {
  int64_t rows = 0;
  for (const StepImage& im : images) {
    BRIGADE_RETURN_IF_ERROR(check_image(im));
    rows += v_.image_features(im.grid_h, im.grid_w);
  }
  BRIGADE_CHECK(out.ndim == 2 && out.dim(0) == rows && out.dim(1) == text_hidden_,
                "LLaVA vision encode: out [the images' features, text hidden]");
  if (!sc_.vit.allocated()) BRIGADE_RETURN_IF_ERROR(allocate_scratch());
  if (v_.anyres.on()) {
    int64_t at = 0;
    for (const StepImage& im : images) {
      const int64_t n = v_.image_features(im.grid_h, im.grid_w);
      BRIGADE_RETURN_IF_ERROR(encode_anyres(im, out.rows(at, n)));
      at += n;
    }
    return Status::ok();
  }
  std::vector<const float*> tiles;
  for (const StepImage& im : images) tiles.push_back(im.pixels->data());
  return sc_.vit.each_pass(tiles.size(), [&](size_t first, int n) {
    encode_pass(tiles, first, n, out);
    return Status::ok();
  });
}

Status ClipVision::encode_anyres(const StepImage& im, const Tensor& out) {
  const AnyresLayout l = anyres_layout(v_.anyres, im.grid_h, im.grid_w);
  const int f = n_features();
  const size_t tile_floats = size_t{3} * v_.image_size * v_.image_size;
  std::vector<const float*> tiles;
  for (int t = 0; t <= l.tiles(); ++t) tiles.push_back(im.pixels->data() + static_cast<size_t>(t) * tile_floats);
  const Tensor all = sc_.tile_features.tensor;
  BRIGADE_RETURN_IF_ERROR(sc_.vit.each_pass(tiles.size(), [&](size_t first, int n) {
    encode_pass(tiles, first, n, all);
    return Status::ok();
  }));
  // pack_image_features: the base tile's rows, then each kept row of the tiles' grid and a newline
  // (a base-only image: its one newline).
  const auto newline = static_cast<int32_t>(all.dim(0) - 1);
  if (l.resized()) return blend_anyres(l, newline, all, out);
  std::vector<int32_t> rows;
  rows.reserve(static_cast<size_t>(out.dim(0)));
  for (int r = 0; r < f; ++r) rows.push_back(r);
  for (int y = l.row0; y < l.row0 + l.rows; ++y) {
    for (int x = l.col0; x < l.col0 + l.cols; ++x) rows.push_back(tile_feature(l, y, x));
    rows.push_back(newline);
  }
  if (l.tiles() == 0) rows.push_back(newline);
  BRIGADE_CHECK(static_cast<int64_t>(rows.size()) == out.dim(0), "LLaVA-NeXT packs image_features rows");
  const Tensor ids(sc_.pack_rows.tensor.data, DType::i32, {static_cast<int64_t>(rows.size())});
  backend_->upload(ids, rows.data());
  backend_->gather_rows(all, ids, out);
  return Status::ok();
}

int32_t ClipVision::tile_feature(const AnyresLayout& l, int y, int x) const {
  const int side = v_.anyres.side, tile = 1 + (y / side) * l.tile_cols + x / side;
  return static_cast<int32_t>(tile * n_features() + (y % side) * side + x % side);
}

Status ClipVision::blend_anyres(const AnyresLayout& l, int32_t newline, const Tensor& all, const Tensor& out) {
  // interpolate(mode="bilinear") of the kept rows x cols grid to out_rows x out_cols: each
  // feature is its four taps' rows, row tap 0 with column taps 0 and 1, then row tap 1 with both.
  const int f = n_features();
  const std::vector<BilinearTap> ys = bilinear_taps(l.rows, l.out_rows), xs = bilinear_taps(l.cols, l.out_cols);
  std::vector<int32_t> rows;
  std::vector<float> weights;
  rows.reserve(static_cast<size_t>(out.dim(0)) * 4);
  weights.reserve(static_cast<size_t>(out.dim(0)) * 4);
  const auto copy_row = [&](int32_t row) {
    rows.insert(rows.end(), {row, row, row, row});
    weights.insert(weights.end(), {1.0f, 0.0f, 0.0f, 0.0f});
  };
  for (int r = 0; r < f; ++r) copy_row(r);
  for (const BilinearTap& y : ys) {
    for (const BilinearTap& x : xs) {
      const int y0 = l.row0 + y.i0, y1 = l.row0 + y.i1, x0 = l.col0 + x.i0, x1 = l.col0 + x.i1;
      rows.insert(rows.end(), {tile_feature(l, y0, x0), tile_feature(l, y0, x1), tile_feature(l, y1, x0),
                               tile_feature(l, y1, x1)});
      weights.insert(weights.end(), {y.w0 * x.w0, y.w0 * x.w1, y.w1 * x.w0, y.w1 * x.w1});
    }
    copy_row(newline);
  }
  const auto n = static_cast<int64_t>(rows.size() / 4);
  BRIGADE_CHECK(n == out.dim(0), "LLaVA-OneVision packs image_features rows");
  const Tensor ids(sc_.blend_rows.tensor.data, DType::i32, {n, 4}), w(sc_.blend_weights.tensor.data, DType::f32, {n, 4});
  backend_->upload(ids, rows.data());
  backend_->upload(w, weights.data());
  backend_->blend_rows(all, ids, w, out);
  return Status::ok();
}

void ClipVision::project_state(const Tensor& x, int n, size_t block) {
  Backend& b = *backend_;
  const int64_t f = n_features(), nf = n * f;
  const Tensor idx(sc_.select_rows.tensor.data, DType::i32, {nf});
  const Tensor selected = sc_.selected.tensor.rows(0, nf), proj = sc_.proj.tensor.rows(0, nf);
  b.gather_rows(x, idx, selected);
  if (block == 0) {
    b.matmul(selected, linear_1_[0].tensor, linear_1_b_.tensor, proj);
    return;
  }
  const Tensor part = sc_.proj_part.tensor.rows(0, nf);
  b.matmul(selected, linear_1_[block].tensor, Tensor(), part);
  b.add(proj, part);
}

void ClipVision::encode_pass(std::span<const float* const> tiles, size_t first, int n, const Tensor& out) {
  Backend& b = *backend_;
  const int64_t p = n_positions(), h = v_.hidden_size, f = n_features(), rows = n * p;
  const int64_t cls = v_.class_token ? 1 : 0, width = v_.patch_width();
  // Patch rows at each image's positions [cls, p); CLIP's class row stays zero (no patch bias), so
  // the matmul leaves it zero for the class embedding.
  std::vector<float> host(static_cast<size_t>(rows * width), 0.0f);
  for (int i = 0; i < n; ++i)
    unfold_square_patches(tiles[first + static_cast<size_t>(i)], v_, host.data() + (i * p + cls) * width);
  const Tensor patches = sc_.vit.patches.tensor.rows(0, rows);
  b.upload(patches, host.data());
  // The kept rows of each image's states: its last f positions ("default" drops the first).
  std::vector<int32_t> keep(static_cast<size_t>(n * f));
  for (int i = 0; i < n; ++i)
    for (int64_t r = 0; r < f; ++r) keep[static_cast<size_t>(i * f + r)] = static_cast<int32_t>(i * p + p - f + r);
  b.upload(Tensor(sc_.select_rows.tensor.data, DType::i32, {n * f}), keep.data());
  sc_.vit.attention.plan(n, p);

  Tensor x = sc_.vit.x.tensor.rows(0, rows), normed = sc_.vit.normed.tensor.rows(0, rows);
  b.matmul(patches, patch_w_.tensor, patch_b_.tensor, x);
  const Tensor pos(pos_.tensor.data, DType::f32, {p, h});
  for (int i = 0; i < n; ++i) {
    if (cls > 0) b.add(x.rows(i * p, 1), Tensor(class_emb_.tensor.data, DType::f32, {1, h}));
    b.add(x.rows(i * p, p), pos);
  }
  if (cls > 0) {  // pre_layrnorm: the normed rows become the state
    b.layer_norm(x, pre_w_.tensor, pre_b_.tensor, v_.eps, normed);
    std::swap(x, normed);
  }
  // x and normed may have swapped: the layers' normed is whichever x is not.
  const VitBuffers buf{normed, sc_.vit.qkv.tensor.rows(0, rows), sc_.vit.attn.tensor.rows(0, rows),
                       sc_.vit.mlp.tensor.rows(0, rows)};
  auto project_if_read = [&](int state) {
    for (size_t k = 0; k < v_.feature_layers.size(); ++k)
      if (v_.feature_layers[k] == state) project_state(x, n, k);
  };
  project_if_read(0);
  for (size_t l = 0; l < layers_.size(); ++l) {
    run_vit_layer(b, layers_[l], act_, v_.eps, x, buf, sc_.vit.attention);
    project_if_read(static_cast<int>(l) + 1);
  }
  const Tensor proj = sc_.proj.tensor.rows(0, n * f);
  vit_activate(b, projector_act_, proj);
  b.matmul(proj, linear_2_.tensor, linear_2_b_.tensor, out.rows(static_cast<int64_t>(first) * f, n * f));
}

}  // namespace brigade
