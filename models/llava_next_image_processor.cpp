#include "models/llava_next_image_processor.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "models/llava_config.h"


namespace brigade {

using json = nlohmann::json;

namespace {

constexpr const char* kValidTypes[] = {"LlavaNextImageProcessor",        "LlavaNextImageProcessorFast",
                                       "LlavaNextImageProcessorPil",     "LlavaOnevisionImageProcessor",
                                       "LlavaOnevisionImageProcessorFast", "LlavaOnevisionImageProcessorPil"};

const json* find_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

Status read_pinpoints(const json& j, int tile, bool onevision, std::vector<std::array<int, 2>>& out) {
  const json* v = find_field(j, "image_grid_pinpoints");
  if (v == nullptr) {
    out = default_llava_pinpoints(onevision);
  } else {
    if (!v->is_array() || v->empty())
      return corrupt("preprocessor_config.json: image_grid_pinpoints must be a non-empty list of [height, width]");
    for (const json& p : *v) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer())
        return corrupt("preprocessor_config.json: image_grid_pinpoints holds " + p.dump() +
                       ", not a [height, width] of ints");
      out.push_back({p[0].get<int>(), p[1].get<int>()});
    }
  }
  for (const auto& [h, w] : out)
    if (h <= 0 || w <= 0 || h % tile != 0 || w % tile != 0 || h > kMaxImageSide || w > kMaxImageSide)
      return unsupported("preprocessor_config.json: image_grid_pinpoints [" + std::to_string(h) + ", " +
                         std::to_string(w) + "] is not whole tiles of the tower's " + std::to_string(tile) + " pixels");
  return Status::ok();
}

// get_patch_output_size: the image scaled to fit (height, width), the constrained side exact.
std::array<int, 2> fit_within(int height, int width, int target_h, int target_w) {
  const double scale_w = static_cast<double>(target_w) / width, scale_h = static_cast<double>(target_h) / height;
  if (scale_w < scale_h) return {std::min(static_cast<int>(std::ceil(height * scale_w)), target_h), target_w};
  return {target_h, std::min(static_cast<int>(std::ceil(width * scale_h)), target_w)};
}

}  // namespace

Expected<LlavaNextImageProcessorConfig> parse_llava_next_image_processor_config(const json& root, int tile) {
  if (!root.is_object()) return corrupt("preprocessor_config.json: not a JSON object");
  BRIGADE_CHECK(tile > 0, "a tower's tile size");
  const json& j = processor_fields(root);
  LlavaNextImageProcessorConfig c;
  BRIGADE_RETURN_IF_ERROR(read_processor_type(j, kValidTypes, "LLaVA-NeXT / LLaVA-OneVision", c.image_processor_type));
  c.onevision = c.image_processor_type.starts_with("LlavaOnevision");
  if (const json* pad = find_field(j, "do_pad"); pad != nullptr && !pad->is_boolean())
    return corrupt("preprocessor_config.json: field 'do_pad' must be true, false or null");  // batching only
  c.grid.tile = tile;
  BRIGADE_RETURN_IF_ERROR(read_pinpoints(j, tile, c.onevision, c.grid.pinpoints));
  json shared = j;  // CLIPImageProcessor's fields and defaults, which LlavaNextImageProcessor shares
  for (const char* own : {"image_grid_pinpoints", "do_pad", "image_processor_type", "processor_class"}) shared.erase(own);
  shared["image_processor_type"] = "CLIPImageProcessor";
  if (c.onevision) {  // LlavaOnevisionImageProcessor's own defaults: 384 x 384, no center crop
    if (find_field(shared, "size") == nullptr) shared["size"] = {{"height", 384}, {"width", 384}};
    if (find_field(shared, "do_center_crop") == nullptr) shared["do_center_crop"] = false;
  }
  BRIGADE_ASSIGN_OR_RETURN(c.steps, parse_image_processor_config(shared));
  c.steps.image_processor_type = c.image_processor_type;
  // An S x S tile passes the resize and the crop unchanged only when both are to S.
  const ImageProcessorConfig& s = c.steps;
  if (c.onevision && !s.do_resize)  // a base-only image would keep its padded size, which the tower cannot take
    return unsupported("preprocessor_config.json: do_resize false; LLaVA-OneVision's processor must resize images to "
                       "the tower's " + std::to_string(tile) + " pixels");
  const bool resize_ok = !s.do_resize || (s.shortest_edge > 0 ? s.shortest_edge == tile : s.height == tile && s.width == tile);
  const bool crop_ok = !s.do_center_crop || (s.crop_height == tile && s.crop_width == tile);
  if (!resize_ok || !crop_ok)
    return invalid_argument("preprocessor_config.json: the processor resizes or crops to " +
                            (!resize_ok ? (s.shortest_edge > 0 ? "a shortest edge of " + std::to_string(s.shortest_edge)
                                                               : std::to_string(s.width) + "x" + std::to_string(s.height))
                                        : std::to_string(s.crop_width) + "x" + std::to_string(s.crop_height)) +
                            " but the vision tower's tiles are " + std::to_string(tile) + "x" + std::to_string(tile));
  return c;
}

