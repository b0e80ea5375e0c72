#include "kvstore/kv_layout.h"

#include <string>
#include <vector>

#include "core/dtype.h"

namespace brigade {

Status KvLayout::validate() const {
  // No layer at all: a model without attention (state-space layers only), whose pages only count
  // positions.
  if (n_layers < 0 || (n_layers > 0 && (n_kv_heads <= 0 || head_dim <= 0)))
    return invalid_argument("KV layout needs n_layers >= 0, and n_kv_heads and head_dim > 0 when it has layers");
  if (n_pages <= 0) return invalid_argument("KV pool needs at least one page (n_pages > 0)");
  if (page_size <= 0 || page_size > 1024)
    return invalid_argument("page_size must be in [1, 1024] (got " + std::to_string(page_size) + ")");
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16 && dtype != DType::i8)
    return invalid_argument(std::string("KV dtype must be f32, bf16, f16 or i8 (got ") + dtype_name(dtype) + ")");
  if (!layer_shapes.empty()) {
    if (layer_shapes.size() != static_cast<size_t>(n_layers))
      return invalid_argument("KV layout: layer_shapes must hold one shape per layer (" + std::to_string(n_layers) +
                              "), or none");
    if (latent) return invalid_argument("KV layout: an MLA (latent) pool has no per-layer shapes");
    for (const KvLayerShape& s : layer_shapes)
      if (s.n_kv_heads <= 0 || s.head_dim <= 0)
        return invalid_argument("KV layout: every layer's n_kv_heads and head_dim must be > 0");
  }
  if (latent && (dtype == DType::i8 || n_kv_heads != 1))
    return invalid_argument("an MLA (latent) KV layout has one row per token (n_kv_heads 1) and a float dtype "
                            "(f32, bf16 or f16; int8 KV is not built for MLA)");
  return Status::ok();
}

Expected<KvCache> KvCache::allocate(Backend& backend, const KvLayout& layout) {
  BRIGADE_RETURN_IF_ERROR(layout.validate());
  if (!backend.supports_kv_dtype(layout.dtype))
    return unsupported(std::string("the ") + backend.name() + " backend has no " + dtype_name(layout.dtype) +
                       " KV cache; choose another kv.dtype (f32 or bf16 work on every backend)");
  KvCache cache;
  cache.layout_ = layout;
  // One buffer per tensor; `zero` for the scales, whose 0 marks a page that holds no token yet.
  auto make = [&](DType t, std::initializer_list<int64_t> dims, bool zero) -> Expected<Tensor> {
    const Tensor shape(nullptr, t, dims);
    auto buf = backend.allocate(shape.nbytes());
    if (!buf) {
      return out_of_resources("cannot allocate the KV pool (" + std::to_string(layout.total_bytes()) +
                              " bytes for " + std::to_string(layout.n_pages) +
                              " pages): " + buf.status().message() + "; lower kv pages or page size");
    }
    Tensor view = buf->view(t, dims);
    if (zero) {
      const std::vector<char> zeros(view.nbytes(), 0);
      backend.upload(view, zeros.data());
    }
    cache.buffers_.push_back(std::move(*buf));
    return view;
  };
  for (int l = 0; l < layout.n_layers; ++l) {
    KvLayer kv;
    const KvLayerShape shape = layout.layer_shape(l);
    for (Tensor* t : {&kv.k, &kv.v}) {
      if (t == &kv.v && layout.latent) continue;  // MLA: the latent alone
      BRIGADE_ASSIGN_OR_RETURN(*t, make(layout.dtype, {layout.n_pages, layout.page_size, shape.n_kv_heads,
                                                      shape.head_dim}, false));
    }
    if (layout.has_scales()) {
      for (Tensor* t : {&kv.k_scale, &kv.v_scale}) {
        BRIGADE_ASSIGN_OR_RETURN(*t, make(DType::f32, {layout.n_pages, layout.page_size, shape.n_kv_heads}, true));
      }
    }
    cache.layers_.push_back(kv);
  }
  return cache;
}

