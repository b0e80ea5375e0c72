// Gemma 4's image preprocessing: a decoded Image to the patch rows and grid its vision tower reads
// (models/gemma4_vision.h), as transformers 5's PIL backend computes them:
//   p = Gemma4ImageProcessorPil(**preprocessor_config)(images=pil_image, return_tensors="np")
//   p["pixel_values"][0][:n]       float32 [grid_h * grid_w, 3 * patch_size^2] (the real patches;
//                                  transformers pads to max_soft_tokens * k^2 rows, position -1)
//   p["num_soft_tokens_per_image"] [(grid_h / k) * (grid_w / k)]          (k = pooling_kernel_size)
// The steps, in transformers' order and precision:
//   1. convert_to_rgb (do_convert_rgb): transparency composited over white (image_processor.h);
//   2. resize (do_resize) with Pillow's filter (bicubic by default; image_resize.h) to
//      gemma4_target_size: the aspect-preserving size within max_soft_tokens * k^2 patches, both
//      sides multiples of k * patch_size (unresized when that is the image's own size);
//   3. rescale (float32(double(v) * rescale_factor)) and normalize (off by default: Gemma 4 reads
//      pixels in [0, 1]) as image_processor.h's preprocess;
//   4. patchify: row py * grid_w + px is the patch at patch row py, column px, its values ordered
//      [y][x][channel] (convert_image_to_patches).
// The torchvision backend (Gemma4ImageProcessor) resizes with torch's bicubic, which is not
// Pillow's: its pixel values differ slightly, its sizes and token counts do not.
#pragma once

#include <span>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/image.h"
#include "models/image_processor.h"
#include "models/image_resize.h"
#include "models/qwen_image_processor.h"

namespace brigade {

// The fields of a preprocessor_config.json (or processor_config.json's "image_processor") that
// the Gemma 4 processor reads; absent or null fields keep Gemma4ImageProcessorPil's defaults.
struct Gemma4ImageProcessorConfig {
  int patch_size = 16;
  int pooling_kernel_size = 3;
  int max_soft_tokens = 280;  // one of 70, 140, 280, 560, 1120
  ImageProcessorConfig steps;  // resample, do_resize, do_rescale, rescale_factor, do_normalize, mean, std, do_convert_rgb

  int side_multiple() const { return patch_size * pooling_kernel_size; }
  int max_patches() const { return max_soft_tokens * pooling_kernel_size * pooling_kernel_size; }
};

// processing_gemma4.get_aspect_ratio_preserving_size (double arithmetic as Python's): the
// (height, width) an image of height x width pixels is resized to (a thin image's long side may
// pass kMaxImageSide: preprocess_gemma4 refuses that). invalid_argument for sides outside
// [1, kMaxImageSide] and where transformers raises (a 0 x 0 target).
Expected<std::pair<int, int>> gemma4_target_size(int height, int width, int patch_size, int max_patches,
                                                 int pooling_kernel_size);
// The soft tokens of such an image (Gemma4Processor._get_num_multimodal_tokens).
Expected<int> gemma4_soft_tokens(int height, int width, const Gemma4ImageProcessorConfig& config);

// True for Gemma4ImageProcessor, Gemma4ImageProcessorFast and Gemma4ImageProcessorPil.
bool is_gemma4_image_processor_type(const std::string& type);

// Errors name the field: image_processor_type another processor's (unsupported), max_soft_tokens
// not one of 70, 140, 280, 560, 1120 (transformers' ValueError), patch_size in [1, 64],
// pooling_kernel_size in [1, 8], and image_processor.h's for the shared fields.
Expected<Gemma4ImageProcessorConfig> parse_gemma4_image_processor_config(const nlohmann::json& j);

// The model directory's processor (processor_config_file; the defaults without one), which must
// patch as the tower does: invalid_argument naming the field when its patch_size or
// pooling_kernel_size differ from the tower's.
Expected<Gemma4ImageProcessorConfig> model_gemma4_image_processor(const std::string& model_path, int patch_size,
                                                                  int pooling_kernel_size);

// `image` must hold decoded pixels. invalid_argument when its size is refused, and without
// do_resize when its sides are not multiples of side_multiple().
Expected<PatchedImage> preprocess_gemma4(const Image& image, const Gemma4ImageProcessorConfig& config);

// decode_image then preprocess_gemma4.
Expected<PatchedImage> gemma4_image_pixels(std::span<const uint8_t> bytes, const Gemma4ImageProcessorConfig& config);

}  // namespace brigade
