#include "models/qwen_image_processor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <tuple>

#include "models/image_processor.h"
#include "models/mapped_file.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr const char* kValidTypes[] = {"Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast",
                                       "Qwen2VLImageProcessorPil",   "Glm4vImageProcessor",
                                       "Glm4vImageProcessorFast",    "Glm4vImageProcessorPil"};
constexpr int64_t kMaxSmartResizePixels = int64_t{1} << 40;

Status bad_field(const std::string& key, const std::string& what) {
  return corrupt("preprocessor_config.json: field '" + key + "' " + what);
}

// j[key], or nullptr when absent or null (the default applies).
const json* find_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// An integer in [lo, hi], as `where` (the field's name, or "size.<key>") says in errors.
Status read_bounded(const json& j, const char* key, const std::string& where, int64_t lo, int64_t hi,
                    std::optional<int64_t>& out) {
  const json* v = find_field(j, key);
  if (!v) return Status::ok();
  // nlohmann keeps non-negative integers as uint64; one above INT64_MAX is out of range too.
  const bool in_range = v->is_number_integer() && !(v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi)) &&
                        v->get<int64_t>() >= lo && v->get<int64_t>() <= hi;
  if (!in_range)
    return bad_field(where, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                                v->dump() + ")");
  out = v->get<int64_t>();
  return Status::ok();
}

Status read_small_int(const json& j, const char* key, int64_t hi, int& out) {
  std::optional<int64_t> v;
  BRIGADE_RETURN_IF_ERROR(read_bounded(j, key, key, 1, hi, v));
  if (v) out = int(*v);
  return Status::ok();
}

// image_processor_type, when given, must name a Qwen2-VL processor.
Status check_processor_type(const json& j, std::string& out) {
  const json* v = find_field(j, "image_processor_type");
  if (v && !v->is_string()) return bad_field("image_processor_type", "must be a string naming the processor");
  if (v) out = v->get<std::string>();
  return is_qwen_image_processor_type(out)
             ? Status::ok()
             : unsupported("preprocessor_config.json: image_processor_type '" + out +
                           "' is not a Qwen2-VL processor; valid: Qwen2VLImageProcessor, Qwen2VLImageProcessorFast, "
                           "Qwen2VLImageProcessorPil, Glm4vImageProcessor, Glm4vImageProcessorFast, "
                           "Glm4vImageProcessorPil (brigade computes the PIL backend's result)");
}

// The pixel budget, with transformers 5's precedence (Qwen2VLImageProcessorPil.__init__): a
// `size` object replaces the defaults {shortest_edge: 3136, longest_edge: 1003520} as a whole;
// min_pixels / max_pixels then override its shortest_edge / longest_edge; both must end up set.
Status read_pixel_budget(const json& j, QwenImageProcessorConfig& c) {
  const int64_t most = kMaxQwenPixelValues / (3 * c.temporal_patch_size);
  std::optional<int64_t> lo = c.min_pixels, hi = c.max_pixels;
  const json* size = find_field(j, "size");
  if (size) {
    if (!size->is_object())
      return bad_field("size", "must be {\"shortest_edge\": min_pixels, \"longest_edge\": max_pixels} or null");
    lo.reset();
    hi.reset();
    BRIGADE_RETURN_IF_ERROR(read_bounded(*size, "shortest_edge", "size.shortest_edge", 1, most, lo));
    BRIGADE_RETURN_IF_ERROR(read_bounded(*size, "longest_edge", "size.longest_edge", 1, most, hi));
  }
  BRIGADE_RETURN_IF_ERROR(read_bounded(j, "min_pixels", "min_pixels", 1, most, lo));
  BRIGADE_RETURN_IF_ERROR(read_bounded(j, "max_pixels", "max_pixels", 1, most, hi));
  if (!lo || !hi)
    return bad_field("size", "must hold both shortest_edge and longest_edge (the pixel budget) unless min_pixels "
                             "and max_pixels give them; has " + size->dump());
  if (*lo > *hi)
    return bad_field("min_pixels", "(size.shortest_edge) must be at most max_pixels (size.longest_edge): got " +
                                       std::to_string(*lo) + " > " + std::to_string(*hi));
  c.min_pixels = *lo;
  c.max_pixels = *hi;
  return Status::ok();
}