namespace {

// The checks read_page and write_page share; `what` names the call for the message.
Status check_page_io(const KvLayout& layout, int32_t page, size_t n_bytes, const char* what) {
  if (page < 0 || page >= layout.n_pages)
    return invalid_argument(std::string(what) + ": page " + std::to_string(page) + " is outside the pool [0, " +
                            std::to_string(layout.n_pages) + ")");
  if (n_bytes != layout.page_bytes())
    return invalid_argument(std::string(what) + ": the buffer holds " + std::to_string(n_bytes) +
                            " bytes, a page is " + std::to_string(layout.page_bytes()));
  return Status::ok();
}

// Calls fn(slice, offset) for each page tensor's slice [1, ...] of `page`, in page-bytes order
// (offset = where the slice's bytes start); they must cover exactly n_bytes.
template <class Fn>
void for_each_page_slice(const std::vector<KvLayer>& layers, int32_t page, size_t n_bytes, Fn&& fn) {
  size_t offset = 0;
  for (const KvLayer& layer : layers) {
    for (const Tensor* t : page_tensors(layer)) {
      const Tensor slice = t->rows(page, 1);
      BRIGADE_CHECK(offset + slice.nbytes() <= n_bytes, "page_tensors() and page_bytes() disagree");
      fn(slice, offset);
      offset += slice.nbytes();
    }
  }
  BRIGADE_CHECK(offset == n_bytes, "page_tensors() and page_bytes() disagree");
}

}  // namespace

Status KvCache::read_page(Backend& backend, int32_t page, std::span<std::byte> out) const {
  BRIGADE_RETURN_IF_ERROR(check_page_io(layout_, page, out.size(), "read_page"));
  for_each_page_slice(layers_, page, out.size(),
                      [&](const Tensor& slice, size_t offset) { backend.download(out.data() + offset, slice); });
  return Status::ok();
}

Status KvCache::write_page(Backend& backend, int32_t page, std::span<const std::byte> in) {
  BRIGADE_RETURN_IF_ERROR(check_page_io(layout_, page, in.size(), "write_page"));
  for_each_page_slice(layers_, page, in.size(),
                      [&](const Tensor& slice, size_t offset) { backend.upload(slice, in.data() + offset); });
  return Status::ok();
}

Status KvCache::copy_rows(Backend& backend, int32_t src, int32_t dst, int n_rows) {
  for (int32_t page : {src, dst}) {
    if (page < 0 || page >= layout_.n_pages)
      return invalid_argument("copy_rows: page " + std::to_string(page) + " is outside the pool [0, " +
                              std::to_string(layout_.n_pages) + ")");
  }
  if (src == dst) return invalid_argument("copy_rows: page " + std::to_string(src) + " onto itself");
  if (n_rows < 1 || n_rows > layout_.page_size)
    return invalid_argument("copy_rows: " + std::to_string(n_rows) + " rows of a " + std::to_string(layout_.page_size) +
                            "-token page");
  for (const KvLayer& layer : layers_) {
    for (const Tensor* t : page_tensors(layer)) {
      // A page's slice [1, page_size, ...] is contiguous; its first n_rows token rows lead it.
      const Tensor from = t->rows(src, 1), to = t->rows(dst, 1);
      const size_t bytes = from.nbytes() / static_cast<size_t>(layout_.page_size) * static_cast<size_t>(n_rows);
      backend.copy(Tensor(to.data, DType::u8, {static_cast<int64_t>(bytes)}),
                   Tensor(from.data, DType::u8, {static_cast<int64_t>(bytes)}));
    }
  }
  return Status::ok();
}

std::string kv_fingerprint(std::string_view model_identity, const KvLayout& layout) {
  std::string shapes;  // the layers' own shapes, where they differ (KvLayout::layer_shapes)
  for (const KvLayerShape& s : layout.layer_shapes)
    shapes += (shapes.empty() ? ",shapes=" : "/") + std::to_string(s.n_kv_heads) + "x" + std::to_string(s.head_dim);
  return std::string(model_identity) + "|kv:layers=" + std::to_string(layout.n_layers) +
         ",page=" + std::to_string(layout.page_size) + ",heads=" + std::to_string(layout.n_kv_heads) +
         ",dim=" + std::to_string(layout.head_dim) + shapes + ",dtype=" + dtype_name(layout.dtype) +
         (layout.has_scales() ? "/row-scales" : "") + (layout.latent ? ",latent" : "");  // int8 pages from the per-page-scale scheme differ
}

}  // namespace brigade
