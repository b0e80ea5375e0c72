// SchedulerPolicy with images (a model with a vision tower, Gemma 3; docs/architecture.md
// "Images"): where a prompt's images lie, chunks that never split one, and prefix-cache keys
// that tell one image from another.
#include <xxhash.h>

#include <algorithm>
#include <climits>

#include "actors/scheduler/policy.h"

namespace brigade {

Status SchedulerPolicy::find_images(Seq& s) const {
  const auto& prompt = s.req.prompt;
  const int t = limits_.tokens_per_image;
  s.images.clear();
  s.image_hashes.clear();
  if (t <= 0) {
    if (!s.req.images.empty()) return unsupported("this model takes text only: it has no vision tower (send no images)");
    return Status::ok();
  }
  // Runs of the image token, each one image's placeholders (the processor writes begin- and
  // end-of-image tokens around them, so two images never touch).
  for (size_t i = 0; i < prompt.size();) {
    if (prompt[i] != limits_.image_token) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < prompt.size() && prompt[j] == limits_.image_token) ++j;
    if (static_cast<int>(j - i) != t)
      return invalid_argument("the prompt has a run of " + std::to_string(j - i) + " image tokens at position " +
                              std::to_string(i) + "; an image is exactly " + std::to_string(t) + " image tokens");
    const size_t k = s.images.size();
    if (k < s.req.images.size()) s.images.push_back({static_cast<int32_t>(i), s.req.images[k]});
    else s.images.push_back({static_cast<int32_t>(i), nullptr});
    i = j;
  }
  if (s.images.size() != s.req.images.size())
    return invalid_argument("the prompt has " + std::to_string(s.images.size()) + " image(s) of image tokens but the request " +
                            std::to_string(s.req.images.size()) + " image(s)");
  if (!s.images.empty() && t > limits_.max_step_tokens)
    return invalid_argument("an image takes " + std::to_string(t) + " tokens, which must run in one step, but a step holds " +
                            std::to_string(limits_.max_step_tokens) + " (max_step_tokens)");
  const size_t n_floats = size_t{3} * static_cast<size_t>(limits_.image_size) * static_cast<size_t>(limits_.image_size);
  for (const SeqImage& im : s.images) {
    if (im.pixels == nullptr || im.pixels->size() != n_floats)
      return invalid_argument("an image must be [3, " + std::to_string(limits_.image_size) + ", " +
                              std::to_string(limits_.image_size) + "] pixels (" + std::to_string(n_floats) +
                              " floats); got " + std::to_string(im.pixels == nullptr ? 0 : im.pixels->size()));
    s.image_hashes.push_back(XXH3_64bits(im.pixels->data(), im.pixels->size() * sizeof(float)));
  }
  return Status::ok();
}

int SchedulerPolicy::chunk_within_images(const Seq& s, int n) const {
  const int start = s.n_scheduled, end = start + n, t = limits_.tokens_per_image;
  for (const SeqImage& im : s.images) {
    const int p = im.position;
    if (p < end && end < p + t) return std::max(0, p - start);  // ends inside: stop before it, or wait
  }
  return n;
}

int SchedulerPolicy::image_safe_prefix(const Seq& s, int n) const {
  for (const SeqImage& im : s.images)
    if (im.position < n && n < im.position + limits_.tokens_per_image) return im.position;
  return n;
}

void SchedulerPolicy::plan_images(const Seq& s, SeqWorkItem& w) const {
  if (w.use_last_sampled) return;
  const int end = w.start_pos + static_cast<int>(w.tokens.size()) - w.n_draft;
  for (const SeqImage& im : s.images)
    if (im.position >= w.start_pos && im.position + limits_.tokens_per_image <= end) w.images.push_back(im);
}

// Image token j of an image becomes INT32_MIN + a 30-bit mix of the image's pixel hash and j:
// negative like a LoRA-salted first token, but far below any (LoRA salts stay above
// -(max_loras * vocab)), and not at position 0, where the LoRA salt lives. Pages whose tokens hold
// the same images at the same positions share; any other image makes other keys, here and in
// the hash chains of the HiCache tiers.
void SchedulerPolicy::key_images(const Seq& s, std::vector<int32_t>& key) const {
  for (size_t k = 0; k < s.images.size(); ++k)
    for (int j = 0; j < limits_.tokens_per_image; ++j) {
      const size_t pos = static_cast<size_t>(s.images[k].position + j);
      if (pos == 0 || pos >= key.size()) continue;
      uint64_t x = s.image_hashes[k] + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(j + 1);
      x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
      key[pos] = static_cast<int32_t>(INT32_MIN + static_cast<int64_t>((x ^ (x >> 29)) & 0x3FFFFFFF));
    }
}

}  // namespace brigade