Status read_patching(const json& j, QwenImageProcessorConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_small_int(j, "patch_size", 128, c.patch_size));
  BRIGADE_RETURN_IF_ERROR(read_small_int(j, "temporal_patch_size", 4, c.temporal_patch_size));
  return read_small_int(j, "merge_size", 8, c.merge_size);
}

// The fields the Qwen processor shares with Gemma 3's, read by parse_image_processor_config:
// `j` without the fields it reads differently, and with Qwen's defaults where they differ
// (BICUBIC, OpenAI CLIP's mean and std).
json shared_fields(const json& j) {
  json shared = j;
  for (const char* own : {"image_processor_type", "size", "do_pan_and_scan"}) shared.erase(own);
  const QwenImageProcessorConfig defaults;
  const std::pair<const char*, json> qwen_defaults[] = {{"resample", int(defaults.resample)},
                                                        {"image_mean", defaults.image_mean},
                                                        {"image_std", defaults.image_std}};
  for (const auto& [key, value] : qwen_defaults) {
    if (!find_field(shared, key)) shared[key] = value;
  }
  return shared;
}

// Rescale and normalize as image_processor.h's preprocess does them ([3, H, W] float32 out);
// the image given to it is already converted and resized.
ImageProcessorConfig pixel_steps(const QwenImageProcessorConfig& c) {
  return {.do_resize = false, .do_rescale = c.do_rescale, .rescale_factor = c.rescale_factor,
          .do_normalize = c.do_normalize, .image_mean = c.image_mean, .image_std = c.image_std,
          .do_convert_rgb = false};
}

// invalid_argument unless a height x width image can be patchified within the bounds.
Status check_patchable(int height, int width, const QwenImageProcessorConfig& c) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (height % c.factor() != 0 || width % c.factor() != 0)
    return invalid_argument("image of " + size + " pixels: without do_resize its sides must be multiples of " +
                            "patch_size * merge_size = " + std::to_string(c.factor()));
  const int64_t n_values = int64_t{3} * c.temporal_patch_size * height * width;
  if (height > kMaxImageSide || width > kMaxImageSide || n_values > kMaxQwenPixelValues)
    return invalid_argument("image resized to " + size + " pixels: above brigade's limits (" +
                            std::to_string(kMaxImageSide) + " per side, " + std::to_string(kMaxQwenPixelValues) +
                            " values); lower max_pixels");
  return Status::ok();
}

// Appends the patch whose top-left pixel is (y0, x0) of chw [3, height, width]: [3][T][P][P].
float* copy_patch(const float* chw, int height, int width, int y0, int x0, const QwenImageProcessorConfig& c,
                  float* dst) {
  const int p = c.patch_size;
  for (int ch = 0; ch < 3; ++ch) {
    for (int t = 0; t < c.temporal_patch_size; ++t) {
      for (int y = y0; y < y0 + p; ++y) {
        const float* src = chw + (size_t(ch) * height + y) * width + x0;
        dst = std::copy(src, src + p, dst);
      }
    }
  }
  return dst;
}

}  // namespace

PatchedImage patchify_qwen(const std::vector<float>& chw, int height, int width, const QwenImageProcessorConfig& c) {
  BRIGADE_CHECK(chw.size() == size_t{3} * height * width && height % c.factor() == 0 && width % c.factor() == 0,
                "patchify_qwen: chw [3, height, width], sides multiples of patch_size * merge_size");
  const int p = c.patch_size, m = c.merge_size;
  PatchedImage out;
  out.grid_h = height / p;
  out.grid_w = width / p;
  out.pixels.resize(size_t(out.grid_h) * out.grid_w * c.patch_values());
  float* dst = out.pixels.data();
  for (int by = 0; by < out.grid_h / m; ++by) {
    for (int bx = 0; bx < out.grid_w / m; ++bx) {
      for (int my = 0; my < m; ++my) {
        for (int mx = 0; mx < m; ++mx) {
          dst = copy_patch(chw.data(), height, width, (by * m + my) * p, (bx * m + mx) * p, c, dst);
        }
      }
    }
  }
  BRIGADE_CHECK(dst == out.pixels.data() + out.pixels.size(), "every row of pixel_values is written once");
  return out;
}

bool is_qwen_image_processor_type(const std::string& type) {
  for (const char* t : kValidTypes) {
    if (type == t) return true;
  }
  return false;
}

