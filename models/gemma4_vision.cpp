#include "models/gemma4_vision.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "models/config_json.h"
#include "models/step_inputs.h"

namespace brigade {

using json = nlohmann::json;

namespace {

std::string str(int64_t v) { return std::to_string(v); }

Status positive(const char* key, int v) {
  if (v <= 0) return invalid_argument(std::string("config.json: vision_config.") + key + " must be > 0 (got " + str(v) + ")");
  return Status::ok();
}

// A head's rows (or a norm weight's elements) with its quarters in the order 0, 2, 1, 3
// (gemma4_vision.h): slices of a [heads * head_dim] dimension.
std::vector<Slice> quarter_order(int heads, int head_dim) {
  const int64_t q = head_dim / 4;
  std::vector<Slice> out;
  for (int h = 0; h < heads; ++h)
    for (int part : {0, 2, 1, 3}) out.push_back({int64_t{h} * head_dim + part * q, q});
  return out;
}

}  // namespace

Expected<VisionConfig> read_gemma4_vision(const json& j, int text_vocab) {
  VisionConfig v;
  auto it = j.find("vision_config");
  if (it == j.end() || it->is_null()) return v;
  if (!it->is_object()) return corrupt("config.json: vision_config must be an object");
  const json& c = *it;
  v.kind = VisionKind::gemma4;
  v.hidden_size = 768, v.intermediate_size = 3072, v.n_layers = 16, v.n_heads = 12, v.patch_size = 16, v.merge = 3;
  v.position_table = 10240;
  v.rope_theta = 100.0f;
  int kv_heads = -1, head_dim = -1, out_dims = -1;
  BRIGADE_RETURN_IF_ERROR(read_int(c, "hidden_size", v.hidden_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "intermediate_size", v.intermediate_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_hidden_layers", v.n_layers, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_attention_heads", v.n_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "num_key_value_heads", kv_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "head_dim", head_dim, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "patch_size", v.patch_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "pooling_kernel_size", v.merge, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "position_embedding_size", v.position_table, false));
  BRIGADE_RETURN_IF_ERROR(read_int(c, "output_proj_dims", out_dims, false));
  BRIGADE_RETURN_IF_ERROR(read_float(c, "rms_norm_eps", v.eps));
  BRIGADE_RETURN_IF_ERROR(read_bool(c, "use_clipped_linears", v.clipped_linears));
  BRIGADE_RETURN_IF_ERROR(read_bool(c, "standardize", v.standardize));
  for (auto [key, value] : {std::pair{"hidden_size", v.hidden_size}, {"intermediate_size", v.intermediate_size},
                            {"num_hidden_layers", v.n_layers}, {"num_attention_heads", v.n_heads},
                            {"patch_size", v.patch_size}, {"pooling_kernel_size", v.merge},
                            {"position_embedding_size", v.position_table}})
    BRIGADE_RETURN_IF_ERROR(positive(key, value));
  std::string act = "gelu_pytorch_tanh";
  BRIGADE_RETURN_IF_ERROR(read_string(c, "hidden_activation", act));
  if (act != "gelu_pytorch_tanh")
    return unsupported("config.json: vision_config.hidden_activation '" + act + "' is not supported for Gemma 4's "
                       "vision tower; supported: gelu_pytorch_tanh");
  bool bias = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(c, "attention_bias", bias));
  if (bias) return unsupported("config.json: vision_config.attention_bias = true is not supported for Gemma 4's vision tower");
  if (kv_heads >= 0 && kv_heads != v.n_heads)
    return unsupported("config.json: vision_config.num_key_value_heads (" + str(kv_heads) + ") must equal "
                       "num_attention_heads (" + str(v.n_heads) + ") for Gemma 4's vision tower");
  if (v.hidden_size % v.n_heads != 0 || (head_dim >= 0 && head_dim != v.hidden_size / v.n_heads))
    return unsupported("config.json: vision_config.head_dim must be hidden_size / num_attention_heads (" +
                       str(v.hidden_size) + " / " + str(v.n_heads) + ") for Gemma 4's vision tower");
  if (v.head_dim() % 4 != 0)
    return unsupported("config.json: vision_config.head_dim (" + str(v.head_dim()) + ") must be a multiple of 4 (the "
                       "axial RoPE rotates each half NeoX-style)");
  if (out_dims >= 0 && out_dims != v.hidden_size)
    return unsupported("config.json: vision_config.output_proj_dims (" + str(out_dims) + ") must equal hidden_size");
  if (auto r = c.find("rope_parameters"); r != c.end() && !r->is_null()) {
    if (!r->is_object()) return corrupt("config.json: vision_config.rope_parameters must be an object");
    std::string type = "axial";
    BRIGADE_RETURN_IF_ERROR(read_string(*r, "rope_type", type));
    if (type != "axial")
      return unsupported("config.json: vision_config.rope_parameters.rope_type '" + type + "' is not supported for "
                         "Gemma 4's vision tower; supported: axial");
    BRIGADE_RETURN_IF_ERROR(read_float(*r, "rope_theta", v.rope_theta));
    if (!(v.rope_theta > 0.0f)) return invalid_argument("config.json: vision_config.rope_parameters.rope_theta must be > 0");
  }
  v.image_token = 258880, v.boi_token = 255999, v.eoi_token = 258882;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "image_token_id", v.image_token, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "boi_token_id", v.boi_token, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "eoi_token_id", v.eoi_token, false));
  if (v.image_token < 0 || v.image_token >= text_vocab)
    return invalid_argument("config.json: image_token_id " + str(v.image_token) + " is outside the text vocabulary [0, " +
                            str(text_vocab) + ")");
  return v;
}

