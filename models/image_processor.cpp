#include "models/image_processor.h"

#include <cstdint>
#include <filesystem>
#include <type_traits>

#include "models/mapped_file.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr const char* kValidTypes[] = {"Gemma3ImageProcessor", "Gemma3ImageProcessorPil", "Gemma3ImageProcessorFast",
                                       "CLIPImageProcessor",   "CLIPImageProcessorPil",   "CLIPImageProcessorFast",
                                       "SiglipImageProcessor", "SiglipImageProcessorPil", "SiglipImageProcessorFast"};

Status field_error(const char* key, const std::string& what) {
  return corrupt(std::string("preprocessor_config.json: field '") + key + "' " + what);
}

// The field, or nullptr when absent or null (the default applies).
const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// A bool (T = bool) or a number (T = double); absent or null leaves `out` as it is.
template <class T>
Status read_value(const json& j, const char* key, T& out) {
  constexpr bool is_flag = std::is_same_v<T, bool>;
  const json* v = field(j, key);
  if (!v) return Status::ok();
  if (is_flag ? !v->is_boolean() : !v->is_number())
    return field_error(key, is_flag ? "must be true, false or null" : "must be a number");
  out = v->get<T>();
  return Status::ok();
}

// A number (every channel) or a list of 3, as transformers accepts for image_mean / image_std.
Status read_per_channel(const json& j, const char* key, std::array<double, 3>& out) {
  const json* v = field(j, key);
  if (!v) return Status::ok();
  if (v->is_number()) {
    out.fill(v->get<double>());
    return Status::ok();
  }
  if (!v->is_array() || v->size() != 3) return field_error(key, "must be a number or a list of 3 numbers (R, G, B)");
  for (size_t c = 0; c < 3; ++c) {
    if (!(*v)[c].is_number()) return field_error(key, "must be a number or a list of 3 numbers (R, G, B)");
    out[c] = (*v)[c].get<double>();
  }
  return Status::ok();
}

Status read_type(const json& j, std::string& out) {
  const json* v = field(j, "image_processor_type");
  if (!v) return Status::ok();
  if (!v->is_string()) return field_error("image_processor_type", "must be a string");
  out = v->get<std::string>();
  for (const char* t : kValidTypes) {
    if (out == t) return Status::ok();
  }
  return unsupported("preprocessor_config.json: image_processor_type '" + out +
                     "' is not supported; valid: Gemma3ImageProcessor, Gemma3ImageProcessorPil, "
                     "Gemma3ImageProcessorFast, CLIPImageProcessor, CLIPImageProcessorPil, CLIPImageProcessorFast, "
                     "SiglipImageProcessor, SiglipImageProcessorPil, SiglipImageProcessorFast "
                     "(brigade computes the PIL backend's result)");
}

Status read_size(const json& j, int& height, int& width, int* shortest_edge = nullptr, const char* key = "size") {
  const json* v = field(j, key);
  if (!v) return Status::ok();
  if (shortest_edge != nullptr && v->is_object() && v->contains("shortest_edge") && !v->contains("height")) {
    const json& s = (*v)["shortest_edge"];
    if (!s.is_number_integer() || s.get<int64_t>() < 1 || s.get<int64_t>() > kMaxImageSide)
      return field_error(key, "shortest_edge must be an integer in [1, 16384]");
    *shortest_edge = int(s.get<int64_t>());
    return Status::ok();
  }
  const char* want = shortest_edge != nullptr
                         ? "must be {\"height\": H, \"width\": W} with H and W integers in [1, 16384], or {\"shortest_edge\": S}"
                         : "must be {\"height\": H, \"width\": W} with H and W integers in [1, 16384]";
  if (!v->is_object() || !v->contains("height") || !v->contains("width")) return field_error(key, want);
  const json& h = (*v)["height"];
  const json& w = (*v)["width"];
  if (!h.is_number_integer() || !w.is_number_integer()) return field_error(key, want);
  const int64_t hv = h.get<int64_t>(), wv = w.get<int64_t>();
  if (hv < 1 || wv < 1 || hv > kMaxImageSide || wv > kMaxImageSide) return field_error(key, want);
  if (shortest_edge != nullptr) *shortest_edge = 0;
  height = int(hv);
  width = int(wv);
  return Status::ok();
}

