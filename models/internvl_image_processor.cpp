#include "models/internvl_image_processor.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "models/config_json.h"
#include "models/mapped_file.h"

namespace brigade {

using json = nlohmann::json;

namespace {

constexpr const char* kValidTypes[] = {"GotOcr2ImageProcessor", "GotOcr2ImageProcessorFast", "GotOcr2ImageProcessorPil"};
constexpr int kMaxTiles = 64;

const json* find_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

Status read_tiles(const json& j, const char* key, int& out) {
  const json* v = find_field(j, key);
  if (v == nullptr) return Status::ok();
  if (!v->is_number_integer()) return corrupt(std::string("preprocessor_config.json: ") + key + " must be an integer");
  out = v->get<int>();
  return Status::ok();
}

Status check_tiles(const InternVLImageProcessorConfig& c, const char* min_key, const char* max_key) {
  if (c.min_tiles < 1 || c.min_tiles > c.max_tiles || c.max_tiles > kMaxTiles)
    return corrupt(std::string(min_key) + " " + std::to_string(c.min_tiles) + " and " + max_key + " " +
                   std::to_string(c.max_tiles) + " must satisfy 1 <= min <= max <= " + std::to_string(kMaxTiles));
  return Status::ok();
}

}  // namespace

Expected<InternVLImageProcessorConfig> parse_internvl_image_processor_config(const json& root) {
  if (!root.is_object()) return corrupt("preprocessor_config.json: not a JSON object");
  const json& j = processor_fields(root);
  InternVLImageProcessorConfig c;
  BRIGADE_RETURN_IF_ERROR(read_processor_type(j, kValidTypes, "InternVL", c.image_processor_type));
  if (const json* size = find_field(j, "size")) {
    if (!size->is_object() || !size->contains("height") || !size->contains("width") || !(*size)["height"].is_number_integer() ||
        (*size)["height"] != (*size)["width"])
      return unsupported("preprocessor_config.json: size " + size->dump() + " must be a square {height, width}");
    c.tile = (*size)["height"].get<int>();
    if (c.tile < 1 || c.tile > kMaxImageSide)
      return corrupt("preprocessor_config.json: size " + std::to_string(c.tile) + " must lie in [1, " +
                     std::to_string(kMaxImageSide) + "]");
  }
  BRIGADE_RETURN_IF_ERROR(read_tiles(j, "min_patches", c.min_tiles));
  BRIGADE_RETURN_IF_ERROR(read_tiles(j, "max_patches", c.max_tiles));
  BRIGADE_RETURN_IF_ERROR(check_tiles(c, "preprocessor_config.json: min_patches", "max_patches"));
  json shared = j;  // the steps image_processor.h reads, with GotOcr2's defaults where absent
  for (const char* own : {"image_processor_type", "size", "crop_to_patches", "min_patches", "max_patches"})
    shared.erase(own);
  const std::pair<const char*, json> defaults[] = {{"resample", int(c.steps.resample)},
                                                   {"image_mean", c.steps.image_mean},
                                                   {"image_std", c.steps.image_std}};
  for (const auto& [key, value] : defaults)
    if (!find_field(shared, key)) shared[key] = value;
  BRIGADE_ASSIGN_OR_RETURN(c.steps, parse_image_processor_config(shared));
  c.steps.height = c.steps.width = c.tile;
  return c;
}

Expected<InternVLImageProcessorConfig> internvl_chat_image_processor(const json& config, int tile_default) {
  InternVLImageProcessorConfig c;
  c.image_processor_type = "InternVLChatModel";
  c.tile = tile_default;
  BRIGADE_RETURN_IF_ERROR(read_int(config, "force_image_size", c.tile, false));
  bool dynamic = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(config, "dynamic_image_size", dynamic));
  BRIGADE_RETURN_IF_ERROR(read_int(config, "min_dynamic_patch", c.min_tiles, false));
  BRIGADE_RETURN_IF_ERROR(read_int(config, "max_dynamic_patch", c.max_tiles, false));
  BRIGADE_RETURN_IF_ERROR(read_bool(config, "use_thumbnail", c.use_thumbnail));
  if (!dynamic) c.min_tiles = c.max_tiles = 1;
  BRIGADE_RETURN_IF_ERROR(check_tiles(c, "config.json: min_dynamic_patch", "max_dynamic_patch"));
  c.steps.image_mean = {0.485, 0.456, 0.406};  // IMAGENET_MEAN / IMAGENET_STD
  c.steps.image_std = {0.229, 0.224, 0.225};
  c.steps.height = c.steps.width = c.tile;
  return c;
}

