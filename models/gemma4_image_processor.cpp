#include "models/gemma4_image_processor.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/mapped_file.h"

namespace brigade {

using json = nlohmann::json;

namespace {

Status read_small_int(const json& j, const char* key, int lo, int hi, int& out) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    return corrupt(std::string("preprocessor_config.json: ") + key + " must be an integer in [" + std::to_string(lo) +
                   ", " + std::to_string(hi) + "] (got " + it->dump() + ")");
  out = it->get<int>();
  return Status::ok();
}

}  // namespace

bool is_gemma4_image_processor_type(const std::string& type) {
  return type == "Gemma4ImageProcessor" || type == "Gemma4ImageProcessorFast" || type == "Gemma4ImageProcessorPil";
}

Expected<std::pair<int, int>> gemma4_target_size(int height, int width, int patch_size, int max_patches,
                                                 int pooling_kernel_size) {
  if (height < 1 || width < 1 || height > kMaxImageSide || width > kMaxImageSide)
    return invalid_argument("image of " + std::to_string(width) + "x" + std::to_string(height) + " pixels; each side "
                            "must be in [1, " + std::to_string(kMaxImageSide) + "]");
  const double total_px = double(int64_t{height} * width);
  const double target_px = double(int64_t{max_patches} * patch_size * patch_size);
  const double factor = std::sqrt(target_px / total_px);
  const double ideal_height = factor * height, ideal_width = factor * width;
  const int side_mult = pooling_kernel_size * patch_size;
  int64_t target_height = int64_t(std::floor(ideal_height / side_mult)) * side_mult;
  int64_t target_width = int64_t(std::floor(ideal_width / side_mult)) * side_mult;
  if (target_height == 0 && target_width == 0)
    return invalid_argument("Gemma 4's processor would resize the image of " + std::to_string(width) + "x" +
                            std::to_string(height) + " pixels to 0 x 0");
  const int64_t max_side = int64_t{max_patches / (pooling_kernel_size * pooling_kernel_size)} * side_mult;
  if (target_height == 0) {
    target_height = side_mult;
    target_width = std::min<int64_t>(int64_t(std::floor(double(width) / double(height))) * side_mult, max_side);
  } else if (target_width == 0) {
    target_width = side_mult;
    target_height = std::min<int64_t>(int64_t(std::floor(double(height) / double(width))) * side_mult, max_side);
  }
  if (double(target_height * target_width) > target_px)
    return invalid_argument("Gemma 4's processor would resize the image of " + std::to_string(width) + "x" +
                            std::to_string(height) + " pixels past its patch budget");
  return std::pair<int, int>(int(target_height), int(target_width));
}

Expected<int> gemma4_soft_tokens(int height, int width, const Gemma4ImageProcessorConfig& c) {
  BRIGADE_ASSIGN_OR_RETURN(const auto size, gemma4_target_size(height, width, c.patch_size, c.max_patches(),
                                                               c.pooling_kernel_size));
  const int k = c.pooling_kernel_size;
  return (size.first / c.patch_size) * (size.second / c.patch_size) / (k * k);
}

Expected<Gemma4ImageProcessorConfig> parse_gemma4_image_processor_config(const json& root) {
  if (!root.is_object()) return corrupt("preprocessor_config.json: not a JSON object");
  const json& j = processor_fields(root);
  Gemma4ImageProcessorConfig c;
  if (auto t = j.find("image_processor_type"); t != j.end() && !t->is_null()) {
    const std::string type = t->is_string() ? t->get<std::string>() : t->dump();
    if (!is_gemma4_image_processor_type(type))
      return unsupported("preprocessor_config.json: image_processor_type '" + type + "' is not a Gemma 4 processor; "
                         "valid: Gemma4ImageProcessor, Gemma4ImageProcessorFast, Gemma4ImageProcessorPil (brigade "
                         "computes the PIL backend's result)");
  }
  BRIGADE_RETURN_IF_ERROR(read_small_int(j, "patch_size", 1, 64, c.patch_size));
  BRIGADE_RETURN_IF_ERROR(read_small_int(j, "pooling_kernel_size", 1, 8, c.pooling_kernel_size));
  BRIGADE_RETURN_IF_ERROR(read_small_int(j, "max_soft_tokens", 1, 1 << 20, c.max_soft_tokens));
  if (c.max_soft_tokens != 70 && c.max_soft_tokens != 140 && c.max_soft_tokens != 280 && c.max_soft_tokens != 560 &&
      c.max_soft_tokens != 1120)
    return corrupt("preprocessor_config.json: max_soft_tokens must be one of 70, 140, 280, 560, 1120 (got " +
                   std::to_string(c.max_soft_tokens) + ")");
  // The shared steps through Gemma 3's reader, with Gemma4ImageProcessorPil's defaults (bicubic,
  // no normalization) where the file says nothing.
  json shared = j;
  for (const char* own : {"image_processor_type", "size", "patch_size", "pooling_kernel_size", "max_soft_tokens"})
    shared.erase(own);
  const std::pair<const char*, json> defaults[] = {{"resample", int(Resample::bicubic)}, {"do_normalize", false},
                                                   {"image_mean", {0.0, 0.0, 0.0}}, {"image_std", {1.0, 1.0, 1.0}}};
  for (const auto& [key, value] : defaults)
    if (!shared.contains(key) || shared[key].is_null()) shared[key] = value;
  BRIGADE_ASSIGN_OR_RETURN(c.steps, parse_image_processor_config(shared));
  return c;
}