Status read_resample(const json& j, Resample& out) {
  const json* v = field(j, "resample");
  if (!v) return Status::ok();
  const int64_t code = v->is_number_integer() ? v->get<int64_t>() : -1;
  if (code == int(Resample::bilinear) || code == int(Resample::bicubic)) {
    out = Resample(code);
    return Status::ok();
  }
  return unsupported("preprocessor_config.json: resample " + v->dump() +
                     " is not supported; valid: 2 (BILINEAR), 3 (BICUBIC)");
}

Status check_pan_and_scan(const json& j) {
  bool pan_and_scan = false;
  BRIGADE_RETURN_IF_ERROR(read_value(j, "do_pan_and_scan", pan_and_scan));
  if (pan_and_scan) {
    return unsupported("preprocessor_config.json: do_pan_and_scan=true (Gemma 3's pan-and-scan crops) is "
                       "not supported; set it to false or null");
  }
  return Status::ok();
}

// PIL's integer "over" operator with an opaque white destination (AlphaComposite.c).
uint8_t over_white(uint8_t src, uint32_t alpha) {
  constexpr uint32_t kBits = 7, dst = 255, dst_alpha = 255;
  const uint32_t out_alpha = alpha * 255 + dst_alpha * (255 - alpha);
  const uint32_t coef_src = alpha * 255 * 255 * (1u << kBits) / out_alpha;
  const uint32_t coef_dst = 255 * (1u << kBits) - coef_src;
  const uint32_t v = src * coef_src + dst * coef_dst + (0x80u << kBits);
  return uint8_t((((v >> 8) + v) >> 8) >> kBits);  // v / 255, rounded, then the 7 extra bits dropped
}

}  // namespace

Expected<ImageProcessorConfig> parse_image_processor_config(const json& root) {
  if (!root.is_object()) return corrupt("preprocessor_config.json: not a JSON object");
  const json& j = processor_fields(root);  // processor_config.json nests it
  ImageProcessorConfig c;
  BRIGADE_RETURN_IF_ERROR(read_type(j, c.image_processor_type));
  const bool clip = c.image_processor_type.starts_with("CLIP");
  if (clip) {  // CLIPImageProcessor's defaults
    c.shortest_edge = 224, c.do_center_crop = true, c.crop_height = c.crop_width = 224;
    c.resample = Resample::bicubic;
    c.image_mean = {0.48145466, 0.4578275, 0.40821073};
    c.image_std = {0.26862954, 0.26130258, 0.27577711};
  } else if (c.image_processor_type.starts_with("Siglip")) {  // SiglipImageProcessor's (PaliGemma's): 224, bicubic
    c.height = c.width = 224;
    c.resample = Resample::bicubic;
  }
  BRIGADE_RETURN_IF_ERROR(check_pan_and_scan(j));
  BRIGADE_RETURN_IF_ERROR(read_size(j, c.height, c.width, clip ? &c.shortest_edge : nullptr));
  if (clip) {
    BRIGADE_RETURN_IF_ERROR(read_value(j, "do_center_crop", c.do_center_crop));
    BRIGADE_RETURN_IF_ERROR(read_size(j, c.crop_height, c.crop_width, nullptr, "crop_size"));
  } else if (const json* crop = field(j, "do_center_crop"); crop != nullptr && *crop == true) {
    return unsupported("preprocessor_config.json: do_center_crop=true is not supported for " + c.image_processor_type);
  }
  BRIGADE_RETURN_IF_ERROR(read_resample(j, c.resample));
  BRIGADE_RETURN_IF_ERROR(read_value(j, "do_resize", c.do_resize));
  BRIGADE_RETURN_IF_ERROR(read_value(j, "do_rescale", c.do_rescale));
  BRIGADE_RETURN_IF_ERROR(read_value(j, "rescale_factor", c.rescale_factor));
  BRIGADE_RETURN_IF_ERROR(read_value(j, "do_normalize", c.do_normalize));
  BRIGADE_RETURN_IF_ERROR(read_per_channel(j, "image_mean", c.image_mean));
  BRIGADE_RETURN_IF_ERROR(read_per_channel(j, "image_std", c.image_std));
  BRIGADE_RETURN_IF_ERROR(read_value(j, "do_convert_rgb", c.do_convert_rgb));
  for (double s : c.image_std) {
    if (float(s) == 0.0f) return field_error("image_std", "must be nonzero in every channel");
  }
  return c;
}