Expected<QwenImageProcessorConfig> parse_qwen_image_processor_config(const json& root) {
  if (!root.is_object()) return corrupt("preprocessor_config.json: not a JSON object");
  const json& j = processor_fields(root);
  QwenImageProcessorConfig c;
  BRIGADE_RETURN_IF_ERROR(check_processor_type(j, c.image_processor_type));
  if (c.image_processor_type.starts_with("Glm4v")) {  // Glm4vImageProcessor's class defaults
    c.glm = true;
    c.min_pixels = 112 * 112;
    c.max_pixels = 28 * 28 * 15000;
  }
  BRIGADE_RETURN_IF_ERROR(read_patching(j, c));
  BRIGADE_RETURN_IF_ERROR(read_pixel_budget(j, c));
  BRIGADE_ASSIGN_OR_RETURN(const ImageProcessorConfig shared, parse_image_processor_config(shared_fields(j)));
  c.resample = shared.resample;
  c.do_resize = shared.do_resize;
  c.do_rescale = shared.do_rescale;
  c.rescale_factor = shared.rescale_factor;
  c.do_normalize = shared.do_normalize;
  c.image_mean = shared.image_mean;
  c.image_std = shared.image_std;
  c.do_convert_rgb = shared.do_convert_rgb;
  return c;
}

Expected<QwenImageProcessorConfig> parse_qwen_image_processor_config(const std::string& json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt("preprocessor_config.json: not valid JSON");
  return parse_qwen_image_processor_config(j);
}

Expected<std::pair<int, int>> smart_resize(int height, int width, int factor, int64_t min_pixels,
                                           int64_t max_pixels) {
  if (height < 1 || width < 1 || height > kMaxImageSide || width > kMaxImageSide)
    return invalid_argument("smart_resize: image of " + std::to_string(width) + "x" + std::to_string(height) +
                            " pixels; each side must be in [1, " + std::to_string(kMaxImageSide) + "]");
  const auto budget_ok = [](int64_t pixels) { return pixels >= 1 && pixels <= kMaxSmartResizePixels; };
  if (factor < 1 || factor > 1024 || !budget_ok(min_pixels) || !budget_ok(max_pixels))
    return invalid_argument("smart_resize: factor must be in [1, 1024], min_pixels and max_pixels in [1, 2^40] "
                            "(got " + std::to_string(factor) + ", " + std::to_string(min_pixels) + ", " +
                            std::to_string(max_pixels) + ")");
  const double ratio = double(std::max(height, width)) / double(std::min(height, width));
  if (ratio > 200) {
    char got[32];
    std::snprintf(got, sizeof got, "%.17g", ratio);
    return invalid_argument(std::string("absolute aspect ratio must be smaller than 200, got ") + got + " (image of " +
                            std::to_string(width) + "x" + std::to_string(height) + " pixels)");
  }
  // Python's round() is round-half-even, as nearbyint in the default rounding mode.
  int64_t h_bar = int64_t(std::nearbyint(double(height) / factor)) * factor;
  int64_t w_bar = int64_t(std::nearbyint(double(width) / factor)) * factor;
  const double area = double(int64_t{height} * width);
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(area / double(max_pixels));
    h_bar = std::max<int64_t>(factor, int64_t(std::floor(height / beta / factor)) * factor);
    w_bar = std::max<int64_t>(factor, int64_t(std::floor(width / beta / factor)) * factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(double(min_pixels) / area);
    h_bar = int64_t(std::ceil(height * beta / factor)) * factor;
    w_bar = int64_t(std::ceil(width * beta / factor)) * factor;
  }
  return std::pair<int, int>(int(h_bar), int(w_bar));  // sides below 2^25: at most sqrt(min_pixels * 200) + factor
}