Expected<Gemma4Vision::Linear> Gemma4Vision::load_linear(WeightLoader& w, const std::string& prefix, int64_t rows,
                                                         int64_t cols, const std::vector<Slice>& row_order) {
  Linear L;
  const std::string name = prefix + ".linear.weight";
  if (row_order.empty()) {
    BRIGADE_ASSIGN_OR_RETURN(L.w, w.matrix(name, rows, cols));
  } else {
    BRIGADE_ASSIGN_OR_RETURN(L.w, w.fused(std::vector<std::string>(row_order.size(), name),
                                          std::vector<int64_t>(row_order.size(), rows), cols, row_order));
  }
  if (!v_.clipped_linears) return L;
  float b[4];
  const char* keys[4] = {".input_min", ".input_max", ".output_min", ".output_max"};
  for (int i = 0; i < 4; ++i) {
    BRIGADE_ASSIGN_OR_RETURN(b[i], w.scalar_f32(prefix + keys[i]));
  }
  L.in_lo = b[0], L.in_hi = b[1], L.out_lo = b[2], L.out_hi = b[3];
  if (L.in_lo > L.in_hi || L.out_lo > L.out_hi)
    return invalid_argument(prefix + ": a clip range whose min is above its max (input [" + str(L.in_lo) + ", " +
                            str(L.in_hi) + "], output [" + str(L.out_lo) + ", " + str(L.out_hi) + "])");
  // scalar_f32 refuses non-finite values: an infinite bound (the buffers' initial value) is
  // stored as such only by checkpoints that never clip, which leave use_clipped_linears false.
  L.clamp_in = true, L.clamp_out = true;
  return L;
}