Expected<ImageProcessorConfig> parse_image_processor_config(const std::string& json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt("preprocessor_config.json: not valid JSON");
  return parse_image_processor_config(j);
}

Expected<std::optional<ProcessorJson>> read_processor_json(const std::string& model_path, bool image_part_only) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::is_directory(model_path, ec) ? fs::path(model_path) : fs::path(model_path).parent_path();
  for (const char* name : {"preprocessor_config.json", "processor_config.json"}) {
    const fs::path file = dir / name;
    if (!fs::exists(file, ec)) continue;
    BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(file.string()));
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return corrupt(file.string() + ": not valid JSON");
    if (image_part_only && name == std::string("processor_config.json") && !j.contains("image_processor"))
      continue;  // no image part
    return std::optional<ProcessorJson>(ProcessorJson{file.string(), std::move(j)});
  }
  return std::optional<ProcessorJson>();
}

const json& processor_fields(const json& root) {
  const auto nested = root.find("image_processor");
  return nested == root.end() || !nested->is_object() ? root : *nested;
}

Status read_processor_type(const json& j, std::span<const char* const> valid, const std::string& family,
                           std::string& out) {
  if (const json* type = field(j, "image_processor_type")) {
    if (!type->is_string()) return corrupt("preprocessor_config.json: image_processor_type must be a string");
    out = type->get<std::string>();
  }
  std::string names;
  for (const char* t : valid) {
    if (out == t) return Status::ok();
    names += (names.empty() ? "" : ", ") + std::string(t);
  }
  return unsupported("preprocessor_config.json: image_processor_type '" + out + "' is not " + family + "'s; valid: " +
                     names + " (brigade computes the PIL backend's result)");
}

void append_tile(const std::vector<float>& chw, int width, int height, int tile, int col, int row,
                 std::vector<float>& out) {
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < tile; ++y) {
      const float* src = chw.data() + (static_cast<size_t>(c) * height + static_cast<size_t>(row) * tile + y) * width +
                         static_cast<size_t>(col) * tile;
      out.insert(out.end(), src, src + tile);
    }
}

Image composite_on_white(const Image& image) {
  Image out{image.width, image.height, image.rgb, {}};
  for (size_t i = 0; i < image.alpha.size(); ++i) {
    const uint32_t a = image.alpha[i];
    for (size_t c = 0; c < 3; ++c) {
      uint8_t& v = out.rgb[i * 3 + c];
      v = a == 0 ? 255 : over_white(v, a);
    }
  }
  return out;
}

std::array<int, 2> ImageProcessorConfig::resized_size(int w, int h) const {
  if (!do_resize) return {h, w};
  if (shortest_edge <= 0) return {height, width};
  // get_resize_output_image_size(default_to_square=False): the long side int(S * long / short).
  const bool wide = w > h;
  const int resized_long = int(double(shortest_edge) * (wide ? w : h) / (wide ? h : w));
  return wide ? std::array<int, 2>{shortest_edge, resized_long} : std::array<int, 2>{resized_long, shortest_edge};
}

std::array<int, 2> ImageProcessorConfig::output_size(int w, int h) const {
  return do_center_crop ? std::array<int, 2>{crop_height, crop_width} : resized_size(w, h);
}

