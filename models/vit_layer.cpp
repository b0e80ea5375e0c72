#include "models/vit_layer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "models/step_inputs.h"

namespace brigade {

Expected<VitAct> vit_act(const std::string& name) {
  if (name == "gelu") return VitAct::gelu;
  if (name == "gelu_pytorch_tanh") return VitAct::gelu_tanh;
  if (name == "quick_gelu") return VitAct::quick_gelu;
  return unsupported("vision activation '" + name + "'; supported: gelu, gelu_pytorch_tanh, quick_gelu");
}

void vit_activate(Backend& b, VitAct act, const Tensor& x) {
  switch (act) {
    case VitAct::gelu: b.gelu(x); break;
    case VitAct::gelu_tanh: b.gelu_tanh(x); break;
    case VitAct::quick_gelu: b.quick_gelu(x); break;
  }
}

Status load_vit_layer(WeightLoader& w, const std::string& prefix, int64_t h, int64_t inter, VitLayer& L) {
  auto vec = [&](const std::string& name, int64_t n) { return w.vector_f32({prefix + name}, {n}); };
  auto attn = [&](const char* proj, const char* what) { return prefix + "self_attn." + proj + "." + what; };
  BRIGADE_ASSIGN_OR_RETURN(L.ln1_w, vec("layer_norm1.weight", h));
  BRIGADE_ASSIGN_OR_RETURN(L.ln1_b, vec("layer_norm1.bias", h));
  BRIGADE_ASSIGN_OR_RETURN(L.qkv, w.fused({attn("q_proj", "weight"), attn("k_proj", "weight"), attn("v_proj", "weight")},
                                          {h, h, h}, h));
  BRIGADE_ASSIGN_OR_RETURN(L.qkv_b, w.vector_f32({attn("q_proj", "bias"), attn("k_proj", "bias"), attn("v_proj", "bias")},
                                                 {h, h, h}));
  BRIGADE_ASSIGN_OR_RETURN(L.o, w.matrix(attn("out_proj", "weight"), h, h));
  BRIGADE_ASSIGN_OR_RETURN(L.o_b, vec("self_attn.out_proj.bias", h));
  BRIGADE_ASSIGN_OR_RETURN(L.ln2_w, vec("layer_norm2.weight", h));
  BRIGADE_ASSIGN_OR_RETURN(L.ln2_b, vec("layer_norm2.bias", h));
  BRIGADE_ASSIGN_OR_RETURN(L.fc1, w.matrix(prefix + "mlp.fc1.weight", inter, h));
  BRIGADE_ASSIGN_OR_RETURN(L.fc1_b, vec("mlp.fc1.bias", inter));
  BRIGADE_ASSIGN_OR_RETURN(L.fc2, w.matrix(prefix + "mlp.fc2.weight", h, inter));
  BRIGADE_ASSIGN_OR_RETURN(L.fc2_b, vec("mlp.fc2.bias", h));
  return Status::ok();
}

Status VitAttention::allocate(Backend& b, int max_images, int64_t max_len, int heads, int head_dim) {
  b_ = &b, heads_ = heads, head_dim_ = head_dim;
  const int64_t g = max_images, rows = g * max_len, h = int64_t{heads} * head_dim;
  BRIGADE_ASSIGN_OR_RETURN(k_, alloc_tensor(b, DType::f32, rows, h));
  BRIGADE_ASSIGN_OR_RETURN(v_, alloc_tensor(b, DType::f32, rows, h));
  for (auto [dst, n] : {std::pair{&q_start_, g + 1}, {&ctx_len_, g}, {&block_table_, g}, {&attend_until_, rows},
                        {&slot_ids_, rows}}) {
    BRIGADE_ASSIGN_OR_RETURN(*dst, alloc_tensor(b, DType::i32, 1, n));
  }
  return Status::ok();
}

void VitAttention::plan(int n, int64_t len) {
  const int64_t rows = n * len;
  BRIGADE_CHECK(rows <= attend_until_.tensor.numel() && n + 1 <= q_start_.tensor.numel(),
                "vision attention: a pass fits the buffers allocated for it");
  std::vector<int32_t> q_start(static_cast<size_t>(n) + 1), ctx(static_cast<size_t>(n), static_cast<int32_t>(len)),
      table(static_cast<size_t>(n)), until(static_cast<size_t>(rows), static_cast<int32_t>(len - 1)),
      slots(static_cast<size_t>(rows));
  for (int i = 0; i <= n; ++i) q_start[static_cast<size_t>(i)] = static_cast<int32_t>(i * len);
  std::iota(table.begin(), table.end(), 0);
  std::iota(slots.begin(), slots.end(), 0);
  auto upload = [&](const OwnedTensor& t, const std::vector<int32_t>& host) {
    b_->upload(Tensor(t.tensor.data, DType::i32, {static_cast<int64_t>(host.size())}), host.data());
  };
  upload(q_start_, q_start);
  upload(ctx_len_, ctx);
  upload(block_table_, table);
  upload(attend_until_, until);
  upload(slot_ids_, slots);
  meta_ = AttentionMeta();
  meta_.q_start = Tensor(q_start_.tensor.data, DType::i32, {n + 1});
  meta_.ctx_len = Tensor(ctx_len_.tensor.data, DType::i32, {n});
  meta_.block_table = Tensor(block_table_.tensor.data, DType::i32, {n, 1});
  meta_.attend_until = Tensor(attend_until_.tensor.data, DType::i32, {rows});
  meta_.n_seqs = n;
  meta_.max_q_len = meta_.max_ctx_len = static_cast<int>(len);
  kv_.k = Tensor(k_.tensor.data, DType::f32, {n, len, heads_, head_dim_});
  kv_.v = Tensor(v_.tensor.data, DType::f32, {n, len, heads_, head_dim_});
  slots_ = Tensor(slot_ids_.tensor.data, DType::i32, {rows});
}

Status check_square_image(const StepImage& im, const VisionConfig& v, bool check_grid) {
  const int side = v.patches_per_side();
  if (check_grid && (im.grid_h != side || im.grid_w != side))
    return invalid_argument("an image of this vision tower is " + std::to_string(side) + " x " + std::to_string(side) +
                            " patches (" + std::to_string(v.image_size) + " pixels a side); got " +
                            std::to_string(im.grid_h) + " x " + std::to_string(im.grid_w));
  const size_t want = size_t{3} * v.image_size * v.image_size;
  if (im.pixels == nullptr || im.pixels->size() != want)
    return invalid_argument("an image must be [3, " + std::to_string(v.image_size) + ", " + std::to_string(v.image_size) +
                            "] pixels (" + std::to_string(want) + " floats); got " +
                            std::to_string(im.pixels == nullptr ? 0 : im.pixels->size()));
  return Status::ok();
}

void unfold_square_patches(const float* image, const VisionConfig& v, float* rows) {
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

void run_vit_layer(Backend& b, const VitLayer& L, VitAct act, float eps, const Tensor& x, const VitBuffers& buf,
                   const VitAttention& attn) {
  const QkvLayout layout = attn.layout();
  auto norm = [&](const OwnedTensor& w, const OwnedTensor& bias) {
    if (L.rms_norm) b.rms_norm(x, w.tensor, eps, buf.normed);
    else b.layer_norm(x, w.tensor, bias.tensor, eps, buf.normed);
  };
  norm(L.ln1_w, L.ln1_b);
  b.matmul(buf.normed, L.qkv.tensor, L.qkv_b.tensor, buf.qkv);
  if (!L.q_norm.tensor.empty()) b.qk_head_norm(buf.qkv, layout, L.q_norm.tensor, L.k_norm.tensor, L.qk_eps);
  b.write_kv(attn.kv(), buf.qkv, layout, attn.slots());
  b.attention(buf.qkv, layout, attn.kv(), attn.meta(), 1.0f / std::sqrt(static_cast<float>(layout.head_dim)), buf.attn);
  b.matmul(buf.attn, L.o.tensor, L.o_b.tensor, buf.normed);
  b.add(x, buf.normed);
  norm(L.ln2_w, L.ln2_b);
  b.matmul(buf.normed, L.fc1.tensor, L.fc1_b.tensor, buf.mlp);
  vit_activate(b, act, buf.mlp);
  b.matmul(buf.mlp, L.fc2.tensor, L.fc2_b.tensor, buf.normed);
  b.add(x, buf.normed);
}

}  // namespace brigade
