// The Qwen2-VL family's image preprocessing (Qwen2-VL, Qwen2.5-VL): a decoded Image to the
// flattened patches and grid the vision encoder reads, as transformers 5's PIL backend computes
// them:
//   p = Qwen2VLImageProcessorPil(**preprocessor_config)(images=pil_image, return_tensors="np")
//   p["pixel_values"]    float32 [grid_h * grid_w, 3 * temporal_patch_size * patch_size^2]
//   p["image_grid_thw"]  [[1, grid_h, grid_w]]                                  (in patches)
// The steps, in transformers' order and precision:
//   1. convert_to_rgb (do_convert_rgb): transparency composited over white (image_processor.h);
//   2. resize (do_resize) to smart_resize's size with Pillow's filter (image_resize.h), its two
//      passes in Pillow 13's order (vertical first when the height shrinks by more than twice as
//      many pixels as the width);
//   3. rescale and normalize exactly as the Gemma 3 processor (image_processor.h's preprocess,
//      which this reuses): [3, H, W] float32;
//   4. patchify: the image stands for temporal_patch_size identical frames; with P = patch_size,
//      M = merge_size, T = temporal_patch_size, row ((by * W/(P*M) + bx) * M + my) * M + mx holds
//      the patch at patch row by * M + my, patch column bx * M + mx, its values ordered
//      [c][t][py][px] (so each merge x merge block of patches is M*M consecutive rows).
// Results equal transformers' bit for bit (the tests allow 1e-6). The torchvision backend
// (Qwen2VLImageProcessor in transformers 5, ...Fast in 4.x) gives slightly different values:
// torch's bicubic resize is not Pillow's, and it fuses rescale into normalize.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/image.h"
#include "models/image_resize.h"

namespace brigade {

// pixel_values may hold at most this many floats (400 MB): 3 channels x 2 frames x 2^24 pixels,
// the largest max_pixels a Qwen-VL checkpoint ships (Qwen2-VL's is 12845056). Configs that allow
// more, and images that would make more, are refused.
inline constexpr int64_t kMaxQwenPixelValues = int64_t{3} * 2 * (int64_t{1} << 24);

// The fields of a preprocessor_config.json that the Qwen2-VL processor reads. A field that is
// absent or null keeps transformers' class default (below). The pixel budget is min_pixels /
// max_pixels when the file has them, else size {shortest_edge, longest_edge} (newer files),
// which then must hold both keys: transformers 5's precedence.
struct QwenImageProcessorConfig {
  std::string image_processor_type = "Qwen2VLImageProcessor";
  int64_t min_pixels = 56 * 56;          // resized image holds at least this many pixels...
  int64_t max_pixels = 28 * 28 * 1280;   // ...and at most this many (smart_resize)
  int patch_size = 14;                   // pixels per patch side
  int temporal_patch_size = 2;           // frames per patch (an image is repeated to fill them)
  int merge_size = 2;                    // patches per merged token side
  Resample resample = Resample::bicubic;
  bool do_resize = true;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<double, 3> image_mean = {0.48145466, 0.4578275, 0.40821073};  // OPENAI_CLIP_MEAN
  std::array<double, 3> image_std = {0.26862954, 0.26130258, 0.27577711};  // OPENAI_CLIP_STD
  bool do_convert_rgb = true;
  // GLM-4.1V's processor (Glm4vImageProcessor*): glm4v_smart_resize, and the class's pixel
  // budget defaults size {shortest_edge: 112 * 112, longest_edge: 28 * 28 * 15000}.
  bool glm = false;

