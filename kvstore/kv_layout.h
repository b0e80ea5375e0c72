// KvLayout: the shape of one paged KV pool (DESIGN.md §5) and the memory that holds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace brigade {

// One layer's K/V row shape in a pool whose layers differ (KvLayout::layer_shapes).
struct KvLayerShape {
  int n_kv_heads = 0;
  int head_dim = 0;
  bool operator==(const KvLayerShape&) const = default;
};

struct KvLayout {
  int n_layers = 0;  // 0: no attention layer (a state-space model; its pages hold no bytes)
  int n_pages = 0;
  int page_size = 16;  // tokens per page
  int n_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::f32;  // f32, bf16, f16, or i8 (int8 with one scale per token and head)
  // MLA (DeepSeek): each token's row is one latent of kv_lora_rank + rope_dim (n_kv_heads 1,
  // head_dim that width) held in K alone; there is no V tensor (attention reads the value from the
  // latent). Halves the pool's bytes against storing the latent twice; float dtypes only.
  bool latent = false;
  // Per-layer K/V shapes where the layers differ (Gemma 4: its full-attention layers' fewer,
  // wider heads beside the sliding layers'): n_layers entries, layer l's pool [n_pages,
  // page_size, layer_shapes[l].n_kv_heads, layer_shapes[l].head_dim]. Empty: every layer is
  // (n_kv_heads, head_dim).
  std::vector<KvLayerShape> layer_shapes;

  bool has_scales() const { return dtype == DType::i8; }
  int n_tensors() const { return latent ? 1 : 2; }  // K and V, or the latent alone
  KvLayerShape layer_shape(int l) const {
    return layer_shapes.empty() ? KvLayerShape{n_kv_heads, head_dim} : layer_shapes[static_cast<size_t>(l)];
  }
  // Bytes of K (or V) for one page of layer l: page_size * n_kv_heads * head_dim * elem.
  size_t page_bytes_per_layer(int l = 0) const {
    const KvLayerShape s = layer_shape(l);
    return static_cast<size_t>(page_size) * static_cast<size_t>(s.n_kv_heads) * static_cast<size_t>(s.head_dim) *
           dtype_size(dtype);
  }
  // Bytes of the K (or V) scales of one page of layer l: page_size * n_kv_heads f32 for int8
  // (one per token and kv head, cpu/kv_int8.h), else 0.
  size_t scale_bytes_per_layer(int l = 0) const {
    return has_scales() ? static_cast<size_t>(page_size) * static_cast<size_t>(layer_shape(l).n_kv_heads) * sizeof(float)
                        : 0;
  }
  // Bytes one page costs across all layers, K and V (the latent alone for MLA), scales included.
  size_t page_bytes() const {
    size_t bytes = 0;
    for (int l = 0; l < n_layers; ++l) bytes += page_bytes_per_layer(l) + scale_bytes_per_layer(l);
    return static_cast<size_t>(n_tensors()) * bytes;
  }
  size_t total_bytes() const { return page_bytes() * static_cast<size_t>(n_pages); }
  Status validate() const;
};

// The tensors of one layer that page bytes hold, in their order within a page (see
// KvCache::read_page). A tensor added to KvLayer that is indexed by page (e.g. per-page
// scales) goes in this list, and its page slice into KvLayout::page_bytes().
// int8 KV: k, v, k_scale, v_scale (a page's int8 bytes mean nothing without its scale rows).
// MLA (KvLayout::latent): k alone.
inline std::vector<const Tensor*> page_tensors(const KvLayer& layer) {
  if (layer.v.empty()) return {&layer.k};
  if (layer.k_scale.empty()) return {&layer.k, &layer.v};
  return {&layer.k, &layer.v, &layer.k_scale, &layer.v_scale};
}

// The fingerprint that roots the page-key chain (kvstore/page_key.h) and guards the disk tier:
// it names the model (`model_identity`: whatever identifies the weights, e.g. architecture,
// parameter count and checkpoint path) and the KV layout (layers, heads, head size, page size,
// dtype, latent or K/V; each layer's heads and head size where they differ), since page bytes are only interchangeable when both agree. n_pages is left out: the
// same pages fit pools of any size.
std::string kv_fingerprint(std::string_view model_identity, const KvLayout& layout);

// The device memory of a KV pool: per layer, k and v [n_pages, page_size, n_kv_heads, head_dim]
// (layer l's own KvLayout::layer_shape)
// and, for int8, k_scale and v_scale [n_pages, page_size, n_kv_heads] f32 (zero: every row empty).
// A page's bytes (read_page/write_page) are its rows of page_tensors() in every layer.
class KvCache {
 public:
  // unsupported when the backend cannot run attention over `layout.dtype` (e.g. int8 on the GPU).
  static Expected<KvCache> allocate(Backend& backend, const KvLayout& layout);

  const KvLayout& layout() const { return layout_; }
  const KvLayer& layer(int i) const { return layers_[static_cast<size_t>(i)]; }

  // Page bytes: the contents of one page across all layers, as the host and disk tiers store
  // them. Layout: for each layer in order, each of its page tensors in order (page_tensors():
  // K, then V), the page's slice [page_size, n_kv_heads, head_dim] as it lies in device memory.
  // `out` / `in` must hold exactly layout().page_bytes() bytes. Both go through Backend
  // download/upload, so they work on any backend; read_page returns once the bytes are on the
  // host, write_page once `in` may be reused. Errors: a page outside [0, n_pages) or a buffer
  // of the wrong size (invalid_argument); nothing is read or written then. Must not be called
  // inside a step (between Backend::begin_step and end_step).
  Status read_page(Backend& backend, int32_t page, std::span<std::byte> out) const;
  Status write_page(Backend& backend, int32_t page, std::span<const std::byte> in);
  // Copies rows [0, n_rows) (token slots) of page src into page dst in every layer and page
  // tensor (K, V, int8 scales) on the device: a prefix-cache match that ends inside a cached page
  // gives a sequence those rows in a page of its own. invalid_argument (nothing copied) for a
  // page outside the pool, src == dst, or n_rows outside [1, page_size]. Not inside a step.
  Status copy_rows(Backend& backend, int32_t src, int32_t dst, int n_rows);

 private:
  KvLayout layout_;
  std::vector<Buffer> buffers_;
  std::vector<KvLayer> layers_;
};

}  // namespace brigade
