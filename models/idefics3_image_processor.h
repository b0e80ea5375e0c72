// Idefics3's and SmolVLM's image preprocessing (Idefics3ImageProcessor, SmolVLMImageProcessor: the
// same steps): a decoded Image to the tiles the tower reads (models/tile_vision.h), as
// transformers 5's PIL backend computes them:
//   p = Idefics3ImageProcessorPil(**preprocessor_config)(images=[[pil_image]], return_row_col_info=True)
//   p["pixel_values"][0]  float32 [n_tiles, 3, tile, tile];  p["rows"][0][0], p["cols"][0][0]
// The steps, each resize Pillow's on uint8 pixels with `resample` (image_resize.h; LANCZOS unless
// the file says otherwise), in Python's float arithmetic (int() truncates; ratios are doubles):
//   1. convert_to_rgb (do_convert_rgb): transparency composited over white (image_processor.h);
//   2. do_resize: the longer side to L = size.longest_edge and the other to int(L / (w / h)) (a
//      wide or square image; int(L * (w / h)) a tall one), made even when odd, at least 1 (so a
//      square image with odd L becomes L wide, L + 1 tall); then, when the longer side exceeds
//      4096 (MAX_IMAGE_SIZE), the same with 4096 and no evening;
//   3. with do_image_splitting (resize_for_vision_encoder, split_images), T = max_image_size.
//      longest_edge, h x w step 2's size: a wide (or square) image's width rounded up to whole
//      tiles, W' = ceil(w / T) * T, its height H' = ceil(int(W' / (w / h)) / T) * T (a tall image
//      likewise with the sides swapped), and the image resized to H' x W'. When a side exceeds T,
//      it is cut into rows = H' / T by cols = W' / T tiles, row by row, and the H' x W' image
//      resized again to T x T follows them (the global tile); otherwise it is the one tile (rows =
//      cols = 0). Without do_image_splitting the image (resized in step 2 or not) is resized to
//      T x T (rows = cols = 0);
//   4. rescale and normalize as image_processor.h's preprocess (IMAGENET_STANDARD mean / std 0.5).
// do_pad pads across a batch; an image's tiles are all T x T, so it changes nothing here. Results equal
// transformers' bit for bit (the tests allow 1e-6).
//
// The prompt text an image becomes (Idefics3Processor.replace_image_token; SmolVLMProcessor's
// get_image_prompt_string is the same), with N = image_seq_len (processor_config.json: (T /
// patch)^2 / scale_factor^2) and <image> x N a run of N image tokens:
//   split (rows, cols > 0): for each row R in 1..rows, for each column C in 1..cols,
//     `<fake_token_around_image><row_R_col_C>` + <image> x N, then "\n" after the row; then
//     "\n<fake_token_around_image><global-img>" + <image> x N + "<fake_token_around_image>";
//   not split: `<fake_token_around_image><global-img>` + <image> x N + `<fake_token_around_image>`.
// The model sees each tile as one image, in pixel_values' order.
//
// transformers' get_number_of_image_patches (the token count the processor reports ahead) rounds
// the original sides up to tiles instead of resize_for_vision_encoder's int(W' / (w / h)); the two
// agree when size.longest_edge is a multiple of the tile (every released checkpoint) and may not
// otherwise. idefics3_tile_grid follows what the image processor does, which the prompt text uses.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/image.h"
#include "models/image_processor.h"
#include "models/qwen_image_processor.h"

namespace brigade {

// Idefics3's MAX_IMAGE_SIZE: do_resize clamps the longer side to it.
inline constexpr int kIdefics3MaxImageSize = 4096;

// The fields of a preprocessor_config.json the Idefics3 / SmolVLM processor reads; absent or null
// keeps Idefics3ImageProcessor's class default (below).
struct Idefics3ImageProcessorConfig {
  std::string image_processor_type = "Idefics3ImageProcessor";
  int longest_edge = 4 * 364;  // size.longest_edge, pixels: the longer side after do_resize
  int tile = 364;              // max_image_size.longest_edge, pixels: a tile's side
  bool do_image_splitting = true;
  // resample, do_resize, rescale, normalize, convert_rgb (image_processor.h); size unused.
  ImageProcessorConfig steps = {.resample = Resample::lanczos,
                                .image_mean = {0.5, 0.5, 0.5},   // IMAGENET_STANDARD_MEAN
                                .image_std = {0.5, 0.5, 0.5}};   // IMAGENET_STANDARD_STD
};

// Reads preprocessor_config.json (or a processor_config.json's "image_processor"). Errors name the
// field: unsupported for another image_processor_type (Idefics3ImageProcessor,
// SmolVLMImageProcessor, their Fast and Pil names), resample other than 1 (LANCZOS), 2 (BILINEAR)
// or 3 (BICUBIC), a size that is not {"longest_edge": N} (transformers' {height, width} form is not
// implemented), do_resize false with do_image_splitting true (brigade tiles resized images only);
// corrupt for a max_image_size without longest_edge, sizes outside [1, kMaxImageSide], a config
// whose largest image (the longer side min(size + 1, 4096) rounded up to tiles, squared, plus the
// global tile) exceeds kMaxImagePixels; parse_image_processor_config's for the shared steps.
Expected<Idefics3ImageProcessorConfig> parse_idefics3_image_processor_config(const nlohmann::json& j);

// (rows, cols) of tiles an image of height x width becomes: (0, 0) when it is not split (one
// tile). Its tiles number rows * cols + 1 either way.
std::pair<int, int> idefics3_tile_grid(int height, int width, const Idefics3ImageProcessorConfig& config);

// The image's tiles, [rows * cols + 1, 3, tile, tile] f32: the rows x cols tiles row by row, then
// the global tile (unsplit: the one tile); grid_h = max(rows, 1) * (tile / patch), grid_w =
// max(cols, 1) * (tile / patch) (the split tiles' patches side by side; a tile's own patch grid is
// (tile / patch) square, its last tile % patch pixels unread). `image` must hold decoded pixels;
// config as the parser accepts it (do_resize or not do_image_splitting); patch in [1, tile].
PatchedImage preprocess_idefics3(const Image& image, const Idefics3ImageProcessorConfig& config, int patch);

// The processor of the model at `model_path` (a directory, or a file in it) whose tower takes tile
// x tile images (vision_config.image_size): its preprocessor_config.json (or processor_config.json's
// "image_processor"). not_found without either; the parse errors prefixed with the file's path;
// invalid_argument when its max_image_size.longest_edge is not `tile`.
Expected<Idefics3ImageProcessorConfig> model_idefics3_image_processor(const std::string& model_path, int tile);

// decode_image then preprocess_idefics3.
Expected<PatchedImage> idefics3_image_pixels(std::span<const uint8_t> bytes, const Idefics3ImageProcessorConfig& config,
                                             int patch);

}  // namespace brigade