std::pair<int, int> internvl_tile_grid(int height, int width, int tile, int min_tiles, int max_tiles) {
  std::vector<std::pair<int, int>> grids;  // (cols, rows), sorted (stably) by their product
  for (int w = 1; w <= max_tiles; ++w)
    for (int h = 1; h <= max_tiles; ++h)
      if (w * h <= max_tiles && w * h >= min_tiles) grids.emplace_back(w, h);
  std::stable_sort(grids.begin(), grids.end(), [](auto a, auto b) { return a.first * a.second < b.first * b.second; });
  const double aspect = double(width) / height, area = double(width) * height;
  double best_diff = std::numeric_limits<double>::infinity();
  std::pair<int, int> best = {1, 1};
  for (const auto& g : grids) {
    const double diff = std::abs(aspect - double(g.first) / g.second);
    if (diff < best_diff) {
      best_diff = diff;
      best = g;
    } else if (diff == best_diff && area > 0.5 * tile * tile * g.first * g.second) {
      best = g;
    }
  }
  return best;
}

int internvl_n_tiles(int height, int width, const InternVLImageProcessorConfig& c) {
  if (c.max_tiles <= 1) return 1;
  const auto [cols, rows] = internvl_tile_grid(height, width, c.tile, c.min_tiles, c.max_tiles);
  return cols * rows + (c.use_thumbnail && cols * rows > 1 ? 1 : 0);
}

PatchedImage preprocess_internvl(const Image& image, const InternVLImageProcessorConfig& c, int patch) {
  BRIGADE_CHECK(image.rgb.size() == size_t(image.width) * image.height * 3 && !image.rgb.empty(),
                "image is decoded: rgb holds [height, width, 3]");
  BRIGADE_CHECK(patch > 0 && c.tile % patch == 0, "InternVL tiles are whole patches");
  const Image rgb = c.steps.do_convert_rgb && image.has_alpha() ? composite_on_white(image) : Image{};
  const Image& src = rgb.rgb.empty() ? image : rgb;
  ImageProcessorConfig steps = c.steps;
  steps.do_resize = steps.do_convert_rgb = false;  // resized here; preprocess rescales and normalizes
  PatchedImage out;
  int n = 1;
  if (c.max_tiles <= 1) {  // GotOcr2 without crop_to_patches: the image resized to one tile
    out.pixels = preprocess(resize_rgb(src, c.tile, c.tile, c.steps.resample), steps);
  } else {
    const auto [cols, rows] = internvl_tile_grid(image.height, image.width, c.tile, c.min_tiles, c.max_tiles);
    const int w = cols * c.tile, h = rows * c.tile;
    const std::vector<float> chw = preprocess(resize_rgb(src, w, h, c.steps.resample), steps);
    out.pixels.reserve(size_t{3} * c.tile * c.tile * (cols * rows + 1));
    for (int i = 0; i < cols * rows; ++i) append_tile(chw, w, h, c.tile, i % cols, i / cols, out.pixels);
    n = cols * rows;
    if (c.use_thumbnail && n > 1) {
      const std::vector<float> thumb = preprocess(resize_rgb(src, c.tile, c.tile, c.steps.resample), steps);
      out.pixels.insert(out.pixels.end(), thumb.begin(), thumb.end());
      ++n;
    }
  }
  out.grid_w = c.tile / patch;
  out.grid_h = n * out.grid_w;
  return out;
}

Expected<InternVLImageProcessorConfig> model_internvl_image_processor(const std::string& model_path, int tile) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::is_directory(model_path, ec) ? fs::path(model_path) : fs::path(model_path).parent_path();
  auto checked = [&](Expected<InternVLImageProcessorConfig> c, const fs::path& file) -> Expected<InternVLImageProcessorConfig> {
    if (!c) return Status(c.status().code(), file.string() + ": " + c.status().message());
    if (c->tile != tile)
      return invalid_argument(file.string() + ": the processor makes tiles of " + std::to_string(c->tile) +
                              " pixels but the vision tower takes " + std::to_string(tile));
    return c;
  };
  BRIGADE_ASSIGN_OR_RETURN(const std::optional<ProcessorJson> found, read_processor_json(model_path));
  if (found) return checked(parse_internvl_image_processor_config(found->root), found->file);
  const fs::path config = dir / "config.json";
  if (fs::exists(config, ec)) {
    BRIGADE_ASSIGN_OR_RETURN(std::string text, read_text_file(config.string()));
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && (j.value("model_type", "") == "internvl_chat"))
      return checked(internvl_chat_image_processor(j, tile), config);
  }
  return not_found(dir.string() + ": no preprocessor_config.json (GotOcr2ImageProcessor) for the InternVL processor");
}

Expected<PatchedImage> internvl_image_pixels(std::span<const uint8_t> bytes, const InternVLImageProcessorConfig& config,
                                             int patch) {
  BRIGADE_ASSIGN_OR_RETURN(Image image, decode_image(bytes));
  return preprocess_internvl(image, config, patch);
}

}  // namespace brigade
