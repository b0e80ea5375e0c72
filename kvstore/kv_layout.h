// KvLayout: the shape of one paged KV pool (DESIGN.md §5) and the memory that holds it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace brigade {

struct KvLayout {
  int n_layers = 0;
  int n_pages = 0;
  int page_size = 16;  // tokens per page
  int n_kv_heads = 0;
  int head_dim = 0;
  DType dtype = DType::f32;

  // Bytes of K (or V) for one page of one layer: page_size * n_kv_heads * head_dim * elem.
  size_t page_bytes_per_layer() const {
    return static_cast<size_t>(page_size) * static_cast<size_t>(n_kv_heads) *
           static_cast<size_t>(head_dim) * dtype_size(dtype);
  }
  // Bytes one page costs across all layers, K and V.
  size_t page_bytes() const { return 2 * static_cast<size_t>(n_layers) * page_bytes_per_layer(); }
  size_t total_bytes() const { return page_bytes() * static_cast<size_t>(n_pages); }
  Status validate() const;
};

// The device memory of a KV pool: per layer, k and v [n_pages, page_size, n_kv_heads, head_dim].
class KvCache {
 public:
  static Expected<KvCache> allocate(Backend& backend, const KvLayout& layout);

  const KvLayout& layout() const { return layout_; }
  const KvLayer& layer(int i) const { return layers_[static_cast<size_t>(i)]; }

 private:
  KvLayout layout_;
  std::vector<Buffer> buffers_;
  std::vector<KvLayer> layers_;
};

}  // namespace brigade
