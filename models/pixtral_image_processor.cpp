#include "models/pixtral_image_processor.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "models/image_processor.h"
#include "models/mapped_file.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr const char* kValidTypes[] = {"PixtralImageProcessor", "PixtralImageProcessorFast",
                                       "PixtralImageProcessorPil"};

Status bad_field(const std::string& key, const std::string& what) {
  return corrupt("preprocessor_config.json: field '" + key + "' " + what);
}

// j[key], or nullptr when absent or null (the default applies).
const json* find_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// An integer in [1, hi] at j[key] (absent or null: out unchanged), `where` naming it in errors.
Status read_side(const json& j, const char* key, const std::string& where, int hi, int& out) {
  const json* v = find_field(j, key);
  if (!v) return Status::ok();
  if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > hi)
    return bad_field(where, "must be an integer in [1, " + std::to_string(hi) + "] (got " + v->dump() + ")");
  out = v->get<int>();
  return Status::ok();
}

// patch_size: an int, or {"height": N, "width": N} (get_size_dict's square default); Pixtral's
// tower has square patches, so the sides must agree.
Status read_patch_size(const json& j, int& out) {
  const json* v = find_field(j, "patch_size");
  if (!v || !v->is_object()) return read_side(j, "patch_size", "patch_size", 128, out);
  int h = out, w = out;
  BRIGADE_RETURN_IF_ERROR(read_side(*v, "height", "patch_size.height", 128, h));
  BRIGADE_RETURN_IF_ERROR(read_side(*v, "width", "patch_size.width", 128, w));
  if (h != w) return bad_field("patch_size", "must have equal height and width (got " + v->dump() + ")");
  out = h;
  return Status::ok();
}

Status read_longest_edge(const json& j, int& out) {
  const json* size = find_field(j, "size");
  if (!size) return Status::ok();
  if (!size->is_object() || !find_field(*size, "longest_edge"))
    return bad_field("size", "must be {\"longest_edge\": N} or null (got " + size->dump() + ")");
  return read_side(*size, "longest_edge", "size.longest_edge", kMaxImageSide, out);
}

// The fields Pixtral shares with Gemma 3's processor, read by parse_image_processor_config, with
// Pixtral's defaults where they differ (BICUBIC, OpenAI CLIP's mean and std).
json shared_fields(const json& j) {
  json shared = j;
  for (const char* own : {"image_processor_type", "size", "patch_size", "do_pan_and_scan"}) shared.erase(own);
  const ImageProcessorConfig defaults = PixtralImageProcessorConfig{}.steps;
  const std::pair<const char*, json> pixtral_defaults[] = {
      {"resample", int(defaults.resample)}, {"image_mean", defaults.image_mean}, {"image_std", defaults.image_std}};
  for (const auto& [key, value] : pixtral_defaults)
    if (!find_field(shared, key)) shared[key] = value;
  return shared;
}

}  // namespace

bool is_pixtral_image_processor_type(const std::string& type) {
  return std::any_of(std::begin(kValidTypes), std::end(kValidTypes), [&](const char* t) { return type == t; });
}

Expected<PixtralImageProcessorConfig> parse_pixtral_image_processor_config(const json& root, int merge_size) {
  if (!root.is_object()) return corrupt("preprocessor_config.json: not a JSON object");
  const json& j = processor_fields(root);
  PixtralImageProcessorConfig c;
  c.merge_size = merge_size;
  if (const json* type = find_field(j, "image_processor_type")) {
    if (!type->is_string()) return bad_field("image_processor_type", "must be a string naming the processor");
    c.image_processor_type = type->get<std::string>();
  }
  if (!is_pixtral_image_processor_type(c.image_processor_type))
    return unsupported("preprocessor_config.json: image_processor_type '" + c.image_processor_type +
                       "' is not a Pixtral processor; valid: PixtralImageProcessor, PixtralImageProcessorFast, "
                       "PixtralImageProcessorPil (brigade computes the PIL backend's result)");
  BRIGADE_RETURN_IF_ERROR(read_patch_size(j, c.patch_size));
  BRIGADE_RETURN_IF_ERROR(read_longest_edge(j, c.longest_edge));
  BRIGADE_ASSIGN_OR_RETURN(c.steps, parse_image_processor_config(shared_fields(j)));
  return c;
}