Status Gemma4Vision::load(WeightLoader& w, Backend& backend, const VisionConfig& v, int text_hidden) {
  if (backend.activation_dtype() != DType::f32 || !backend.supports_vision() || !backend.supports_altup())
    return unsupported("Gemma 4's vision tower runs on the CPU backend (f32 activations, the vision and v-norm ops); "
                       "backend '" + backend.name() + "' lacks them");
  backend_ = &backend;
  v_ = v;
  text_hidden_ = text_hidden;
  const int64_t h = v.hidden_size, inter = v.intermediate_size, hd = v.head_dim();
  w.quantize_linear(false);
  const std::string t = "vision_tower.";
  BRIGADE_ASSIGN_OR_RETURN(input_proj_, w.matrix(t + "patch_embedder.input_proj.weight", h, v.patch_width()));
  std::vector<int64_t> all_cols(static_cast<size_t>(h));
  std::iota(all_cols.begin(), all_cols.end(), 0);
  BRIGADE_ASSIGN_OR_RETURN(pos_table_, w.gathered_f32({t + "patch_embedder.position_embedding_table"},
                                                      2 * int64_t{v.position_table}, h, {}, all_cols));
  const std::vector<Slice> quarters = quarter_order(v.n_heads, static_cast<int>(hd));
  const std::vector<Slice> norm_quarters = quarter_order(1, static_cast<int>(hd));
  layers_.clear();
  layers_.resize(static_cast<size_t>(v.n_layers));
  for (int l = 0; l < v.n_layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    const std::string at = t + "encoder.layers." + std::to_string(l) + ".";
    auto norm = [&](const std::string& name) { return w.vector_f32({at + name + ".weight"}, {h}); };
    BRIGADE_ASSIGN_OR_RETURN(L.in_norm, norm("input_layernorm"));
    BRIGADE_ASSIGN_OR_RETURN(L.post_attn_norm, norm("post_attention_layernorm"));
    BRIGADE_ASSIGN_OR_RETURN(L.pre_ffw_norm, norm("pre_feedforward_layernorm"));
    BRIGADE_ASSIGN_OR_RETURN(L.post_ffw_norm, norm("post_feedforward_layernorm"));
    auto head_norm = [&](const char* name) {
      const std::string n = at + "self_attn." + name + ".weight";
      return w.vector_f32({n, n, n, n}, {hd, hd, hd, hd}, norm_quarters);
    };
    BRIGADE_ASSIGN_OR_RETURN(L.q_norm, head_norm("q_norm"));
    BRIGADE_ASSIGN_OR_RETURN(L.k_norm, head_norm("k_norm"));
    BRIGADE_ASSIGN_OR_RETURN(L.q, load_linear(w, at + "self_attn.q_proj", h, h, quarters));
    BRIGADE_ASSIGN_OR_RETURN(L.k, load_linear(w, at + "self_attn.k_proj", h, h, quarters));
    BRIGADE_ASSIGN_OR_RETURN(L.v, load_linear(w, at + "self_attn.v_proj", h, h, {}));
    BRIGADE_ASSIGN_OR_RETURN(L.o, load_linear(w, at + "self_attn.o_proj", h, h, {}));
    BRIGADE_ASSIGN_OR_RETURN(L.gate, load_linear(w, at + "mlp.gate_proj", inter, h, {}));
    BRIGADE_ASSIGN_OR_RETURN(L.up, load_linear(w, at + "mlp.up_proj", inter, h, {}));
    BRIGADE_ASSIGN_OR_RETURN(L.down, load_linear(w, at + "mlp.down_proj", h, inter, {}));
  }
  if (v.standardize) {
    for (auto [name, dst] : {std::pair{"std_bias", &std_bias_}, {"std_scale", &std_scale_}}) {
      BRIGADE_ASSIGN_OR_RETURN(const OwnedTensor vec, w.vector_f32({t + name}, {h}));
      dst->resize(static_cast<size_t>(h));
      backend.download(dst->data(), vec.tensor);
    }
  }
  BRIGADE_ASSIGN_OR_RETURN(proj_, w.matrix("embed_vision.embedding_projection.weight", text_hidden, h));
  w.quantize_linear(true);
  BRIGADE_ASSIGN_OR_RETURN(ones_, alloc_tensor(backend, DType::f32, 1, h));
  ones_.tensor = ones_.tensor.reshaped({h});
  const std::vector<float> ones(static_cast<size_t>(h), 1.0f);
  backend.upload(ones_.tensor, ones.data());
  // Gemma4VisionRotaryEmbedding: inv_freq over head_dim / 2 (base^(-2i / (head_dim / 2))), the
  // same frequencies for x (pairs [0, hd / 4)) and y (pairs [hd / 4, hd / 2)).
  rope_ = RopeConfig();
  rope_.rotary_dim = static_cast<int>(hd);
  rope_.sections = {static_cast<int>(hd / 4), static_cast<int>(hd / 4)};
  const int64_t spatial = hd / 2;
  for (int axis = 0; axis < 2; ++axis)
    for (int64_t i = 0; i < spatial; i += 2)
      rope_.inv_freq.push_back(1.0f / std::pow(v.rope_theta, static_cast<float>(i) / static_cast<float>(spatial)));
  backend.synchronize();
  return Status::ok();
}