Expected<LlavaNextImageProcessorConfig> model_llava_next_image_processor(const std::string& model_path,
                                                                         const AnyresGrid& grid) {
  BRIGADE_ASSIGN_OR_RETURN(const std::optional<ProcessorJson> found, read_processor_json(model_path));
  if (found) {
    auto c = parse_llava_next_image_processor_config(found->root, grid.tile);
    if (!c) return Status(c.status().code(), found->file + ": " + c.status().message());
    if (c->grid.pinpoints != grid.pinpoints)
      return invalid_argument(found->file + ": its image_grid_pinpoints are not config.json's; the model lays out "
                              "each image's tiles by config.json's");
    if (c->onevision != grid.onevision())
      return invalid_argument(found->file + ": its image_processor_type " + c->image_processor_type + " is not " +
                              (grid.onevision() ? "LLaVA-OneVision's" : "LLaVA-NeXT's") + ", which config.json's model is");
    c->grid = grid;
    return c;
  }
  LlavaNextImageProcessorConfig c;  // LlavaNextImageProcessor's (LlavaOnevisionImageProcessor's) defaults at the tower's size
  c.grid = grid;
  c.onevision = grid.onevision();
  if (c.onevision) c.image_processor_type = "LlavaOnevisionImageProcessor";
  auto steps = parse_image_processor_config(
      c.onevision ? json{{"image_processor_type", "CLIPImageProcessor"},
                         {"size", {{"height", grid.tile}, {"width", grid.tile}}},
                         {"do_center_crop", false}}
                  : json{{"image_processor_type", "CLIPImageProcessor"},
                         {"size", {{"shortest_edge", grid.tile}}},
                         {"crop_size", {{"height", grid.tile}, {"width", grid.tile}}}});
  BRIGADE_CHECK(steps.has_value(), "CLIPImageProcessor's defaults parse");
  c.steps = *steps;
  return c;
}

PatchedImage preprocess_llava_next(const Image& image, const LlavaNextImageProcessorConfig& c) {
  BRIGADE_CHECK(image.rgb.size() == size_t(image.width) * image.height * 3 && !image.rgb.empty(),
                "image is decoded: rgb holds [height, width, 3]");
  const int tile = c.grid.tile;
  BRIGADE_CHECK(tile > 0 && c.grid.on(), "LLaVA-NeXT's processor has its tile and pinpoints");
  const Image rgb = c.steps.do_convert_rgb && image.has_alpha() ? composite_on_white(image) : Image{};
  const Image& src = rgb.rgb.empty() ? image : rgb;
  ImageProcessorConfig steps = c.steps;
  steps.do_resize = steps.do_center_crop = steps.do_convert_rgb = false;  // resized here; preprocess rescales and normalizes
  const auto [best_h, best_w] = select_best_resolution(image.height, image.width, c.grid.pinpoints);
  const auto [new_h, new_w] = fit_within(image.height, image.width, best_h, best_w);
  const Image resized = resize_rgb(src, new_w, new_h, c.steps.resample);
  // _pad_for_patching: zeros around it, floor((target - new) / 2) before.
  Image canvas{best_w, best_h, std::vector<uint8_t>(size_t(best_w) * best_h * 3, 0), {}};
  const int top = (best_h - new_h) / 2, left = (best_w - new_w) / 2;
  for (int y = 0; y < new_h; ++y)
    std::copy_n(resized.rgb.data() + size_t(y) * new_w * 3, size_t(new_w) * 3,
                canvas.rgb.data() + (size_t(top + y) * best_w + left) * 3);
  PatchedImage out;
  const int rows = best_h / tile, cols = best_w / tile;
  out.pixels = preprocess(resize_rgb(src, tile, tile, c.steps.resample), steps);  // the base tile
  out.pixels.reserve(size_t{3} * tile * tile * (1 + rows * cols));
  const std::vector<float> chw = preprocess(canvas, steps);
  for (int i = 0; i < rows * cols; ++i) append_tile(chw, best_w, best_h, tile, i % cols, i / cols, out.pixels);
  out.grid_h = image.height;
  out.grid_w = image.width;
  return out;
}

PatchedImage preprocess_llava_onevision_base(const Image& image, const LlavaNextImageProcessorConfig& c) {
  BRIGADE_CHECK(image.rgb.size() == size_t(image.width) * image.height * 3 && !image.rgb.empty(),
                "image is decoded: rgb holds [height, width, 3]");
  BRIGADE_CHECK(c.onevision && c.grid.tile > 0, "LLaVA-OneVision's processor has its tile");
  const Image rgb = c.steps.do_convert_rgb && image.has_alpha() ? composite_on_white(image) : Image{};
  const Image& src = rgb.rgb.empty() ? image : rgb;
  // pad_to_square: centred on a square of the longer side, filled with int(mean * 255) per channel.
  const int side = std::max(image.width, image.height);
  Image square{side, side, std::vector<uint8_t>(size_t(side) * side * 3), {}};
  for (size_t p = 0; p < size_t(side) * side; ++p)
    for (size_t ch = 0; ch < 3; ++ch)
      square.rgb[p * 3 + ch] = static_cast<uint8_t>(std::clamp(c.steps.image_mean[ch] * 255.0, 0.0, 255.0));
  const int top = (side - image.height) / 2, left = (side - image.width) / 2;
  for (int y = 0; y < image.height; ++y)
    std::copy_n(src.rgb.data() + size_t(y) * image.width * 3, size_t(image.width) * 3,
                square.rgb.data() + (size_t(top + y) * side + left) * 3);
  ImageProcessorConfig steps = c.steps;
  steps.do_resize = steps.do_center_crop = steps.do_convert_rgb = false;
  const int tile = c.grid.tile;
  PatchedImage out;
  out.pixels = preprocess(resize_rgb(square, tile, tile, c.steps.resample), steps);
  out.grid_h = out.grid_w = 0;
  return out;
}

Expected<PatchedImage> llava_next_image_pixels(std::span<const uint8_t> bytes, const LlavaNextImageProcessorConfig& config) {
  BRIGADE_ASSIGN_OR_RETURN(Image image, decode_image(bytes));
  return preprocess_llava_next(image, config);
}

}  // namespace brigade
