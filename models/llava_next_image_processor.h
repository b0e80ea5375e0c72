// LLaVA-NeXT's image preprocessing (LlavaNextImageProcessor, and LLaVA-OneVision's
// LlavaOnevisionImageProcessor, which tiles a lone image the same way): a decoded Image to the tiles the
// CLIP / SigLIP tower reads (models/clip_vision.h with VisionConfig::anyres), as transformers 5's
// PIL backend computes them:
//   p = LlavaNextImageProcessorPil(**preprocessor_config)(images=pil_image)
//   p["pixel_values"][0]  float32 [1 + tiles, 3, S, S];  p["image_sizes"][0]  (height, width)
// The steps (models/anyres.h for the choice of pinpoint):
//   1. convert_to_rgb (do_convert_rgb): transparency composited over white (image_processor.h);
//   2. the best pinpoint (select_best_resolution) for the image's height x width; the image
//      resized (Pillow-exact, image_resize.h) to fit it keeping its aspect (get_patch_output_size:
//      the constrained side exactly, the other ceil(side * scale)), then padded with zeros to
//      the pinpoint, centred (the odd pixel after), and cut into S x S tiles row by row;
//   3. the base tile in front: the image resized to S x S, aspect not kept;
//   4. each tile rescaled and normalized as image_processor.h's preprocess (its resize to the
//      shortest edge S and center crop S leave an S x S tile as it is).
// The image's grid is its height x width in pixels (transformers' image_sizes): the model derives
// the tiles' layout and the unpadding from it.
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/anyres.h"
#include "models/image.h"
#include "models/image_processor.h"
#include "models/qwen_image_processor.h"

namespace brigade {

struct LlavaNextImageProcessorConfig {
  std::string image_processor_type = "LlavaNextImageProcessor";
  bool onevision = false;  // LlavaOnevisionImageProcessor: its defaults, and several images' base-only form
  AnyresGrid grid;  // tile: the S of the tiles; side unused here; pinpoints: image_grid_pinpoints
  // The steps shared with image_processor.h, with LlavaNextImageProcessor's defaults (CLIP's):
  // bicubic, OpenAI CLIP's mean / std.
  ImageProcessorConfig steps;
};

// Reads preprocessor_config.json (or a processor_config.json's "image_processor"). Errors name
// the field: unsupported for another image_processor_type (LlavaNextImageProcessor,
// LlavaOnevisionImageProcessor, their Fast and Pil names), corrupt for image_grid_pinpoints that
// are not [height, width] pairs of positive ints (LlavaNextImageProcessor's five llava-v1.6
// pinpoints when absent; LlavaOnevisionImageProcessor's 36, with its size 384 x 384 and no center
// crop), and
// parse_image_processor_config's. `tile` is the tower's image_size: a resize or crop to another
// size, or a pinpoint that is not whole tiles, is refused.
Expected<LlavaNextImageProcessorConfig> parse_llava_next_image_processor_config(const nlohmann::json& j, int tile);

// The processor of the model at `model_path` (a directory, or a file in it) whose tower and
// config.json give `grid`: its preprocessor_config.json (or processor_config.json), else
// LlavaNextImageProcessor's defaults at the tower's size with grid's pinpoints. The parse errors
// prefixed with the file's path; invalid_argument when the file's pinpoints are not config.json's
// (the model lays out the tiles by its own) or its type is not the model's (LLaVA-OneVision's
// processor for a LLaVA-OneVision model, LLaVA-NeXT's for the others).
Expected<LlavaNextImageProcessorConfig> model_llava_next_image_processor(const std::string& model_path,
                                                                         const AnyresGrid& grid);

// The image's base tile and tiles [1 + tiles, 3, S, S] f32, grid_h x grid_w its height x width.
// `image` must hold decoded pixels.
PatchedImage preprocess_llava_next(const Image& image, const LlavaNextImageProcessorConfig& config);

// LLaVA-OneVision's form of an image in a prompt with several (LlavaOnevisionImageProcessor's
// need_patching false): the image padded square (centred, the padding int(image_mean * 255) per
// channel), resized to S x S, rescaled and normalized: [1, 3, S, S], grid 0 x 0 (base only,
// models/anyres.h). `image` must hold decoded pixels.
PatchedImage preprocess_llava_onevision_base(const Image& image, const LlavaNextImageProcessorConfig& config);

// decode_image then preprocess_llava_next.
Expected<PatchedImage> llava_next_image_pixels(std::span<const uint8_t> bytes, const LlavaNextImageProcessorConfig& config);

}  // namespace brigade
