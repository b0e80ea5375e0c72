#include "models/image_feature_cache.h"

#include <xxhash.h>

#include <algorithm>

#include "models/step_inputs.h"

namespace brigade {

ImageKey image_key(const StepImage& image) {
  ImageKey key{0, image.grid_h, image.grid_w};
  if (image.pixels != nullptr) key.pixels_hash = XXH3_64bits(image.pixels->data(), image.pixels->size() * sizeof(float));
  return key;
}

const Tensor* ImageFeatureCache::find(const ImageKey& key) {
  for (Entry& e : entries_)
    if (e.key == key) {
      e.used = ++tick_;
      return &e.features.tensor;
    }
  return nullptr;
}

Expected<Tensor> ImageFeatureCache::insert(Backend& backend, const ImageKey& key, int64_t n_rows, int64_t cols, DType dtype) {
  erase(key);
  while (rows() + n_rows > capacity_rows_) {
    const auto lru = std::min_element(entries_.begin(), entries_.end(),
                                      [](const Entry& a, const Entry& b) { return a.used < b.used; });
    if (lru == entries_.end() || lru->used >= step_start_) break;  // none, or all in use by this step
    entries_.erase(lru);
  }
  BRIGADE_ASSIGN_OR_RETURN(OwnedTensor features, alloc_tensor(backend, dtype, n_rows, cols));
  entries_.push_back({key, std::move(features), ++tick_});
  return entries_.back().features.tensor;
}

void ImageFeatureCache::erase(const ImageKey& key) {
  std::erase_if(entries_, [&](const Entry& e) { return e.key == key; });
}

int64_t ImageFeatureCache::rows() const {
  int64_t n = 0;
  for (const Entry& e : entries_) n += e.features.tensor.dim(0);
  return n;
}

}  // namespace brigade
