// Mistral 3's image preprocessing (PixtralProcessor over PixtralImageProcessor): a decoded Image
// to the patch rows and grid the Pixtral tower reads (models/qwen_vision.h, VisionKind::pixtral),
// and the image's token layout in the prompt, as transformers 5's PIL backend computes them:
//   p = PixtralImageProcessorPil(**preprocessor_config)(images=pil_image,
//                                 patch_size=patch_size * spatial_merge_size)
//   p["pixel_values"][0]  float32 [3, height, width];  p["image_sizes"] [[height, width]]
// The steps, in transformers' order and precision:
//   1. convert_to_rgb (do_convert_rgb): transparency composited over white (image_processor.h);
//   2. resize (do_resize): an image larger than longest_edge on a side is scaled by
//      max(height, width) / longest_edge (each side floored), then each side is rounded up to a
//      multiple of patch_size * merge_size (a whole number of tokens), with Pillow's filter
//      (image_resize.h): smaller images grow to the next whole token too;
//   3. rescale and normalize as image_processor.h's preprocess;
//   4. the rows of qwen_image_processor.h's patchify_qwen with one frame: [grid_h * grid_w,
//      3 * patch_size^2], each merge x merge block of patches consecutive (the tower merges them).
// The torchvision processor (PixtralImageProcessor in transformers 5, ...Fast in 4.x, the class
// the Hub's Mistral Small 3.1 names) resizes with torchvision and differs in the last bits.
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
#include "models/image_processor.h"
#include "models/image_resize.h"
#include "models/qwen_image_processor.h"

namespace brigade {

// The fields of preprocessor_config.json that the Pixtral processor reads; absent or null keeps
// transformers' class default (below). merge_size is not the file's: it is the model's
// spatial_merge_size (PixtralProcessor multiplies the patch by it before the image processor).
struct PixtralImageProcessorConfig {
  std::string image_processor_type = "PixtralImageProcessor";
  int longest_edge = 1024;  // size {"longest_edge": N}: neither side is larger after the resize
  int patch_size = 16;      // patch_size (an int, or {"height": N, "width": N} with equal sides)
  int merge_size = 1;       // the model's spatial_merge_size
  // The steps Pixtral shares with Gemma 3's processor (image_processor.h): resample, do_resize,
  // do_rescale, rescale_factor, do_normalize, image_mean / image_std (Pixtral's defaults: BICUBIC
  // and OpenAI CLIP's), do_convert_rgb. Its size is unused.
  ImageProcessorConfig steps = {.resample = Resample::bicubic,
                                .image_mean = {0.48145466, 0.4578275, 0.40821073},
                                .image_std = {0.26862954, 0.26130258, 0.27577711}};

  // Both sides of a resized image are multiples of this: one token's pixels.
  int factor() const { return patch_size * merge_size; }
};

// True for PixtralImageProcessor, PixtralImageProcessorFast and PixtralImageProcessorPil.
bool is_pixtral_image_processor_type(const std::string& type);

// Reads preprocessor_config.json (or a processor_config.json, whose "image_processor" object
// holds the same fields) for a model of spatial_merge_size merge_size. Errors name the field:
// corrupt for wrong types and bad values (size without longest_edge in [1, kMaxImageSide],
// patch_size in [1, 128] with equal sides, image_std nonzero); unsupported for another
// image_processor_type and resample other than 2 or 3.
Expected<PixtralImageProcessorConfig> parse_pixtral_image_processor_config(const nlohmann::json& j, int merge_size);

// The (height, width) PixtralImageProcessor resizes a height x width image to (step 2 above).
std::pair<int, int> pixtral_resize(int height, int width, int longest_edge, int factor);

// `image` must hold decoded pixels (decode_image's contract). invalid_argument, without
// do_resize, when the image's sides are not multiples of factor() (the tower would drop
// patches).
Expected<PatchedImage> preprocess_pixtral(const Image& image, const PixtralImageProcessorConfig& config);

// The processor of the model at `model_path` (a directory, or a file in it): its
// preprocessor_config.json, else its processor_config.json (processor_config_file), for a tower
// of patch_size-pixel patches merged merge_size x merge_size. not_found without either file;
// parse_pixtral_image_processor_config's errors prefixed with the file's path; invalid_argument
// when the file's patch_size is not the tower's.
Expected<PixtralImageProcessorConfig> model_pixtral_image_processor(const std::string& model_path, int patch_size,
                                                                    int merge_size);

// decode_image then preprocess_pixtral: a PNG or JPEG file's bytes to the tower's input. Their errors.
Expected<PatchedImage> pixtral_image_pixels(std::span<const uint8_t> bytes, const PixtralImageProcessorConfig& config);

// PixtralProcessor.replace_image_token's ids for an image of grid_h x grid_w patches: per row of
// merged tokens, grid_w / merge image tokens and a break, the last break replaced by the end.
std::vector<int32_t> pixtral_image_tokens(int grid_h, int grid_w, int merge, int32_t image, int32_t image_break,
                                          int32_t image_end);

}  // namespace brigade
