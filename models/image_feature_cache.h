// Internal to models/: the encoder cache of the images split over several steps. A Qwen2-VL
// family image attends causally, so chunked prefill may cut its tokens over several steps
// (StepImage::first); the tower encodes the whole image once, at the first of those steps, and
// the later ones take their rows of its features from here (as vLLM's encoder cache does).
// Entries are the features of whole images, keyed by the pixels' XXH3 and the grid; the model
// drops one when a step reaches the image's last token, and the least recently used ones when a
// new image needs room (a sequence cancelled in the middle of an image). A miss only costs time:
// the model encodes the image again.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/status.h"
#include "core/tensor.h"
#include "models/model.h"

namespace brigade {

struct ImageKey {
  uint64_t pixels_hash = 0;
  int32_t grid_h = 0;
  int32_t grid_w = 0;
  bool operator==(const ImageKey&) const = default;
};

// The key of an image's features: XXH3 of its pixels (as floats) and its grid.
ImageKey image_key(const StepImage& image);

class ImageFeatureCache {
 public:
  // Holds at most capacity_rows feature rows in all (one image larger than that is held alone).
  explicit ImageFeatureCache(int64_t capacity_rows = 0) : capacity_rows_(capacity_rows) {}
  void set_capacity(int64_t capacity_rows) { capacity_rows_ = capacity_rows; }

  // The features [rows, hidden] of key, or nullptr; a hit makes it the most recently used.
  const Tensor* find(const ImageKey& key);
  // Starts a step: entries found or inserted from now on are not dropped for room until the next
  // begin_step (the step still reads them), so the cache may then hold more than its capacity.
  void begin_step() { step_start_ = tick_ + 1; }
  // A new entry of [n_rows, cols] `dtype` for key in backend memory (for the caller to fill),
  // after dropping key's old entry and the least recently used ones (of earlier steps) until the
  // rows fit.
  Expected<Tensor> insert(Backend& backend, const ImageKey& key, int64_t n_rows, int64_t cols, DType dtype);
  void erase(const ImageKey& key);

  int64_t rows() const;  // feature rows held now
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    ImageKey key;
    OwnedTensor features;
    uint64_t used = 0;  // tick of the last find or insert
  };
  int64_t capacity_rows_;
  uint64_t tick_ = 0;
  uint64_t step_start_ = 0;  // entries used at or after this tick are this step's
  std::vector<Entry> entries_;  // a handful (images in flight): scanned
};

}  // namespace brigade
