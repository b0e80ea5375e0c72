#include "models/mrope.h"

namespace brigade {

std::vector<int32_t> mrope_positions(const StepBatch& batch, int merge) {
  const size_t n = batch.positions.size();
  std::vector<int32_t> out(3 * n);
  // Row -> the image starting there (grid in tokens), for the images of this step.
  std::vector<int32_t> image_at(n, -1);
  for (size_t k = 0; k < batch.images.size(); ++k) {
    const StepImage& im = batch.images[k];
    if (im.row >= 0 && static_cast<size_t>(im.row) < n) image_at[static_cast<size_t>(im.row)] = static_cast<int32_t>(k);
  }
  const int m = merge > 0 ? merge : 1;
  for (int s = 0; s + 1 < static_cast<int>(batch.q_start.size()); ++s) {
    int32_t delta = batch.rope_delta.empty() ? 0 : batch.rope_delta[static_cast<size_t>(s)];
    const size_t end = static_cast<size_t>(batch.q_start[static_cast<size_t>(s) + 1]);
    for (size_t j = static_cast<size_t>(batch.q_start[static_cast<size_t>(s)]); j < end;) {
      if (image_at[j] < 0) {
        const int32_t p = batch.positions[j] - delta;
        out[j] = out[n + j] = out[2 * n + j] = p;
        ++j;
        continue;
      }
      const StepImage& im = batch.images[static_cast<size_t>(image_at[j])];
      const int32_t h = im.grid_h / m, w = im.grid_w / m;
      // Token `first` sits at row j, so token 0 at position positions[j] - first (an earlier step).
      const int32_t base = batch.positions[j] - im.first - delta;
      for (int32_t i = im.first; i < h * w && j < end; ++i, ++j) {
        out[j] = base;
        out[n + j] = base + i / w;
        out[2 * n + j] = base + i % w;
      }
      delta += mrope_image_shift(h, w);  // the rows after the image (none when it runs on)
    }
  }
  return out;
}

}  // namespace brigade
