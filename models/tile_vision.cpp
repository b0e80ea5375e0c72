#include "models/tile_vision.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "models/step_inputs.h"

namespace brigade {

std::vector<int32_t> idefics3_position_ids(int n) {
  // torch.arange(1 / n, 1.0, 1 / n) in float32: its length ceil((end - start) / step) and its
  // values start + i * step computed in double (the CPU kernel's accumulate type), then rounded.
  const double step = 1.0 / n;
  const auto len = static_cast<int64_t>(std::ceil((1.0 - step) / step));
  std::vector<float> boundaries(static_cast<size_t>(std::max<int64_t>(len, 0)));
  for (size_t i = 0; i < boundaries.size(); ++i) boundaries[i] = static_cast<float>(step + static_cast<double>(i) * step);
  const float step_f = 1.0f / static_cast<float>(n);  // 1.0 / nb_patches: a float32 tensor
  const float top = static_cast<float>(1.0 - 1e-6);
  std::vector<int32_t> bucket(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const float frac = std::min(static_cast<float>(i) * step_f, top);
    // right=True: the number of boundaries <= frac.
    bucket[static_cast<size_t>(i)] =
        static_cast<int32_t>(std::upper_bound(boundaries.begin(), boundaries.end(), frac) - boundaries.begin());
  }
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(n) * static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) ids.push_back(bucket[static_cast<size_t>(r)] * n + bucket[static_cast<size_t>(c)]);
  return ids;
}

Status TileVision::load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden) {
  if (backend.activation_dtype() != DType::f32)
    return unsupported("the Idefics3 / Aya Vision tower runs on f32 activations; this backend's are " +
                       std::string(dtype_name(backend.activation_dtype())));
  BRIGADE_CHECK(v.tiled() && v.merge > 0 && v.patches_per_side() % v.merge == 0,
                "TileVision loads an Idefics3 or Aya Vision tower whose pixel shuffle divides the tile's patches");
  BRIGADE_CHECK(v.kind != VisionKind::aya_vision || (v.merger_intermediate > 0 && v.merger_intermediate % 2 == 0),
                "Aya Vision's projector width is whole SwiGLU halves");
  backend_ = &backend;
  v_ = v;
  text_hidden_ = text_hidden;
  BRIGADE_ASSIGN_OR_RETURN(act_, vit_act(v.hidden_act));
  const int64_t h = v.hidden_size, n_pos = v.n_patches(), merged = int64_t{v.merge} * v.merge * h;
  w.quantize_linear(false);
  auto vec = [&](const std::string& name, int64_t n) { return w.vector_f32({name}, {n}); };
  BRIGADE_ASSIGN_OR_RETURN(patch_w_, w.matrix(tower("embeddings.patch_embedding.weight"), h, v.patch_width()));
  BRIGADE_ASSIGN_OR_RETURN(patch_b_, vec(tower("embeddings.patch_embedding.bias"), h));
  // The table in the order a tile's patches read it (idefics3_position_ids), so a pass adds it whole.
  std::vector<int64_t> all_cols(static_cast<size_t>(h));
  std::iota(all_cols.begin(), all_cols.end(), 0);
  BRIGADE_ASSIGN_OR_RETURN(OwnedTensor table,
                           w.gathered_f32({tower("embeddings.position_embedding.weight")}, n_pos, h, {}, all_cols));
  BRIGADE_ASSIGN_OR_RETURN(pos_, alloc_tensor(backend, DType::f32, n_pos, h));
  std::vector<int32_t> ids(static_cast<size_t>(n_pos));
  if (v.kind == VisionKind::idefics3) ids = idefics3_position_ids(v.patches_per_side());
  else std::iota(ids.begin(), ids.end(), 0);  // SiglipVisionEmbeddings: position_ids = arange
  BRIGADE_ASSIGN_OR_RETURN(OwnedTensor id_rows, alloc_tensor(backend, DType::i32, 1, n_pos));
  const Tensor id_tensor(id_rows.tensor.data, DType::i32, {n_pos});
  backend.upload(id_tensor, ids.data());
  backend.gather_rows(Tensor(table.tensor.data, DType::f32, {n_pos, h}), id_tensor, pos_.tensor);
  layers_.resize(static_cast<size_t>(v.feature_layers.empty() ? v.n_layers : v.feature_layers.front()));
  for (int l = 0; l < static_cast<int>(layers_.size()); ++l)
    BRIGADE_RETURN_IF_ERROR(load_vit_layer(w, tower("encoder.layers." + std::to_string(l) + "."), h,
                                           v.intermediate_size, layers_[static_cast<size_t>(l)]));
  if (v.final_norm) {
    BRIGADE_ASSIGN_OR_RETURN(post_w_, vec(tower("post_layernorm.weight"), h));
    BRIGADE_ASSIGN_OR_RETURN(post_b_, vec(tower("post_layernorm.bias"), h));
  }
  if (aya()) {
    // linear_1's rows as [gate; x] (its second half, then its first), so silu_mul takes them as
    // they come: silu(gate) * x.
    const int64_t inter = v.merger_intermediate, half = inter / 2;
    const std::string p = "multi_modal_projector.";
    BRIGADE_ASSIGN_OR_RETURN(norm_w_, vec(p + "layernorm.weight", merged));
    BRIGADE_ASSIGN_OR_RETURN(norm_b_, vec(p + "layernorm.bias", merged));
    BRIGADE_ASSIGN_OR_RETURN(linear_1_, w.fused({p + "linear_1.weight", p + "linear_1.weight"}, {inter, inter}, merged,
                                                {Slice{half, half}, Slice{0, half}}));
    BRIGADE_ASSIGN_OR_RETURN(linear_1_b_, w.vector_f32({p + "linear_1.bias", p + "linear_1.bias"}, {inter, inter},
                                                       {Slice{half, half}, Slice{0, half}}));
    BRIGADE_ASSIGN_OR_RETURN(linear_2_, w.matrix(p + "linear_2.weight", text_hidden, half));
    BRIGADE_ASSIGN_OR_RETURN(linear_2_b_, vec(p + "linear_2.bias", text_hidden));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(proj_, w.matrix("connector.modality_projection.proj.weight", text_hidden, merged));
  }
  w.quantize_linear(true);
  return Status::ok();
}

