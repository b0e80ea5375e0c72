// Internal to models/: the per-encode scratch the fixed-size ViT towers share (ClipVision,
// Gemma3Vision, InternVision; Gemma 4's tower sizes its own per image, the Qwen2-VL family's
// QwenVision per call). A pass holds up to max_images images (InternVL: tiles) of `positions`
// rows each, as many as kVitRowsPerPass rows allow and at least one: their patch rows, the state
// and the layer buffers (models/vit_layer.h) for max_images * positions rows, and the attention
// laid out for that many images. A tower keeps one beside the buffers only it needs, allocates it
// at its first encode, and walks its images in passes (each_pass).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/backend.h"
#include "core/status.h"
#include "models/step_inputs.h"
#include "models/vision_config.h"
#include "models/vit_layer.h"

namespace brigade {

// Position rows per encoder pass: one 896-pixel Gemma 3 image (64 x 64 patches), or as many
// smaller images (577 rows for a 336-pixel CLIP-L/14 one, 1025 for a 448-pixel InternViT tile)
// as fit. Bounds the scratch (about 45 KB per row for the 400M SigLIP's widths).
constexpr int64_t kVitRowsPerPass = 4096;

struct VitScratch {
  int max_images = 0;     // images per pass; 0 until allocate()
  int64_t positions = 0;  // rows per image
  // [rows, patch width] the images' patch rows; [rows, h] the state x, normed and attn; [rows, 3 h]
  // qkv; [rows, intermediate] mlp (rows = max_images * positions).
  OwnedTensor patches, x, normed, qkv, attn, mlp;
  VitAttention attention;

  bool allocated() const { return max_images > 0; }
  int64_t rows() const { return max_images * positions; }

  // Sizes the scratch for images of `positions_per_image` rows of the tower v (its hidden,
  // intermediate and patch widths, its heads).
  Status allocate(Backend& b, const VisionConfig& v, int64_t positions_per_image) {
    positions = positions_per_image;
    max_images = static_cast<int>(std::max<int64_t>(1, kVitRowsPerPass / positions));
    const int64_t n = rows(), h = v.hidden_size;
    for (auto [dst, cols] : {std::pair{&patches, v.patch_width()}, {&x, h}, {&normed, h}, {&qkv, 3 * h}, {&attn, h},
                             {&mlp, int64_t{v.intermediate_size}}}) {
      BRIGADE_ASSIGN_OR_RETURN(*dst, alloc_tensor(b, DType::f32, n, cols));
    }
    return attention.allocate(b, max_images, positions, v.n_heads, v.head_dim());
  }

  // The layer buffers of a pass's first `n_rows` rows.
  VitBuffers layer_buffers(int64_t n_rows) const {
    return {normed.tensor.rows(0, n_rows), qkv.tensor.rows(0, n_rows), attn.tensor.rows(0, n_rows),
            mlp.tensor.rows(0, n_rows)};
  }

  // pass(first, n) (a Status) over images [first, first + n), in order over [0, n_images) with n up
  // to max_images; the first error stops the walk and is returned.
  template <typename Pass>
  Status each_pass(size_t n_images, Pass pass) const {
    BRIGADE_CHECK(allocated(), "ViT scratch: allocate() before each_pass()");
    for (size_t first = 0; first < n_images; first += static_cast<size_t>(max_images)) {
      const int n = static_cast<int>(std::min(n_images - first, static_cast<size_t>(max_images)));
      BRIGADE_RETURN_IF_ERROR(pass(first, n));
    }
    return Status::ok();
  }
};

}  // namespace brigade
