#include "kvstore/kv_layout.h"

#include <string>

namespace brigade {

Status KvLayout::validate() const {
  if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0)
    return invalid_argument("KV layout needs n_layers, n_kv_heads and head_dim > 0");
  if (n_pages <= 0) return invalid_argument("KV pool needs at least one page (n_pages > 0)");
  if (page_size <= 0 || page_size > 1024)
    return invalid_argument("page_size must be in [1, 1024] (got " + std::to_string(page_size) + ")");
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    return invalid_argument(std::string("KV dtype must be f32, bf16 or f16 (got ") + dtype_name(dtype) + ")");
  return Status::ok();
}

Expected<KvCache> KvCache::allocate(Backend& backend, const KvLayout& layout) {
  BRIGADE_RETURN_IF_ERROR(layout.validate());
  KvCache cache;
  cache.layout_ = layout;
  const size_t bytes = layout.page_bytes_per_layer() * static_cast<size_t>(layout.n_pages);
  for (int l = 0; l < layout.n_layers; ++l) {
    KvLayer kv;
    for (Tensor* t : {&kv.k, &kv.v}) {
      auto buf = backend.allocate(bytes);
      if (!buf) {
        return out_of_resources("cannot allocate the KV pool (" + std::to_string(layout.total_bytes()) +
                                " bytes for " + std::to_string(layout.n_pages) +
                                " pages): " + buf.status().message() + "; lower kv pages or page size");
      }
      *t = buf->view(layout.dtype, {layout.n_pages, layout.page_size, layout.n_kv_heads, layout.head_dim});
      cache.buffers_.push_back(std::move(*buf));
    }
    cache.layers_.push_back(kv);
  }
  return cache;
}

}  // namespace brigade
