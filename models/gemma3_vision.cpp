#include "models/gemma3_vision.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "models/step_inputs.h"

namespace brigade {
namespace {

std::string tower(const std::string& suffix) { return "vision_tower." + suffix; }

}  // namespace

Status Gemma3Vision::load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden) {
  if (backend.activation_dtype() != DType::f32)
    return unsupported(std::string(v.kind == VisionKind::paligemma ? "PaliGemma's" : "the Gemma 3") +
                       " vision tower runs on f32 activations; this backend's are " +
                       std::string(dtype_name(backend.activation_dtype())));
  backend_ = &backend;
  v_ = v;
  text_hidden_ = text_hidden;
  const int64_t h = v.hidden_size, inter = v.intermediate_size;
  w.quantize_linear(false);  // the tower's widths (4304) are not whole blocks of 32
  const int64_t bytes_before = w.n_bytes();
  auto vec = [&](const std::string& name, int64_t n, float offset = 0.0f) { return w.vector_f32({name}, {n}, {}, offset); };
  BRIGADE_ASSIGN_OR_RETURN(patch_w_, w.matrix(tower("embeddings.patch_embedding.weight"), h, v.patch_width()));
  BRIGADE_ASSIGN_OR_RETURN(patch_b_, vec(tower("embeddings.patch_embedding.bias"), h));
  std::vector<int64_t> all_cols(static_cast<size_t>(h));
  std::iota(all_cols.begin(), all_cols.end(), 0);
  BRIGADE_ASSIGN_OR_RETURN(pos_, w.gathered_f32({tower("embeddings.position_embedding.weight")}, v.n_patches(), h, {},
                                                all_cols));
  layers_.resize(static_cast<size_t>(v.n_layers));
  for (int l = 0; l < v.n_layers; ++l)
    BRIGADE_RETURN_IF_ERROR(load_vit_layer(w, tower("encoder.layers." + std::to_string(l) + "."), h, inter,
                                           layers_[static_cast<size_t>(l)]));
  BRIGADE_ASSIGN_OR_RETURN(post_w_, vec(tower("post_layernorm.weight"), h));
  BRIGADE_ASSIGN_OR_RETURN(post_b_, vec(tower("post_layernorm.bias"), h));
  if (v.kind == VisionKind::paligemma) {  // PaliGemmaMultiModalProjector: one nn.Linear [text hidden, h]
    BRIGADE_ASSIGN_OR_RETURN(proj_, w.matrix("multi_modal_projector.linear.weight", text_hidden, h));
    BRIGADE_ASSIGN_OR_RETURN(proj_b_, vec("multi_modal_projector.linear.bias", text_hidden));
  } else {
    // Gemma3RMSNorm scales by 1 + w.
    BRIGADE_ASSIGN_OR_RETURN(proj_norm_, vec("multi_modal_projector.mm_soft_emb_norm.weight", h, 1.0f));
    std::vector<int64_t> all_rows(static_cast<size_t>(text_hidden));
    std::iota(all_rows.begin(), all_rows.end(), 0);
    BRIGADE_ASSIGN_OR_RETURN(proj_, w.stacked_transposed("multi_modal_projector.mm_input_projection_weight", 1,
                                                         text_hidden, h, {}, all_rows));
  }
  w.quantize_linear(true);
  weight_bytes_ = static_cast<double>(w.n_bytes() - bytes_before);
  return Status::ok();
}

double Gemma3Vision::flops_per_image() const {
  const double p = v_.n_patches(), h = v_.hidden_size, inter = v_.intermediate_size;
  const double per_layer = 2.0 * p * (4.0 * h * h + 2.0 * h * inter) + 4.0 * h * p * p;
  return 2.0 * p * h * static_cast<double>(v_.patch_width()) + v_.n_layers * per_layer +
         2.0 * v_.tokens_per_image * h * text_hidden_;
}

void Gemma3Vision::upload_i32(const Tensor& t, const std::vector<int32_t>& host) {
  BRIGADE_CHECK(static_cast<int64_t>(host.size()) <= t.numel(), "vision scratch: ints fit their buffer");
  backend_->upload(Tensor(t.data, DType::i32, {static_cast<int64_t>(host.size())}), host.data());
}

