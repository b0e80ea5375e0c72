// Gemma 3's image preprocessing (and SiglipImageProcessor's, PaliGemma's: the same steps with
// bicubic by default): a decoded Image to the pixel_values the vision encoder reads,
// as transformers' slow (PIL backend) Gemma3ImageProcessor computes them:
//   Gemma3ImageProcessorPil(**preprocessor_config)(images=pil_image, return_tensors="np")
//       ["pixel_values"][0]                                   float32 [3, height, width]
// The steps, in transformers' order and precision:
//   1. convert_to_rgb (do_convert_rgb): an image with transparency is composited over white with
//      PIL.Image.alpha_composite (integer arithmetic, reproduced exactly); else its RGB is used;
//   2. resize (do_resize) to size {height, width} with Pillow's filter (image_resize.h);
//   3. rescale (do_rescale): float32(double(v) * rescale_factor);
//   4. normalize (do_normalize): (x - float32(mean[c])) / float32(std[c]) in float32.
// Results equal transformers' bit for bit (the tests allow 1e-6).
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/image.h"
#include "models/image_resize.h"

namespace brigade {

// The fields of a Hugging Face preprocessor_config.json that the Gemma 3 processor reads. A
// field that is absent or null keeps the default below: Gemma 3's values (every Gemma 3
// checkpoint states them). Note transformers' class default for `size` is 224x224; brigade uses
// 896x896, the size Gemma 3's vision tower was trained at, so a config that omits it still fits
// the encoder.
struct ImageProcessorConfig {
  std::string image_processor_type = "Gemma3ImageProcessor";
  int height = 896, width = 896;               // size {height, width}, pixels
  Resample resample = Resample::bilinear;      // `resample`: PIL code 2 or 3
  bool do_resize = true;
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<double, 3> image_mean = {0.5, 0.5, 0.5};  // per channel R, G, B
  std::array<double, 3> image_std = {0.5, 0.5, 0.5};
  bool do_convert_rgb = true;
  // CLIPImageProcessor (LLaVA): size {shortest_edge} resizes the shorter side to it, the longer to
  // int(shortest_edge * long / short) (height / width unused); then do_center_crop cuts
  // crop_height x crop_width from the middle (top = floor((H - crop_height) / 2), zeros where the
  // crop reaches past the image), before rescaling.
  int shortest_edge = 0;  // 0: resize to height x width
  bool do_center_crop = false;
  int crop_height = 0, crop_width = 0;
  // The size after the resize, and of the pixel_values it makes, from an image of w x h:
  // {height, width}.
  std::array<int, 2> resized_size(int w, int h) const;
  std::array<int, 2> output_size(int w, int h) const;
};

// Reads preprocessor_config.json (or a processor_config.json, whose "image_processor" object
// holds the same fields). Errors (corrupt for wrong types, unsupported for features brigade does
// not implement) name the field and the valid values: image_processor_type must be a Gemma 3,
// CLIP or SigLIP processor (CLIPImageProcessor's defaults: shortest_edge 224, center crop 224, bicubic,
// OpenAI CLIP's mean and std; SiglipImageProcessor's, PaliGemma's: 224 x 224, bicubic), resample 2 (BILINEAR) or 3 (BICUBIC), do_pan_and_scan false or null, size
// {height, width} in [1, kMaxImageSide], image_std nonzero.
Expected<ImageProcessorConfig> parse_image_processor_config(const nlohmann::json& j);
Expected<ImageProcessorConfig> parse_image_processor_config(const std::string& json_text);

// pixel_values [3, H, W] float32, channels first, for H x W = config's size (the image's own
// size when do_resize is false). `image` must hold decoded pixels (decode_image's contract).
std::vector<float> preprocess(const Image& image, const ImageProcessorConfig& config);

// The processor of the model at `model_path` whose vision tower takes image_size x image_size
// images: its preprocessor_config.json (or processor_config.json) when the directory has one,
// else Gemma3ImageProcessor's defaults at that size. invalid_argument when the file's output
// (size, or the crop after a shortest-edge resize) is not the tower's (or it does not resize),
// and parse_image_processor_config's errors.
Expected<ImageProcessorConfig> model_image_processor(const std::string& model_path, int image_size);

// decode_image then preprocess: the pixels GenerateOptions::images takes from a PNG or JPEG file's
// bytes. decode_image's errors.
Expected<std::vector<float>> image_pixels(std::span<const uint8_t> bytes, const ImageProcessorConfig& config);

// A model directory's processor file, parsed: its preprocessor_config.json, else its
// processor_config.json when that has an "image_processor" part (or at all: image_part_only
// false, as model_image_processor reads it) (models/ may name a file in the directory). nullopt
// without either; corrupt naming the file when it is not JSON; read errors.
struct ProcessorJson {
  std::string file;
  nlohmann::json root;
};
Expected<std::optional<ProcessorJson>> read_processor_json(const std::string& model_path, bool image_part_only = true);

// The object holding a processor's fields: processor_config.json's "image_processor", or the root
// (preprocessor_config.json).
const nlohmann::json& processor_fields(const nlohmann::json& root);

// A tiling processor's image_processor_type into `out` (kept when absent): corrupt when not a
// string; unsupported, naming `family` and the `valid` names, when not one of them.
Status read_processor_type(const nlohmann::json& j, std::span<const char* const> valid, const std::string& family,
                           std::string& out);

// One tile's [3, tile, tile] from chw [3, height, width] at tile column col and row row, appended
// to out (the tiling processors cut their resized image this way: InternVL's, LLaVA-NeXT's).
void append_tile(const std::vector<float>& chw, int width, int height, int tile, int col, int row,
                 std::vector<float>& out);

// PIL.Image.alpha_composite(white, image.convert("RGBA")).convert("RGB"): the image over an
// opaque white background; an image without alpha is returned unchanged.
Image composite_on_white(const Image& image);

}  // namespace brigade