double Gemma4Vision::flops(int grid_h, int grid_w) const {
  const double p = double{1} * grid_h * grid_w, h = v_.hidden_size, inter = v_.intermediate_size;
  const double tokens = p / (double{1} * v_.merge * v_.merge);
  const double per_layer = 2.0 * p * (4.0 * h * h + 3.0 * h * inter) + 4.0 * h * p * p;
  return 2.0 * p * h * static_cast<double>(v_.patch_width()) + v_.n_layers * per_layer + 2.0 * tokens * h * text_hidden_;
}

Status Gemma4Vision::ensure_scratch(int64_t patches) {
  if (patches <= capacity_) return Status::ok();
  Backend& b = *backend_;
  const int64_t n = patches, h = v_.hidden_size, inter = v_.intermediate_size;
  const int64_t tokens = n / (int64_t{v_.merge} * v_.merge);
  const DType f32 = DType::f32;
  BRIGADE_ASSIGN_OR_RETURN(x_, alloc_tensor(b, f32, n, std::max<int64_t>(h, v_.patch_width())));
  BRIGADE_ASSIGN_OR_RETURN(normed_, alloc_tensor(b, f32, n, h));
  BRIGADE_ASSIGN_OR_RETURN(sep_, alloc_tensor(b, f32, 3 * n, h));
  BRIGADE_ASSIGN_OR_RETURN(qkv_, alloc_tensor(b, f32, n, 3 * h));
  BRIGADE_ASSIGN_OR_RETURN(attn_, alloc_tensor(b, f32, n, h));
  BRIGADE_ASSIGN_OR_RETURN(delta_, alloc_tensor(b, f32, n, h));
  BRIGADE_ASSIGN_OR_RETURN(lin_in_, alloc_tensor(b, f32, n, std::max(h, inter)));
  BRIGADE_ASSIGN_OR_RETURN(gate_, alloc_tensor(b, f32, n, inter));
  BRIGADE_ASSIGN_OR_RETURN(up_, alloc_tensor(b, f32, n, inter));
  BRIGADE_ASSIGN_OR_RETURN(ids_, alloc_tensor(b, DType::i32, 1, 2 * n));
  BRIGADE_ASSIGN_OR_RETURN(planes_, alloc_tensor(b, DType::i32, 1, 2 * n));
  BRIGADE_ASSIGN_OR_RETURN(order_, alloc_tensor(b, DType::i32, 1, 3 * n * v_.n_heads));
  BRIGADE_ASSIGN_OR_RETURN(pooled_, alloc_tensor(b, f32, tokens, h));
  BRIGADE_ASSIGN_OR_RETURN(pooled_normed_, alloc_tensor(b, f32, tokens, h));
  attention_ = VitAttention();
  BRIGADE_RETURN_IF_ERROR(attention_.allocate(b, 1, n, v_.n_heads, v_.head_dim()));
  capacity_ = n;
  return Status::ok();
}

// Gemma4ClippableLinear: clamp the input, x W^T, clamp the output.
void Gemma4Vision::linear(const Linear& L, const Tensor& x, const Tensor& out) {
  Tensor in = x;
  if (L.clamp_in) {
    in = Tensor(lin_in_.tensor.data, DType::f32, {x.dim(0), x.dim(1)});  // x is read again after
    backend_->copy(in, x);
    backend_->clamp(in, L.in_lo, L.in_hi);
  }
  backend_->matmul(in, L.w.tensor, Tensor(), out);
  if (L.clamp_out) backend_->clamp(out, L.out_lo, L.out_hi);
}