namespace {

// numpy's center_crop of an [H, W, 3] image: rows from floor((H - ch) / 2), columns likewise,
// zeros where they fall outside the image (its padding).
Image center_crop(const Image& in, int ch, int cw) {
  const auto floor_half = [](int d) { return d >= 0 ? d / 2 : -((1 - d) / 2); };
  const int top = floor_half(in.height - ch), left = floor_half(in.width - cw);
  Image out{cw, ch, std::vector<uint8_t>(size_t(cw) * ch * 3, 0), {}};
  for (int y = 0; y < ch; ++y) {
    const int sy = top + y;
    if (sy < 0 || sy >= in.height) continue;
    for (int x = 0; x < cw; ++x) {
      const int sx = left + x;
      if (sx < 0 || sx >= in.width) continue;
      for (int c = 0; c < 3; ++c) out.rgb[(size_t(y) * cw + x) * 3 + c] = in.rgb[(size_t(sy) * in.width + sx) * 3 + c];
    }
  }
  return out;
}

}  // namespace

std::vector<float> preprocess(const Image& image, const ImageProcessorConfig& config) {
  BRIGADE_CHECK(image.rgb.size() == size_t(image.width) * image.height * 3 && !image.rgb.empty(),
                "image is decoded: rgb holds [height, width, 3]");
  // Without do_convert_rgb transformers would keep 4 channels and fail on the 3 means; brigade
  // has no 4-channel form, so it uses the RGB bytes (alpha dropped) there.
  Image rgb = config.do_convert_rgb && image.has_alpha() ? composite_on_white(image) : image;
  if (config.do_resize) {
    const auto [h, w] = config.resized_size(rgb.width, rgb.height);
    rgb = resize_rgb(rgb, w, h, config.resample);
  }
  if (config.do_center_crop) rgb = center_crop(rgb, config.crop_height, config.crop_width);

  std::array<float, 3> mean{}, std_dev{};
  for (size_t c = 0; c < 3; ++c) {
    mean[c] = float(config.image_mean[c]);
    std_dev[c] = float(config.image_std[c]);
  }
  const size_t n_pixels = size_t(rgb.width) * rgb.height;
  std::vector<float> out(3 * n_pixels);  // [3, H, W]
  for (size_t i = 0; i < n_pixels; ++i) {
    for (size_t c = 0; c < 3; ++c) {
      const uint8_t v = rgb.rgb[i * 3 + c];
      float x = config.do_rescale ? float(double(v) * config.rescale_factor) : float(v);
      if (config.do_normalize) x = (x - mean[c]) / std_dev[c];
      out[c * n_pixels + i] = x;
    }
  }
  return out;
}

Expected<ImageProcessorConfig> model_image_processor(const std::string& model_path, int image_size) {
  BRIGADE_ASSIGN_OR_RETURN(const std::optional<ProcessorJson> found, read_processor_json(model_path, false));
  if (found) {
    const std::string& file = found->file;
    auto config = parse_image_processor_config(found->root);
    if (!config) return Status(config.status().code(), file + ": " + config.status().message());
    const bool square = config->shortest_edge > 0
                            ? config->do_center_crop && config->crop_height == image_size && config->crop_width == image_size
                            : config->height == image_size && config->width == image_size &&
                                  (!config->do_center_crop || (config->crop_height == image_size && config->crop_width == image_size));
    const int out_w = config->do_center_crop ? config->crop_width : config->width;
    const int out_h = config->do_center_crop ? config->crop_height : config->height;
    if (!config->do_resize || !square)
      return invalid_argument(file + ": the processor makes " +
                              (config->shortest_edge > 0 && !config->do_center_crop
                                   ? "images of shortest edge " + std::to_string(config->shortest_edge) + " (no center crop)"
                                   : std::to_string(out_w) + "x" + std::to_string(out_h) + " images") +
                              (config->do_resize ? "" : " (do_resize false)") +
                              " but the vision tower takes " + std::to_string(image_size) + "x" +
                              std::to_string(image_size));
    return config;
  }
  ImageProcessorConfig config;
  config.height = config.width = image_size;
  return config;
}

Expected<std::vector<float>> image_pixels(std::span<const uint8_t> bytes, const ImageProcessorConfig& config) {
  BRIGADE_ASSIGN_OR_RETURN(Image image, decode_image(bytes));
  return preprocess(image, config);
}

}  // namespace brigade