Status Gemma3Vision::allocate_scratch() {
  Backend& b = *backend_;
  const int64_t p = v_.n_patches(), h = v_.hidden_size, t = v_.tokens_per_image;
  BRIGADE_RETURN_IF_ERROR(sc_.vit.allocate(b, v_, p));
  const int64_t g = sc_.vit.max_images;
  const DType f32 = DType::f32;
  BRIGADE_ASSIGN_OR_RETURN(sc_.pooled, alloc_tensor(b, f32, g * t, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.pooled_normed, alloc_tensor(b, f32, g * t, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.pool_rows, alloc_tensor(b, DType::i32, 1, g * p));
  return Status::ok();
}

Status Gemma3Vision::encode(std::span<const StepImage> images, const Tensor& out) {
  const int64_t t = v_.tokens_per_image;
  BRIGADE_CHECK(out.ndim == 2 && out.dim(0) == static_cast<int64_t>(images.size()) * t && out.dim(1) == text_hidden_,
                "vision encode: out [images * tokens_per_image, text hidden]");
  for (const StepImage& im : images) BRIGADE_RETURN_IF_ERROR(check_square_image(im, v_, /*check_grid=*/false));
  if (!sc_.vit.allocated()) BRIGADE_RETURN_IF_ERROR(allocate_scratch());
  return sc_.vit.each_pass(images.size(), [&](size_t first, int n) { return encode_pass(images, first, n, out); });
}

Status Gemma3Vision::encode_pass(std::span<const StepImage> images, size_t first, int n, const Tensor& out) {
  Backend& b = *backend_;
  const int64_t p = v_.n_patches(), h = v_.hidden_size, t = v_.tokens_per_image, rows = n * p;

  std::vector<float> host(static_cast<size_t>(rows * v_.patch_width()));
  for (int i = 0; i < n; ++i)
    unfold_square_patches(images[first + static_cast<size_t>(i)].pixels->data(), v_, host.data() + i * p * v_.patch_width());
  const Tensor patches = sc_.vit.patches.tensor.rows(0, rows);
  b.upload(patches, host.data());

  sc_.vit.attention.plan(n, p);  // image i is sequence i: its patches see all of them
  const Tensor x = sc_.vit.x.tensor.rows(0, rows);
  const VitBuffers buf = sc_.vit.layer_buffers(rows);
  const Tensor& normed = buf.normed;
  const float eps = v_.eps;
  const auto tower = [&] {
    b.matmul(patches, patch_w_.tensor, patch_b_.tensor, x);
    const Tensor pos(pos_.tensor.data, DType::f32, {p, h});
    for (int i = 0; i < n; ++i) b.add(x.rows(i * p, p), pos);
    for (const VitLayer& L : layers_) run_vit_layer(b, L, VitAct::gelu_tanh, eps, x, buf, sc_.vit.attention);
    b.layer_norm(x, post_w_.tensor, post_b_.tensor, eps, normed);
  };
  if (v_.kind == VisionKind::paligemma) {  // last_hidden_state through the projector, a token per patch
    tower();
    b.matmul(normed, proj_.tensor, proj_b_.tensor, out.rows(static_cast<int64_t>(first) * t, n * t));
    return Status::ok();
  }
  // Average pool: kernel offset (dy, dx) of token (ty, tx) of image i is patch row
  // i p + (ty k + dy) side + tx k + dx; pool_rows holds them offset-major.
  const int k = v_.pool_kernel(), side = v_.patches_per_side(), tside = v_.tokens_per_side();
  std::vector<int32_t> pool(static_cast<size_t>(k * k * n * t));
  size_t at = 0;
  for (int dy = 0; dy < k; ++dy)
    for (int dx = 0; dx < k; ++dx)
      for (int i = 0; i < n; ++i)
        for (int ty = 0; ty < tside; ++ty)
          for (int tx = 0; tx < tside; ++tx)
            pool[at++] = static_cast<int32_t>(i * p + (ty * k + dy) * side + tx * k + dx);
  upload_i32(sc_.pool_rows.tensor, pool);

  tower();

  // AvgPool2d(k, k): the sum over the kernel in (dy, dx) order, then divided by k * k.
  const int64_t nt = n * t;
  const Tensor pooled = sc_.pooled.tensor.rows(0, nt), tmp = sc_.pooled_normed.tensor.rows(0, nt);
  for (int kk = 0; kk < k * k; ++kk) {
    const Tensor idx(static_cast<int32_t*>(sc_.pool_rows.tensor.data) + kk * nt, DType::i32, {nt});
    b.gather_rows(normed, idx, kk == 0 ? pooled : tmp);
    if (kk > 0) b.add(pooled, tmp);
  }
  if (k > 1) b.scale(pooled, 1.0f / static_cast<float>(k * k));
  b.rms_norm(pooled, proj_norm_.tensor, eps, tmp);
  b.matmul(tmp, proj_.tensor, Tensor(), out.rows(static_cast<int64_t>(first) * t, nt));
  return Status::ok();
}

}  // namespace brigade
