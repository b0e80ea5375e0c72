// SchedulerPolicy with images (a model with a vision tower: Gemma 3, the Qwen2-VL family; docs/architecture.md
// "Images"): where a prompt's images lie, chunks that split only images that attend causally
// (the Qwen2-VL family's; never Gemma 3's), and prefix-cache keys that tell one image from
// another.
#include <xxhash.h>

#include <algorithm>
#include <climits>

#include "actors/scheduler/policy.h"
#include "models/image.h"
#include "models/mrope.h"

namespace brigade {

int SchedulerPolicy::image_token_count(const SeqImage& im) const {
  if (limits_.image_merge <= 0) return limits_.tokens_per_image;
  if (limits_.image_anyres.on()) return anyres_tokens(limits_.image_anyres, im.grid_h, im.grid_w);
  return (im.grid_h / limits_.image_merge) * (im.grid_w / limits_.image_merge + (limits_.image_rows() ? 1 : 0)) +
         limits_.image_extra_tokens;
}

namespace {

// The id token j of a Pixtral image of `tokens` tokens in rows of `cols` image tokens holds
// (PixtralProcessor.replace_image_token): image_token, image_break_token after each row, the last
// break image_end_token.
int32_t row_layout_token(int j, int cols, int tokens, const SchedulerLimits& l) {
  if ((j + 1) % (cols + 1) != 0) return l.image_token;
  return j + 1 == tokens ? l.image_end_token : l.image_break_token;
}

// The end of the image tokens from i (an image_token): the run of image tokens, and for Pixtral
// its breaks and its end token.
size_t image_run_end(const std::vector<int32_t>& prompt, size_t i, const SchedulerLimits& l) {
  size_t j = i;
  if (!l.image_rows()) {
    while (j < prompt.size() && prompt[j] == l.image_token) ++j;
    return j;
  }
  while (j < prompt.size() && (prompt[j] == l.image_token || prompt[j] == l.image_break_token)) ++j;
  return j < prompt.size() && prompt[j] == l.image_end_token ? j + 1 : j;
}

// The request's image k as the scheduler checks it: pixels of the right size (fixed) or a grid
// of whole merge blocks whose patch rows the pixels fill (dynamic).
Status check_image(const SeqImage& im, size_t k, const SchedulerLimits& l) {
  const std::string which = "image " + std::to_string(k);
  const size_t got = im.pixels == nullptr ? 0 : im.pixels->size();
  if (l.image_merge <= 0) {
    const size_t n_floats = size_t{3} * static_cast<size_t>(l.image_size) * static_cast<size_t>(l.image_size);
    if (got != n_floats)
      return invalid_argument(which + " must be [3, " + std::to_string(l.image_size) + ", " + std::to_string(l.image_size) +
                              "] pixels (" + std::to_string(n_floats) + " floats); got " + std::to_string(got));
    return Status::ok();
  }
  if (l.image_anyres.on()) {  // LLaVA-NeXT / OneVision: the image's size in pixels, its base tile and tiles
    BRIGADE_RETURN_IF_ERROR(check_anyres_size(l.image_anyres, im.grid_h, im.grid_w, which));
    const int tiles = 1 + anyres_layout(l.image_anyres, im.grid_h, im.grid_w).tiles(), s = l.image_anyres.tile;
    const size_t want = size_t{3} * static_cast<size_t>(s) * static_cast<size_t>(s) * static_cast<size_t>(tiles);
    if (got != want)
      return invalid_argument(which + " of " + std::to_string(im.grid_h) + " x " + std::to_string(im.grid_w) +
                              " pixels must be its base tile and " + std::to_string(tiles - 1) + " tiles, [" +
                              std::to_string(tiles) + ", 3, " + std::to_string(s) + ", " + std::to_string(s) + "] (" +
                              std::to_string(want) + " floats); got " + std::to_string(got));
    return Status::ok();
  }
  BRIGADE_RETURN_IF_ERROR(check_merge_grid(im.grid_h, im.grid_w, l.image_merge, which));
  if (l.image_grid > 0 && (im.grid_h != l.image_grid || im.grid_w != l.image_grid))
    return invalid_argument(which + " has a grid of " + std::to_string(im.grid_h) + " x " + std::to_string(im.grid_w) +
                            " patches; this model's vision tower takes " + std::to_string(l.image_grid) + " x " +
                            std::to_string(l.image_grid));
  if (l.image_tile > 0 && (im.grid_w != l.image_tile || im.grid_h % l.image_tile != 0))
    return invalid_argument(which + " has a grid of " + std::to_string(im.grid_h) + " x " + std::to_string(im.grid_w) +
                            " patches; this model's images are columns of tiles of " + std::to_string(l.image_tile) +
                            " x " + std::to_string(l.image_tile) + " patches ((tiles * " + std::to_string(l.image_tile) +
                            ") x " + std::to_string(l.image_tile) + ")");
  if (l.image_grid > 0 && l.image_size > 0) {  // LLaVA, Idefics3's tiles: [3, S, S] pixels (S need not be whole patches)
    const size_t want = size_t{3} * static_cast<size_t>(l.image_size) * static_cast<size_t>(l.image_size);
    if (got != want)
      return invalid_argument(which + " must be [3, " + std::to_string(l.image_size) + ", " +
                              std::to_string(l.image_size) + "] pixels (" + std::to_string(want) + " floats); got " +
                              std::to_string(got));
    return Status::ok();
  }
  const int64_t patches = int64_t{im.grid_h} * im.grid_w;
  if (l.max_image_patches > 0 && patches > l.max_image_patches)
    return invalid_argument(which + " has " + std::to_string(patches) + " patches; the vision tower takes at most " +
                            std::to_string(l.max_image_patches) + " (resize it smaller)");
  if (static_cast<int64_t>(got) != patches * l.image_patch_width)
    return invalid_argument(which + " of " + std::to_string(im.grid_h) + " x " + std::to_string(im.grid_w) +
                            " patches must be " + std::to_string(patches * l.image_patch_width) + " floats (" +
                            std::to_string(l.image_patch_width) + " per patch); got " + std::to_string(got));
  return Status::ok();
}

}  // namespace

Status SchedulerPolicy::find_images(Seq& s) const {
  const auto& prompt = s.req.prompt;
  s.images.clear();
  s.image_hashes.clear();
  s.image_tokens.clear();
  if (!limits_.takes_images()) {
    if (!s.req.images.empty()) return unsupported("this model takes text only: no vision tower runs here (send no images)");
    return Status::ok();
  }
  for (size_t k = 0; k < s.req.images.size(); ++k) BRIGADE_RETURN_IF_ERROR(check_image(s.req.images[k], k, limits_));
  // Runs of the image token, each one image's placeholders (the processor writes begin- and
  // end-of-image tokens around them, so two images never touch), except fixed-size images',
  // which may (PaliGemmaProcessor writes its images' runs one after another): a run longer than
  // its image's count ends there, and the next image's begins.
  size_t n_runs = 0;
  for (size_t i = 0; i < prompt.size();) {
    if (prompt[i] != limits_.image_token) {
      ++i;
      continue;
    }
    size_t j = image_run_end(prompt, i, limits_);
    const size_t k = n_runs++;
    if (k < s.req.images.size()) {
      SeqImage im = s.req.images[k];
      im.position = static_cast<int32_t>(i);
      const int t = image_token_count(im);
      if (limits_.image_merge <= 0 && j - i > static_cast<size_t>(t)) j = i + static_cast<size_t>(t);
      if (static_cast<int>(j - i) != t)
        return invalid_argument("the prompt has a run of " + std::to_string(j - i) + " image tokens at position " +
                                std::to_string(i) + "; image " + std::to_string(k) + " is exactly " + std::to_string(t) +
                                " image tokens");
      for (int n = 0, cols = im.grid_w / std::max(1, limits_.image_merge); limits_.image_rows() && n < t; ++n)
        if (const int32_t want = row_layout_token(n, cols, t, limits_); prompt[i + static_cast<size_t>(n)] != want)
          return invalid_argument("image " + std::to_string(k) + " at position " + std::to_string(i) + ": token " +
                                  std::to_string(n) + " is " + std::to_string(prompt[i + static_cast<size_t>(n)]) +
                                  " where its layout (rows of " + std::to_string(cols) + " image tokens " +
                                  std::to_string(limits_.image_token) + ", each then " +
                                  std::to_string(limits_.image_break_token) + ", the last " +
                                  std::to_string(limits_.image_end_token) + ") puts " + std::to_string(want));
      s.images.push_back(std::move(im));
      s.image_tokens.push_back(t);
    }
    i = j;
  }
  if (n_runs != s.req.images.size())
    return invalid_argument("the prompt has " + std::to_string(n_runs) + " image(s) of image tokens but the request " +
                            std::to_string(s.req.images.size()) + " image(s)");
  for (size_t k = 0; k < s.images.size(); ++k) {
    if (!limits_.images_split() && s.image_tokens[k] > limits_.max_step_tokens)
      return invalid_argument("image " + std::to_string(k) + " takes " + std::to_string(s.image_tokens[k]) +
                              " tokens, which must run in one step, but a step holds " +
                              std::to_string(limits_.max_step_tokens) + " (max_step_tokens)");
    const SeqImage& im = s.images[k];
    uint64_t h = XXH3_64bits(im.pixels->data(), im.pixels->size() * sizeof(float));
    if (limits_.image_merge > 0) h = XXH3_64bits_withSeed(&im.grid_h, sizeof(im.grid_h), h ^ static_cast<uint64_t>(im.grid_w));
    s.image_hashes.push_back(h);
  }
  return Status::ok();
}

int SchedulerPolicy::chunk_within_images(const Seq& s, int n) const {
  if (const int prompt = static_cast<int>(s.req.prompt.size()); limits_.prompt_whole && s.n_scheduled < prompt)
    return n >= prompt - s.n_scheduled ? prompt - s.n_scheduled : 0;
  if (limits_.images_split()) return n;
  const int start = s.n_scheduled, end = start + n;
  for (size_t k = 0; k < s.images.size(); ++k) {
    const int p = s.images[k].position;
    if (p < end && end < p + s.image_tokens[k]) return std::max(0, p - start);  // ends inside: stop before it, or wait
  }
  return n;
}

bool SchedulerPolicy::runs_alone(const Seq& s, int n) const {
  return limits_.prompt_alone_beyond > 0 && s.n_scheduled == 0 && n > limits_.prompt_alone_beyond;
}

int SchedulerPolicy::image_safe_prefix(const Seq& s, int n) const {
  if (limits_.images_split()) return n;
  for (size_t k = 0; k < s.images.size(); ++k)
    if (s.images[k].position < n && n < s.images[k].position + s.image_tokens[k]) return s.images[k].position;
  return n;
}

void SchedulerPolicy::plan_images(const Seq& s, SeqWorkItem& w) const {
  const int end = w.start_pos + static_cast<int>(w.tokens.size()) - w.n_draft;
  for (size_t k = 0; k < s.images.size(); ++k) {
    const SeqImage& im = s.images[k];
    const int t = s.image_tokens[k];
    if (im.position + t <= w.start_pos) {  // wholly before the chunk: M-RoPE shifts what follows
      if (limits_.image_mrope())
        w.rope_delta += mrope_image_shift(im.grid_h / limits_.image_merge, im.grid_w / limits_.image_merge);
    } else if (!w.use_last_sampled && im.position < end &&
               (limits_.images_split() || (im.position >= w.start_pos && im.position + t <= end))) {
      w.images.push_back(im);  // the whole image, or (images_split) the part of it in the chunk
    }
  }
}

// Image token j of an image becomes INT32_MIN + a 30-bit mix of the image's pixel hash and j:
// negative like a LoRA-salted first token, but far below any (LoRA salts stay above
// -(max_loras * vocab)), and not at position 0, where the LoRA salt lives. Pages whose tokens hold
// the same images at the same positions share; any other image makes other keys, here and in
// the hash chains of the HiCache tiers.
void SchedulerPolicy::key_images(const Seq& s, std::vector<int32_t>& key) const {
  for (size_t k = 0; k < s.images.size(); ++k)
    for (int j = 0; j < s.image_tokens[k]; ++j) {
      const size_t pos = static_cast<size_t>(s.images[k].position + j);
      if (pos == 0 || pos >= key.size()) continue;
      uint64_t x = s.image_hashes[k] + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(j + 1);
      x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
      key[pos] = static_cast<int32_t>(INT32_MIN + static_cast<int64_t>((x ^ (x >> 29)) & 0x3FFFFFFF));
    }
}

}  // namespace brigade
