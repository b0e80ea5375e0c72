#include "models/gemma3_vision.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "models/step_inputs.h"

namespace brigade {
namespace {

// Patch rows per encoder pass: one 896-pixel Gemma 3 image (64 x 64 patches), or as many smaller
// images as fit. Bounds the scratch (about 45 KB per row for the 400M tower's widths).
constexpr int kRowsPerPass = 4096;

std::string tower(const std::string& suffix) { return "vision_tower." + suffix; }
std::string layer_name(int l, const char* suffix) {
  return tower("encoder.layers." + std::to_string(l) + "." + suffix);
}

// image [3, S, S] -> rows [n_patches, 3 p p]: patch (py, px) is row py * side + px, its pixels
// c-major then y then x, as the convolution's weight [hidden, 3, p, p] flattens.
void unfold_patches(const float* image, const VisionConfig& v, float* rows) {
  const int p = v.patch_size, side = v.patches_per_side(), s = v.image_size;
  for (int py = 0; py < side; ++py)
    for (int px = 0; px < side; ++px) {
      float* dst = rows + (static_cast<int64_t>(py) * side + px) * v.patch_width();
      for (int c = 0; c < 3; ++c)
        for (int y = 0; y < p; ++y) {
          const float* src = image + (static_cast<int64_t>(c) * s + py * p + y) * s + px * p;
          std::copy(src, src + p, dst);
          dst += p;
        }
    }
}

}  // namespace

Status Gemma3Vision::load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden) {
  if (backend.activation_dtype() != DType::f32)
    return unsupported("the Gemma 3 vision tower runs on f32 activations; this backend's are " +
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
  for (int l = 0; l < v.n_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    auto attn = [&](const char* proj, const char* what) { return layer_name(l, (std::string("self_attn.") + proj + "." + what).c_str()); };
    BRIGADE_ASSIGN_OR_RETURN(L.ln1_w, vec(layer_name(l, "layer_norm1.weight"), h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln1_b, vec(layer_name(l, "layer_norm1.bias"), h));
    BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.fused({attn("q_proj", "weight"), attn("k_proj", "weight"), attn("v_proj", "weight")},
                                            {h, h, h}, h));
    BRIGADE_ASSIGN_OR_RETURN(L.qkv_b, w.vector_f32({attn("q_proj", "bias"), attn("k_proj", "bias"), attn("v_proj", "bias")},
                                                   {h, h, h}));
    BRIGADE_ASSIGN_OR_RETURN(L.o, w.matrix(attn("out_proj", "weight"), h, h));
    BRIGADE_ASSIGN_OR_RETURN(L.o_b, vec(attn("out_proj", "bias"), h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln2_w, vec(layer_name(l, "layer_norm2.weight"), h));
    BRIGADE_ASSIGN_OR_RETURN(L.ln2_b, vec(layer_name(l, "layer_norm2.bias"), h));
    BRIGADE_ASSIGN_OR_RETURN(L.fc1, w.matrix(layer_name(l, "mlp.fc1.weight"), inter, h));
    BRIGADE_ASSIGN_OR_RETURN(L.fc1_b, vec(layer_name(l, "mlp.fc1.bias"), inter));
    BRIGADE_ASSIGN_OR_RETURN(L.fc2, w.matrix(layer_name(l, "mlp.fc2.weight"), h, inter));
    BRIGADE_ASSIGN_OR_RETURN(L.fc2_b, vec(layer_name(l, "mlp.fc2.bias"), h));
  }
  BRIGADE_ASSIGN_OR_RETURN(post_w_, vec(tower("post_layernorm.weight"), h));
  BRIGADE_ASSIGN_OR_RETURN(post_b_, vec(tower("post_layernorm.bias"), h));
  // Gemma3RMSNorm scales by 1 + w.
  BRIGADE_ASSIGN_OR_RETURN(proj_norm_, vec("multi_modal_projector.mm_soft_emb_norm.weight", h, 1.0f));
  std::vector<int64_t> all_rows(static_cast<size_t>(text_hidden));
  std::iota(all_rows.begin(), all_rows.end(), 0);
  BRIGADE_ASSIGN_OR_RETURN(proj_, w.stacked_transposed("multi_modal_projector.mm_input_projection_weight", 1,
                                                       text_hidden, h, {}, all_rows));
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
  sc_.max_images = static_cast<int>(std::max<int64_t>(1, kRowsPerPass / p));
  const int64_t g = sc_.max_images, rows = g * p;
  const DType f32 = DType::f32;
  BRIGADE_ASSIGN_OR_RETURN(sc_.patches, alloc_tensor(b, f32, rows, v_.patch_width()));
  BRIGADE_ASSIGN_OR_RETURN(sc_.x, alloc_tensor(b, f32, rows, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.normed, alloc_tensor(b, f32, rows, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.qkv, alloc_tensor(b, f32, rows, 3 * h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.attn, alloc_tensor(b, f32, rows, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.mlp, alloc_tensor(b, f32, rows, v_.intermediate_size));
  BRIGADE_ASSIGN_OR_RETURN(sc_.pooled, alloc_tensor(b, f32, g * t, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.pooled_normed, alloc_tensor(b, f32, g * t, h));
  // The attention's K/V: one page of n_patches slots per image.
  BRIGADE_ASSIGN_OR_RETURN(sc_.k, alloc_tensor(b, f32, rows, h));
  BRIGADE_ASSIGN_OR_RETURN(sc_.v, alloc_tensor(b, f32, rows, h));
  for (auto [dst, n] : {std::pair{&sc_.q_start, g + 1}, {&sc_.ctx_len, g}, {&sc_.block_table, g},
                        {&sc_.attend_until, rows}, {&sc_.slots, rows}, {&sc_.pool_rows, g * p}}) {
    BRIGADE_ASSIGN_OR_RETURN(*dst, alloc_tensor(b, DType::i32, 1, n));
  }
  return Status::ok();
}

Status Gemma3Vision::encode(std::span<const StepImage> images, const Tensor& out) {
  const int64_t t = v_.tokens_per_image;
  BRIGADE_CHECK(out.ndim == 2 && out.dim(0) == static_cast<int64_t>(images.size()) * t && out.dim(1) == text_hidden_,
                "vision encode: out [images * tokens_per_image, text hidden]");
  const size_t want = static_cast<size_t>(3) * v_.image_size * v_.image_size;
  for (const StepImage& im : images)
    if (im.pixels == nullptr || im.pixels->size() != want)
      return invalid_argument("an image must be [3, " + std::to_string(v_.image_size) + ", " +
                              std::to_string(v_.image_size) + "] pixels (" + std::to_string(want) + " floats); got " +
                              std::to_string(im.pixels == nullptr ? 0 : im.pixels->size()));
  if (sc_.max_images == 0) BRIGADE_RETURN_IF_ERROR(allocate_scratch());
  for (size_t first = 0; first < images.size(); first += static_cast<size_t>(sc_.max_images)) {
    const int n = static_cast<int>(std::min(images.size() - first, static_cast<size_t>(sc_.max_images)));
    BRIGADE_RETURN_IF_ERROR(encode_pass(images, first, n, out));
  }
  return Status::ok();
}

Status Gemma3Vision::encode_pass(std::span<const StepImage> images, size_t first, int n, const Tensor& out) {
  Backend& b = *backend_;
  const int64_t p = v_.n_patches(), h = v_.hidden_size, t = v_.tokens_per_image, rows = n * p;
  const int heads = v_.n_heads, hd = v_.head_dim();

  std::vector<float> host(static_cast<size_t>(rows * v_.patch_width()));
  for (int i = 0; i < n; ++i)
    unfold_patches(images[first + static_cast<size_t>(i)].pixels->data(), v_, host.data() + i * p * v_.patch_width());
  const Tensor patches = sc_.patches.tensor.rows(0, rows);
  b.upload(patches, host.data());

  // Image i is sequence i of the attention: its patches are page i, each sees all of them.
  std::vector<int32_t> q_start(static_cast<size_t>(n) + 1), ctx(static_cast<size_t>(n), static_cast<int32_t>(p)),
      table(static_cast<size_t>(n)), until(static_cast<size_t>(rows), static_cast<int32_t>(p - 1)),
      slots(static_cast<size_t>(rows));
  for (int i = 0; i <= n; ++i) q_start[static_cast<size_t>(i)] = static_cast<int32_t>(i * p);
  std::iota(table.begin(), table.end(), 0);
  std::iota(slots.begin(), slots.end(), 0);
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
  upload_i32(sc_.q_start.tensor, q_start);
  upload_i32(sc_.ctx_len.tensor, ctx);
  upload_i32(sc_.block_table.tensor, table);
  upload_i32(sc_.attend_until.tensor, until);
  upload_i32(sc_.slots.tensor, slots);
  upload_i32(sc_.pool_rows.tensor, pool);

  AttentionMeta meta;
  meta.q_start = Tensor(sc_.q_start.tensor.data, DType::i32, {n + 1});
  meta.ctx_len = Tensor(sc_.ctx_len.tensor.data, DType::i32, {n});
  meta.block_table = Tensor(sc_.block_table.tensor.data, DType::i32, {n, 1});
  meta.attend_until = Tensor(sc_.attend_until.tensor.data, DType::i32, {rows});
  meta.n_seqs = n;
  meta.max_q_len = meta.max_ctx_len = static_cast<int>(p);
  KvLayer kv;
  kv.k = Tensor(sc_.k.tensor.data, DType::f32, {n, p, heads, hd});
  kv.v = Tensor(sc_.v.tensor.data, DType::f32, {n, p, heads, hd});
  const QkvLayout layout{heads, heads, hd};
  const Tensor slot_ids(sc_.slots.tensor.data, DType::i32, {rows});

  const Tensor x = sc_.x.tensor.rows(0, rows), normed = sc_.normed.tensor.rows(0, rows);
  const Tensor qkv = sc_.qkv.tensor.rows(0, rows), attn = sc_.attn.tensor.rows(0, rows), mlp = sc_.mlp.tensor.rows(0, rows);
  const float eps = v_.eps;
  b.matmul(patches, patch_w_.tensor, patch_b_.tensor, x);
  const Tensor pos(pos_.tensor.data, DType::f32, {p, h});
  for (int i = 0; i < n; ++i) b.add(x.rows(i * p, p), pos);
  for (const Layer& L : layers_) {
    b.layer_norm(x, L.ln1_w.tensor, L.ln1_b.tensor, eps, normed);
    b.matmul(normed, L.qkv.tensor, L.qkv_b.tensor, qkv);
    b.write_kv(kv, qkv, layout, slot_ids);
    b.attention(qkv, layout, kv, meta, 1.0f / std::sqrt(static_cast<float>(hd)), attn);
    b.matmul(attn, L.o.tensor, L.o_b.tensor, normed);
    b.add(x, normed);
    b.layer_norm(x, L.ln2_w.tensor, L.ln2_b.tensor, eps, normed);
    b.matmul(normed, L.fc1.tensor, L.fc1_b.tensor, mlp);
    b.gelu_tanh(mlp);
    b.matmul(mlp, L.fc2.tensor, L.fc2_b.tensor, normed);
    b.add(x, normed);
  }
  b.layer_norm(x, post_w_.tensor, post_b_.tensor, eps, normed);

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