double TileVision::flops_per_tile() const {
  const double p = v_.n_patches(), h = v_.hidden_size, inter = v_.intermediate_size, t = text_hidden_;
  const double m2 = static_cast<double>(v_.merge) * v_.merge;
  const double per_layer = 2.0 * p * (4.0 * h * h + 2.0 * h * inter) + 4.0 * h * p * p;
  const double projector = aya() ? 2.0 * tile_tokens() * (m2 * h * v_.merger_intermediate + v_.merger_intermediate / 2.0 * t)
                                 : 2.0 * tile_tokens() * m2 * h * t;
  return 2.0 * p * h * static_cast<double>(v_.patch_width()) + static_cast<double>(layers_.size()) * per_layer +
         projector;
}

Status TileVision::allocate_scratch() {
  Backend& b = *backend_;
  const int64_t p = v_.n_patches(), h = v_.hidden_size;
  BRIGADE_RETURN_IF_ERROR(sc_.vit.allocate(b, v_, p));
  const int64_t g = sc_.vit.max_images;
  BRIGADE_ASSIGN_OR_RETURN(sc_.shuffled, alloc_tensor(b, DType::f32, g * p, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.shuffle_ids, alloc_tensor(b, DType::i32, 1, g * p));
  if (aya()) {
    const int64_t tokens = g * tile_tokens(), inter = v_.merger_intermediate;
    BRIGADE_ASSIGN_OR_RETURN(sc_.gate_up, alloc_tensor(b, DType::f32, tokens, inter));
    BRIGADE_ASSIGN_OR_RETURN(sc_.swiglu, alloc_tensor(b, DType::f32, tokens, inter / 2));
  }
  // Constant per pass: tile i's token (r, c) is its patches (m r + j, m c + k), k fastest.
  const int side = v_.patches_per_side(), m = v_.merge;
  std::vector<int32_t> shuffle;
  shuffle.reserve(static_cast<size_t>(g * p));
  for (int64_t i = 0; i < g; ++i)
    for (int r = 0; r < side / m; ++r)
      for (int c = 0; c < side / m; ++c)
        for (int j = 0; j < m; ++j)
          for (int k = 0; k < m; ++k) shuffle.push_back(static_cast<int32_t>(i * p + int64_t{m * r + j} * side + m * c + k));
  b.upload(Tensor(sc_.shuffle_ids.tensor.data, DType::i32, {g * p}), shuffle.data());
  return Status::ok();
}

Status TileVision::encode(std::span<const StepImage> images, const Tensor& out) {
  for (const StepImage& im : images) BRIGADE_RETURN_IF_ERROR(check_square_image(im, v_, /*check_grid=*/true));
  const int64_t f = tile_tokens();
  BRIGADE_CHECK(out.ndim == 2 && out.dim(0) == static_cast<int64_t>(images.size()) * f && out.dim(1) == text_hidden_,
                "Idefics3 vision encode: out [tiles * tile tokens, text hidden]");
  if (!sc_.vit.allocated()) BRIGADE_RETURN_IF_ERROR(allocate_scratch());
  return sc_.vit.each_pass(images.size(), [&](size_t first, int n) {
    encode_pass(images, first, n, out);
    return Status::ok();
  });
}

void TileVision::encode_pass(std::span<const StepImage> tiles, size_t first, int n, const Tensor& out) {
  Backend& b = *backend_;
  const int64_t p = v_.n_patches(), h = v_.hidden_size, f = tile_tokens(), rows = n * p, width = v_.patch_width();
  const int64_t merged = int64_t{v_.merge} * v_.merge * h;
  std::vector<float> host(static_cast<size_t>(rows * width));
  for (int i = 0; i < n; ++i)
    unfold_square_patches(tiles[first + static_cast<size_t>(i)].pixels->data(), v_, host.data() + i * p * width);
  const Tensor patch_rows = sc_.vit.patches.tensor.rows(0, rows);
  b.upload(patch_rows, host.data());
  sc_.vit.attention.plan(n, p);

  const Tensor x = sc_.vit.x.tensor.rows(0, rows);
  const VitBuffers buf = sc_.vit.layer_buffers(rows);
  b.matmul(patch_rows, patch_w_.tensor, patch_b_.tensor, x);
  for (int i = 0; i < n; ++i) b.add(x.rows(i * p, p), pos_.tensor);
  for (const VitLayer& L : layers_) run_vit_layer(b, L, act_, v_.eps, x, buf, sc_.vit.attention);
  if (v_.final_norm) b.layer_norm(x, post_w_.tensor, post_b_.tensor, v_.eps, buf.normed);
  // The shuffle: m^2 consecutive gathered rows are one token's [m^2 h] row.
  const Tensor shuffled = sc_.shuffled.tensor.rows(0, rows);
  b.gather_rows(v_.final_norm ? buf.normed : x, Tensor(sc_.shuffle_ids.tensor.data, DType::i32, {rows}), shuffled);
  const Tensor tokens(shuffled.data, DType::f32, {n * f, merged});
  const Tensor dst = out.rows(static_cast<int64_t>(first) * f, n * f);
  if (!aya()) {
    b.matmul(tokens, proj_.tensor, Tensor(), dst);
    return;
  }
  const Tensor tokens_normed(sc_.vit.normed.tensor.data, DType::f32, {n * f, merged});  // free after the gather
  b.layer_norm(tokens, norm_w_.tensor, norm_b_.tensor, v_.projector_eps, tokens_normed);
  const Tensor gate_up = sc_.gate_up.tensor.rows(0, n * f), swiglu = sc_.swiglu.tensor.rows(0, n * f);
  b.matmul(tokens_normed, linear_1_.tensor, linear_1_b_.tensor, gate_up);
  b.silu_mul(gate_up, swiglu);
  b.matmul(swiglu, linear_2_.tensor, linear_2_b_.tensor, dst);
}

}  // namespace brigade