std::pair<int, int> pixtral_resize(int height, int width, int longest_edge, int factor) {
  // get_resize_output_image_size: ratio and the floors in double, as Python computes them.
  const double ratio = std::max(double(height) / longest_edge, double(width) / longest_edge);
  if (ratio > 1.0) {
    height = int(std::floor(height / ratio));
    width = int(std::floor(width / ratio));
  }
  auto round_up = [&](int side) { return ((side - 1) / factor + 1) * factor; };
  return {round_up(std::max(height, 1)), round_up(std::max(width, 1))};
}

Expected<PatchedImage> preprocess_pixtral(const Image& image, const PixtralImageProcessorConfig& c) {
  BRIGADE_CHECK(image.rgb.size() == size_t(image.width) * image.height * 3 && !image.rgb.empty(),
                "image is decoded: rgb holds [height, width, 3]");
  int height = image.height, width = image.width;
  const bool resize = c.steps.do_resize;
  if (resize) std::tie(height, width) = pixtral_resize(height, width, c.longest_edge, c.factor());
  if (height % c.factor() != 0 || width % c.factor() != 0)
    return invalid_argument("image of " + std::to_string(width) + "x" + std::to_string(height) +
                            " pixels: without do_resize its sides must be multiples of patch_size * "
                            "spatial_merge_size = " + std::to_string(c.factor()));
  // Converted and resized here; preprocess rescales and normalizes.
  const Image rgb = c.steps.do_convert_rgb && image.has_alpha() ? composite_on_white(image) : Image{};
  const Image& src = rgb.rgb.empty() ? image : rgb;
  ImageProcessorConfig steps = c.steps;
  steps.do_resize = steps.do_convert_rgb = false;
  const std::vector<float> chw =
      resize ? preprocess(resize_rgb(src, width, height, c.steps.resample), steps) : preprocess(src, steps);
  QwenImageProcessorConfig rows;
  rows.patch_size = c.patch_size;
  rows.merge_size = c.merge_size;
  rows.temporal_patch_size = 1;
  return patchify_qwen(chw, height, width, rows);
}

Expected<PixtralImageProcessorConfig> model_pixtral_image_processor(const std::string& model_path, int patch_size,
                                                                    int merge_size) {
  const std::string file = processor_config_file(model_path);
  if (file.empty())
    return not_found(model_path + ": no preprocessor_config.json or processor_config.json (PixtralImageProcessor's "
                     "settings): images cannot be loaded from files");
  BRIGADE_ASSIGN_OR_RETURN(const std::string text, read_text_file(file));
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(file + ": not valid JSON");
  auto config = parse_pixtral_image_processor_config(j, merge_size);
  if (!config) return Status(config.status().code(), file + ": " + config.status().message());
  if (config->patch_size != patch_size)
    return invalid_argument(file + ": patch_size " + std::to_string(config->patch_size) +
                            " differs from the vision tower's " + std::to_string(patch_size) +
                            " (vision_config.patch_size)");
  return config;
}

Expected<PatchedImage> pixtral_image_pixels(std::span<const uint8_t> bytes, const PixtralImageProcessorConfig& config) {
  BRIGADE_ASSIGN_OR_RETURN(Image image, decode_image(bytes));
  return preprocess_pixtral(image, config);
}

std::vector<int32_t> pixtral_image_tokens(int grid_h, int grid_w, int merge, int32_t image, int32_t image_break,
                                          int32_t image_end) {
  std::vector<int32_t> ids;
  for (int y = 0; y < grid_h / merge; ++y) {
    ids.insert(ids.end(), static_cast<size_t>(grid_w / merge), image);
    ids.push_back(image_break);
  }
  if (!ids.empty()) ids.back() = image_end;
  return ids;
}

}  // namespace brigade