Status Gemma4Vision::encode(std::span<const StepImage> images, const Tensor& out) {
  const int k = v_.merge;
  int64_t total = 0;
  for (const StepImage& im : images) {
    if (im.grid_h <= 0 || im.grid_w <= 0 || im.grid_h % k != 0 || im.grid_w % k != 0)
      return invalid_argument("a Gemma 4 image has a grid of " + str(im.grid_h) + " x " + str(im.grid_w) +
                              " patches; each side must be a positive multiple of pooling_kernel_size " + str(k));
    if (std::max(im.grid_h, im.grid_w) > v_.position_table)
      return invalid_argument("a Gemma 4 image has a grid of " + str(im.grid_h) + " x " + str(im.grid_w) +
                              " patches; the tower's position table (position_embedding_size) holds " +
                              str(v_.position_table) + " a side");
    const int64_t patches = int64_t{im.grid_h} * im.grid_w;
    if (im.pixels == nullptr || static_cast<int64_t>(im.pixels->size()) != patches * v_.patch_width())
      return invalid_argument("a Gemma 4 image of " + str(im.grid_h) + " x " + str(im.grid_w) + " patches must be " +
                              str(patches * v_.patch_width()) + " floats; got " +
                              str(im.pixels == nullptr ? 0 : static_cast<int64_t>(im.pixels->size())));
    total += patches / (int64_t{k} * k);
  }
  BRIGADE_CHECK(out.ndim == 2 && out.dim(0) == total && out.dim(1) == text_hidden_,
                "gemma4 vision encode: out [images' tokens, text hidden]");
  int64_t row = 0;
  for (const StepImage& im : images) {
    const int64_t t = int64_t{im.grid_h / k} * (im.grid_w / k);
    BRIGADE_RETURN_IF_ERROR(encode_one(im, out.rows(row, t)));
    row += t;
  }
  return Status::ok();
}

