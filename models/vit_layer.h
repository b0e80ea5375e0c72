// Internal to models/: the pre-norm ViT encoder layer that SigLIP (Gemma 3's tower, LLaVA's
// SigLIP towers) and CLIP (LLaVA's) share, over the Backend ops (Backend::supports_vision):
// LayerNorm (layer_norm1), attention with biases (q/k/v fused, out_proj) in which every position
// of an image sees all of them, residual, LayerNorm (layer_norm2), fc1, the activation, fc2,
// residual. VitAttention lays a pass of n images of `len` positions each over the paged
// attention kernel: image i is sequence i, one page of `len` K/V slots, every row attending
// until the image's last position.
#pragma once

#include <cstdint>
#include <string>

#include "core/backend.h"
#include "core/status.h"
#include "models/model.h"
#include "models/vision_config.h"
#include "models/weight_loader.h"

namespace brigade {

enum class VitAct : uint8_t { gelu, gelu_tanh, quick_gelu };

// hidden_act's name (gelu, gelu_pytorch_tanh, quick_gelu) as a VitAct; unsupported naming the
// valid ones otherwise.
Expected<VitAct> vit_act(const std::string& name);
void vit_activate(Backend& b, VitAct act, const Tensor& x);

struct VitLayer {
  OwnedTensor ln1_w, ln1_b, qkv, qkv_b, o, o_b, ln2_w, ln2_b, fc1, fc1_b, fc2, fc2_b;
  // InternViT (models/internvl_vision.h): RMSNorm in place of both LayerNorms (ln*_b unused), and
  // q and k RMS-normed each over its whole projection by q_norm / k_norm [hidden] with qk_eps
  // (empty: no qk norm). Biases may be empty (none).
  bool rms_norm = false;
  OwnedTensor q_norm, k_norm;
  float qk_eps = 1e-6f;
};

// The layer under `prefix` ("vision_tower.encoder.layers.3."): layer_norm{1,2}.{weight,bias},
// self_attn.{q,k,v,out}_proj.{weight,bias}, mlp.fc{1,2}.{weight,bias}, of width h and MLP width
// inter; matrices as stored, vectors f32.
Status load_vit_layer(WeightLoader& w, const std::string& prefix, int64_t h, int64_t inter, VitLayer& L);

// The attention layout of a pass and its buffers, sized once for up to max_images images of up
// to max_len positions (allocate), then planned per pass (plan: n images of len positions).
class VitAttention {
 public:
  Status allocate(Backend& b, int max_images, int64_t max_len, int heads, int head_dim);
  void plan(int n, int64_t len);
  const AttentionMeta& meta() const { return meta_; }
  const KvLayer& kv() const { return kv_; }
  const Tensor& slots() const { return slots_; }
  QkvLayout layout() const { return {heads_, heads_, head_dim_}; }

 private:
  Backend* b_ = nullptr;
  int heads_ = 0, head_dim_ = 0;
  OwnedTensor q_start_, ctx_len_, block_table_, attend_until_, slot_ids_, k_, v_;
  AttentionMeta meta_;
  KvLayer kv_;
  Tensor slots_;
};

// A pass's work buffers for rows [0, x.dim(0)): normed and attn [rows, h], qkv [rows, 3 h], mlp
// [rows, inter].
struct VitBuffers {
  Tensor normed, qkv, attn, mlp;
};

// image [3, S, S] (S = v.image_size) -> rows [n_patches, 3 p p] starting at `rows`: patch (py, px)
// is row py * side + px, its pixels c-major then y then x, as the patch convolution's weight
// [hidden, 3, p, p] flattens.
void unfold_square_patches(const float* image, const VisionConfig& v, float* rows);

// Whether im holds a [3, S, S] image (S = v.image_size) of v.patches_per_side() patches a side
// (its grid unset: 0 x 0, for Gemma 3's fixed-size images, when !check_grid); invalid_argument
// naming the sizes otherwise.
Status check_square_image(const StepImage& im, const VisionConfig& v, bool check_grid);

// x [rows, h] through one layer, in place (VitAttention planned for these rows).
void run_vit_layer(Backend& b, const VitLayer& L, VitAct act, float eps, const Tensor& x, const VitBuffers& buf,
                   const VitAttention& attn);

}  // namespace brigade
