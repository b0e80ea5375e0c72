// InternVL's image preprocessing (InternVLProcessor over GotOcr2ImageProcessor): a decoded Image
// to the tiles the InternViT tower reads (models/internvl_vision.h), as transformers 5's PIL
// backend computes them:
//   p = GotOcr2ImageProcessorPil(**preprocessor_config)(images=pil_image, crop_to_patches=True)
//   p["pixel_values"]  float32 [n_tiles, 3, tile, tile];  p["num_patches"] [n_tiles]
// InternVLProcessor passes crop_to_patches=True whatever preprocessor_config.json says (its
// images_kwargs default outranks the image processor's own attribute), so the -hf checkpoints'
// "crop_to_patches": false does not stop the tiling; brigade tiles likewise. The steps:
//   1. convert_to_rgb (do_convert_rgb): transparency composited over white (image_processor.h);
//   2. the grid: among the (cols, rows) with min_patches <= cols * rows <= max_patches, sorted by
//      their product, the one whose cols / rows is closest to the image's width / height; on a
//      tie the later one when the image's area exceeds half the grid's pixels
//      (get_optimal_tiled_canvas);
//   3. the image resized (Pillow-exact, image_resize.h) to (cols * tile) x (rows * tile) and cut
//      into its tiles row by row; with more than one tile, a thumbnail (the image resized to tile x
//      tile) after them;
//   4. rescale and normalize as image_processor.h's preprocess.
// Each tile is then (tile / patch)^2 patches and becomes image_seq_length tokens; an image of T
// tiles is `<img>` + T * image_seq_length `<IMG_CONTEXT>` + `</img>` in the prompt
// (InternVLProcessor.replace_image_token). The remote-code checkpoints (InternVLChatModel) have no
// preprocessor_config.json: vLLM's InternVLProcessor builds the same tiles from config.json's
// force_image_size, min_dynamic_patch, max_dynamic_patch, use_thumbnail and dynamic_image_size
// with ImageNet's mean / std and bicubic resizes (its torchvision ToTensor divides by 255 where
// transformers multiplies by 1/255: the last bit of a pixel value may differ).
#pragma once

#include <span>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/image.h"
#include "models/image_processor.h"
#include "models/qwen_image_processor.h"

namespace brigade {

struct InternVLImageProcessorConfig {
  std::string image_processor_type = "GotOcr2ImageProcessor";
  int tile = 384;              // size {height, width} (square): GotOcr2's class default; the checkpoints say 448
  int min_tiles = 1;           // min_patches
  int max_tiles = 12;          // max_patches (1: one tile, the image resized to it)
  bool use_thumbnail = true;   // GotOcr2 always adds it to a tiled image; vLLM reads use_thumbnail
  // The steps shared with image_processor.h (resample, rescale, normalize, convert_rgb), with
  // GotOcr2's defaults: BICUBIC and OpenAI CLIP's mean / std (the checkpoints give ImageNet's).
  ImageProcessorConfig steps = {.resample = Resample::bicubic,
                                .image_mean = {0.48145466, 0.4578275, 0.40821073},
                                .image_std = {0.26862954, 0.26130258, 0.27577711}};
};

// Reads preprocessor_config.json (or a processor_config.json's "image_processor"). Errors name
// the field: unsupported for another image_processor_type (GotOcr2ImageProcessor, its Fast and
// Pil names), a size that is not square {height, width}; corrupt for min_patches / max_patches
// outside 1 <= min <= max <= 64, and parse_image_processor_config's.
Expected<InternVLImageProcessorConfig> parse_internvl_image_processor_config(const nlohmann::json& j);

// The remote layout's processor from its config.json (see the top); tile_default is the tower's
// image_size (force_image_size overrides it).
Expected<InternVLImageProcessorConfig> internvl_chat_image_processor(const nlohmann::json& config, int tile_default);

// get_optimal_tiled_canvas: the (cols, rows) of tiles for an image of height x width.
std::pair<int, int> internvl_tile_grid(int height, int width, int tile, int min_tiles, int max_tiles);
// The tiles an image of height x width becomes (the thumbnail included).
int internvl_n_tiles(int height, int width, const InternVLImageProcessorConfig& config);

// The image's tiles, [n_tiles, 3, tile, tile] f32, as grid (n_tiles * tile / patch) x (tile /
// patch) patches (models/internvl_vision.h's layout). `image` must hold decoded pixels.
PatchedImage preprocess_internvl(const Image& image, const InternVLImageProcessorConfig& config, int patch);

// The processor of the model at `model_path` (a directory, or a file in it) whose tower takes
// tile x tile tiles: its preprocessor_config.json (or processor_config.json), else, for an
// InternVLChatModel, its config.json's fields. not_found without either; the parse errors
// prefixed with the file's path; invalid_argument when the file's tile is not the tower's.
Expected<InternVLImageProcessorConfig> model_internvl_image_processor(const std::string& model_path, int tile);

// decode_image then preprocess_internvl.
Expected<PatchedImage> internvl_image_pixels(std::span<const uint8_t> bytes, const InternVLImageProcessorConfig& config,
                                             int patch);

}  // namespace brigade