Status Gemma4Vision::encode_one(const StepImage& im, const Tensor& out) {
  Backend& b = *backend_;
  const int gh = im.grid_h, gw = im.grid_w, k = v_.merge;
  const int64_t n = int64_t{gh} * gw, h = v_.hidden_size, hd = v_.head_dim(), heads = v_.n_heads;
  const int64_t pw = v_.patch_width(), tokens = n / (int64_t{k} * k);
  BRIGADE_RETURN_IF_ERROR(ensure_scratch(n));
  auto view = [](const OwnedTensor& o, int64_t rows, int64_t cols) { return Tensor(o.tensor.data, o.tensor.dtype, {rows, cols}); };
  auto upload_ids = [&](const std::vector<int32_t>& ids) {
    const Tensor t(ids_.tensor.data, DType::i32, {static_cast<int64_t>(ids.size())});
    b.upload(t, ids.data());
    return t;
  };
  const Tensor x = view(x_, n, h), normed = view(normed_, n, h), delta = view(delta_, n, h);

  // Gemma4VisionPatchEmbedder: input_proj(2 (pixels - 0.5)) + x_table[x] + y_table[y].
  host_.resize(static_cast<size_t>(n * pw));
  const std::vector<float>& px = *im.pixels;
  for (size_t i = 0; i < host_.size(); ++i) host_[i] = 2.0f * (px[i] - 0.5f);
  const Tensor patches = view(x_, n, pw);  // x_ is wide enough for either
  b.upload(patches, host_.data());
  b.matmul(patches, input_proj_.tensor, Tensor(), normed);
  std::vector<int32_t> pos(static_cast<size_t>(2 * n));
  for (int64_t r = 0; r < n; ++r) {
    pos[static_cast<size_t>(r)] = static_cast<int32_t>(r % gw);                      // x: the patch's column
    pos[static_cast<size_t>(n + r)] = static_cast<int32_t>(v_.position_table + r / gw);  // y's table rows follow x's
  }
  {
    const Tensor ids = upload_ids(pos);
    const Tensor table(pos_table_.tensor.data, DType::f32, {2 * int64_t{v_.position_table}, h});
    b.gather_rows(table, Tensor(ids.data, DType::i32, {n}), x);
    b.gather_rows(table, Tensor(static_cast<int32_t*>(ids.data) + n, DType::i32, {n}), delta);
    b.add(x, delta);  // x_emb + y_emb
    b.add(x, normed);  // hidden + position: the same f32 sum either way round
  }
  // The RoPE's planes: x then y (the patch's column and row); q, k and v are projected apart (each
  // clamps its own input), then laid out as qkv rows (row t: q's heads, k's, v's) by `order`.
  for (int64_t r = 0; r < n; ++r) pos[static_cast<size_t>(n + r)] = static_cast<int32_t>(r / gw);
  const Tensor rope_pos(planes_.tensor.data, DType::i32, {2 * n});
  b.upload(rope_pos, pos.data());
  std::vector<int32_t> order(static_cast<size_t>(3 * n * heads));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < 3 * heads; ++j)
      order[static_cast<size_t>(t * 3 * heads + j)] = static_cast<int32_t>((j / heads) * n * heads + t * heads + j % heads);
  const Tensor order_ids(order_.tensor.data, DType::i32, {3 * n * heads});
  b.upload(order_ids, order.data());
  attention_.plan(1, n);  // the one image is sequence 0: every patch sees every patch
  const QkvLayout layout = attention_.layout();
  const Tensor qkv = view(qkv_, n, 3 * h), attn = view(attn_, n, h), sep = view(sep_, 3 * n, h);
  const Tensor gate = view(gate_, n, v_.intermediate_size), up = view(up_, n, v_.intermediate_size);
  const float eps = v_.eps;
  for (const Layer& L : layers_) {
    b.rms_norm(x, L.in_norm.tensor, eps, normed);
    linear(L.q, normed, sep.rows(0, n));
    linear(L.k, normed, sep.rows(n, n));
    linear(L.v, normed, sep.rows(2 * n, n));
    b.gather_rows(sep.reshaped({3 * n * heads, hd}), order_ids, qkv.reshaped({3 * n * heads, hd}));
    b.qk_head_norm(qkv, layout, L.q_norm.tensor, L.k_norm.tensor, eps);
    b.v_head_norm(qkv, layout, eps);
    b.rope(qkv, layout, rope_pos, rope_);
    b.write_kv(attention_.kv(), qkv, layout, attention_.slots());
    b.attention(qkv, layout, attention_.kv(), attention_.meta(), 1.0f, attn);
    linear(L.o, attn, delta);
    b.rms_norm(delta, L.post_attn_norm.tensor, eps, delta);
    b.add(x, delta);
    b.rms_norm(x, L.pre_ffw_norm.tensor, eps, normed);
    linear(L.gate, normed, gate);
    linear(L.up, normed, up);
    b.gelu_tanh_gate(gate, up);
    linear(L.down, gate, delta);
    b.rms_norm(delta, L.post_ffw_norm.tensor, eps, delta);
    b.add(x, delta);
  }
  b.synchronize();
  // Gemma4VisionPooler: the mean of each k x k block (token (ty, tx) of the row-major block
  // grid), times sqrt(hidden); then standardize. On the host, in f32.
  std::vector<float> hidden(static_cast<size_t>(n * h));
  b.download(hidden.data(), x);
  const int tw = gw / k;
  std::vector<float> pooled(static_cast<size_t>(tokens * h), 0.0f);
  const float inv = 1.0f / static_cast<float>(k * k);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t token = (r / gw / k) * tw + (r % gw) / k;
    const float* src = hidden.data() + r * h;
    float* dst = pooled.data() + token * h;
    for (int64_t c = 0; c < h; ++c) dst[c] += src[c] * inv;
  }
  const float root = std::sqrt(static_cast<float>(h));
  for (int64_t i = 0; i < tokens * h; ++i) {
    float f = pooled[static_cast<size_t>(i)] * root;
    if (v_.standardize) f = (f - std_bias_[static_cast<size_t>(i % h)]) * std_scale_[static_cast<size_t>(i % h)];
    pooled[static_cast<size_t>(i)] = f;
  }
  // Gemma4MultimodalEmbedder: RMSNorm without weight, embedding_projection.
  const Tensor p = view(pooled_, tokens, h), pn = view(pooled_normed_, tokens, h);
  b.upload(p, pooled.data());
  b.rms_norm(p, ones_.tensor, eps, pn);
  b.matmul(pn, proj_.tensor, Tensor(), out);
  b.synchronize();  // before the host buffers are freed
  return Status::ok();
}

}  // namespace brigade