Expected<Gemma4ImageProcessorConfig> model_gemma4_image_processor(const std::string& model_path, int patch_size,
                                                                  int pooling_kernel_size) {
  Gemma4ImageProcessorConfig c;
  const std::string file = processor_config_file(model_path);
  if (!file.empty()) {
    BRIGADE_ASSIGN_OR_RETURN(const std::string text, read_text_file(file));
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return corrupt(file + ": not valid JSON");
    auto parsed = parse_gemma4_image_processor_config(j);
    if (!parsed) return Status(parsed.status().code(), file + ": " + parsed.status().message());
    c = *parsed;
  }
  if (c.patch_size != patch_size || c.pooling_kernel_size != pooling_kernel_size)
    return invalid_argument((file.empty() ? std::string("Gemma 4's default processor") : file) + ": patch_size " +
                            std::to_string(c.patch_size) + " and pooling_kernel_size " +
                            std::to_string(c.pooling_kernel_size) + " differ from the vision tower's (" +
                            std::to_string(patch_size) + ", " + std::to_string(pooling_kernel_size) + ")");
  return c;
}

Expected<PatchedImage> preprocess_gemma4(const Image& image, const Gemma4ImageProcessorConfig& c) {
  BRIGADE_CHECK(image.rgb.size() == size_t(image.width) * image.height * 3 && !image.rgb.empty(),
                "image is decoded: rgb holds [height, width, 3]");
  int height = image.height, width = image.width;
  if (c.steps.do_resize) {
    BRIGADE_ASSIGN_OR_RETURN(const auto size, gemma4_target_size(height, width, c.patch_size, c.max_patches(),
                                                                 c.pooling_kernel_size));
    std::tie(height, width) = size;
    if (height > kMaxImageSide || width > kMaxImageSide)
      return invalid_argument("Gemma 4's processor resizes the image of " + std::to_string(image.width) + "x" +
                              std::to_string(image.height) + " pixels to " + std::to_string(width) + "x" +
                              std::to_string(height) + ", past brigade's " + std::to_string(kMaxImageSide) +
                              " pixels a side (an aspect ratio this extreme: crop it)");
  } else if (height % c.side_multiple() != 0 || width % c.side_multiple() != 0) {
    return invalid_argument("image of " + std::to_string(width) + "x" + std::to_string(height) + " pixels: without "
                            "do_resize its sides must be multiples of patch_size * pooling_kernel_size = " +
                            std::to_string(c.side_multiple()));
  }
  const Image rgb = c.steps.do_convert_rgb && image.has_alpha() ? composite_on_white(image) : Image{};
  const Image& src = rgb.rgb.empty() ? image : rgb;
  ImageProcessorConfig steps = c.steps;
  steps.do_resize = false;
  steps.do_convert_rgb = false;
  const std::vector<float> chw = height == src.height && width == src.width
                                     ? preprocess(src, steps)
                                     : preprocess(resize_rgb(src, width, height, c.steps.resample), steps);
  // convert_image_to_patches: [C, H, W] -> rows (py, px), values (y, x, c).
  const int p = c.patch_size, gh = height / p, gw = width / p;
  PatchedImage out;
  out.grid_h = gh, out.grid_w = gw;
  out.pixels.resize(size_t(gh) * gw * 3 * p * p);
  float* dst = out.pixels.data();
  const size_t plane = size_t(height) * width;
  for (int py = 0; py < gh; ++py)
    for (int px = 0; px < gw; ++px)
      for (int y = 0; y < p; ++y)
        for (int x = 0; x < p; ++x)
          for (int ch = 0; ch < 3; ++ch)
            *dst++ = chw[size_t(ch) * plane + size_t(py * p + y) * width + size_t(px * p + x)];
  return out;
}

Expected<PatchedImage> gemma4_image_pixels(std::span<const uint8_t> bytes, const Gemma4ImageProcessorConfig& config) {
  BRIGADE_ASSIGN_OR_RETURN(Image image, decode_image(bytes));
  return preprocess_gemma4(image, config);
}

}  // namespace brigade