  // Both sides of a resized image are multiples of this.
  int factor() const { return patch_size * merge_size; }
  // Floats per row of pixel_values: 3 * temporal_patch_size * patch_size^2.
  int patch_values() const { return 3 * temporal_patch_size * patch_size * patch_size; }
};

// True for Qwen2VLImageProcessor, Qwen2VLImageProcessorFast and Qwen2VLImageProcessorPil (the
// names Qwen2-VL and Qwen2.5-VL checkpoints use), and GLM-4.1V's Glm4vImageProcessor(Pil, Fast),
// the same steps with glm4v_smart_resize.
bool is_qwen_image_processor_type(const std::string& type);

// Reads preprocessor_config.json (or a processor_config.json, whose "image_processor" object
// holds the same fields). Errors name the field and the valid values: corrupt for wrong types
// and bad values (min_pixels in [1, max_pixels], max_pixels at most kMaxQwenPixelValues /
// (3 * temporal_patch_size), patch_size in [1, 128], temporal_patch_size in [1, 4], merge_size
// in [1, 8], image_std nonzero, size {shortest_edge, longest_edge}); unsupported for another
// image_processor_type (a Gemma 3 one included) and resample other than 2 or 3.
Expected<QwenImageProcessorConfig> parse_qwen_image_processor_config(const nlohmann::json& j);
Expected<QwenImageProcessorConfig> parse_qwen_image_processor_config(const std::string& json_text);

// transformers' smart_resize: the (height, width) an image of height x width pixels is resized
// to, both multiples of `factor`, about height * width pixels kept within [min_pixels,
// max_pixels] at the same aspect ratio (Python's round-half-even, floor and ceil in double, as
// transformers has them; the result can exceed max_pixels by the `factor` floor on a thin side).
// invalid_argument for an aspect ratio above 200 (transformers' ValueError) and for arguments
// outside height, width in [1, kMaxImageSide], factor in [1, 1024], min_pixels and max_pixels
// in [1, 2^40].
Expected<std::pair<int, int>> smart_resize(int height, int width, int factor, int64_t min_pixels,
                                           int64_t max_pixels);

// GLM-4.1V's smart_resize (transformers' glm4v image_processing_glm4v.smart_resize, num_frames =
// temporal_factor as its resize passes them): an image with a side below factor is first scaled
// up so that its shorter relative side reaches factor (int() of the product); then as
// smart_resize, but the budget compares temporal_factor * h_bar * w_bar with min_pixels /
// max_pixels, and beta counts temporal_factor frames. Errors as smart_resize's.
Expected<std::pair<int, int>> glm4v_smart_resize(int height, int width, int factor, int temporal_factor,
                                                 int64_t min_pixels, int64_t max_pixels);

// An image as Qwen2-VL's vision encoder takes it: pixels [grid_h * grid_w, patch_values()]
// (row order in the comment at the top); image_grid_thw is [1, grid_h, grid_w].
struct PatchedImage {
  std::vector<float> pixels;
  int grid_h = 0, grid_w = 0;  // in patches; multiples of merge_size
};

// chw [3, height, width] (sides multiples of config.factor(), checked) as the encoder's rows:
// the patchify step above (preprocess_qwen's last), which Pixtral's processor shares with
// temporal_patch_size 1.
PatchedImage patchify_qwen(const std::vector<float>& chw, int height, int width, const QwenImageProcessorConfig& config);

// `image` must hold decoded pixels (decode_image's contract). invalid_argument when
// smart_resize refuses the image's size, when the resized size is above kMaxImageSide on a side
// or makes more than kMaxQwenPixelValues floats, and, without do_resize, when the image's sides
// are not multiples of factor() (transformers fails to reshape it).
Expected<PatchedImage> preprocess_qwen(const Image& image, const QwenImageProcessorConfig& config);

// The path of the model's preprocessor_config.json, else of its processor_config.json, in the
// directory `model_path` is (or is in); empty when it has neither.
std::string processor_config_file(const std::string& model_path);

// The processor of the model at `model_path` (a directory, or a file in it): its
// preprocessor_config.json, else its processor_config.json, else the defaults above.
// parse_qwen_image_processor_config's errors, prefixed with the file's path.
Expected<QwenImageProcessorConfig> model_qwen_image_processor(const std::string& model_path);

// Bounds a deployment sets on the processor file's (vLLM's --mm-processor-kwargs): min_pixels
// and max_pixels replace the file's where > 0; then max_pixels is lowered so that no image has
// more than max_tokens tokens (factor()^2 pixels each; 0 = no such bound), and min_pixels to at
// most max_pixels. invalid_argument when max_tokens cannot hold one token or min exceeds max as
// given.
Status bound_qwen_pixels(QwenImageProcessorConfig& config, int64_t min_pixels, int64_t max_pixels, int64_t max_tokens);

// decode_image then preprocess_qwen: a PNG or JPEG file's bytes to the encoder's input. Their errors.
Expected<PatchedImage> qwen_image_pixels(std::span<const uint8_t> bytes, const QwenImageProcessorConfig& config);

}  // namespace brigade