Expected<std::pair<int, int>> glm4v_smart_resize(int height, int width, int factor, int temporal_factor,
                                                 int64_t min_pixels, int64_t max_pixels) {
  if (height >= 1 && width >= 1 && factor >= 1 && (height < factor || width < factor)) {
    const double scale = std::max(double(factor) / height, double(factor) / width);
    height = int(height * scale);  // Python's int(): toward zero
    width = int(width * scale);
  }
  if (temporal_factor < 1) return invalid_argument("glm4v_smart_resize: temporal_factor must be positive");
  // smart_resize's checks and rounding without a budget, then the budget over temporal_factor frames.
  BRIGADE_ASSIGN_OR_RETURN(auto rounded, smart_resize(height, width, factor, 1, int64_t{1} << 40));
  const int64_t t = temporal_factor, f = factor;
  int64_t h_bar = rounded.first, w_bar = rounded.second;
  const double frames_area = double(t * height * width);
  if (t * h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt(frames_area / double(max_pixels));
    h_bar = std::max<int64_t>(f, int64_t(std::floor(height / beta / f)) * f);
    w_bar = std::max<int64_t>(f, int64_t(std::floor(width / beta / f)) * f);
  } else if (t * h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(double(min_pixels) / frames_area);
    h_bar = int64_t(std::ceil(height * beta / f)) * f;
    w_bar = int64_t(std::ceil(width * beta / f)) * f;
  }
  return std::pair<int, int>(int(h_bar), int(w_bar));
}

Expected<PatchedImage> preprocess_qwen(const Image& image, const QwenImageProcessorConfig& config) {
  BRIGADE_CHECK(image.rgb.size() == size_t(image.width) * image.height * 3 && !image.rgb.empty(),
                "image is decoded: rgb holds [height, width, 3]");
  int height = image.height, width = image.width;
  if (config.do_resize) {
    BRIGADE_ASSIGN_OR_RETURN(auto size, config.glm ? glm4v_smart_resize(height, width, config.factor(),
                                                                        config.temporal_patch_size, config.min_pixels,
                                                                        config.max_pixels)
                                                   : smart_resize(height, width, config.factor(), config.min_pixels,
                                                                  config.max_pixels));
    std::tie(height, width) = size;
  }
  BRIGADE_RETURN_IF_ERROR(check_patchable(height, width, config));
  // Without do_convert_rgb transformers would keep 4 channels and fail on the 3 means; brigade
  // has no 4-channel form, so it uses the RGB bytes (alpha dropped) there, as preprocess does.
  const Image rgb = config.do_convert_rgb && image.has_alpha() ? composite_on_white(image) : Image{};
  const Image& src = rgb.rgb.empty() ? image : rgb;
  const std::vector<float> chw =
      config.do_resize ? preprocess(resize_rgb(src, width, height, config.resample), pixel_steps(config))
                       : preprocess(src, pixel_steps(config));
  return patchify_qwen(chw, height, width, config);
}

std::string processor_config_file(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::is_directory(model_path, ec) ? fs::path(model_path) : fs::path(model_path).parent_path();
  for (const fs::path& file : {dir / "preprocessor_config.json", dir / "processor_config.json"}) {
    if (fs::exists(file, ec)) return file.string();
  }
  return {};
}

Expected<QwenImageProcessorConfig> model_qwen_image_processor(const std::string& model_path) {
  const std::string file = processor_config_file(model_path);
  if (file.empty()) return QwenImageProcessorConfig{};
  BRIGADE_ASSIGN_OR_RETURN(const std::string text, read_text_file(file));
  auto config = parse_qwen_image_processor_config(text);
  if (!config) return Status(config.status().code(), file + ": " + config.status().message());
  return config;
}

Status bound_qwen_pixels(QwenImageProcessorConfig& c, int64_t min_pixels, int64_t max_pixels, int64_t max_tokens) {
  if (min_pixels > 0 && max_pixels > 0 && min_pixels > max_pixels)
    return invalid_argument("min_pixels " + std::to_string(min_pixels) + " exceeds max_pixels " + std::to_string(max_pixels));
  if (min_pixels > 0) c.min_pixels = min_pixels;
  if (max_pixels > 0) c.max_pixels = max_pixels;
  const int64_t per_token = int64_t{c.factor()} * c.factor();
  if (max_tokens > 0) {
    if (max_tokens * per_token < per_token) return invalid_argument("an image needs room for at least one token");
    c.max_pixels = std::min(c.max_pixels, max_tokens * per_token);
  }
  c.min_pixels = std::min(c.min_pixels, c.max_pixels);
  return Status::ok();
}

Expected<PatchedImage> qwen_image_pixels(std::span<const uint8_t> bytes, const QwenImageProcessorConfig& config) {
  BRIGADE_ASSIGN_OR_RETURN(Image image, decode_image(bytes));
  return preprocess_qwen(image, config);
}

}  // namespace brigade
