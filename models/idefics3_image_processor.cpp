#include "models/idefics3_image_processor.h"

#include <algorithm>
#include <filesystem>
#include <vector>

namespace brigade {

using json = nlohmann::json;

namespace {

constexpr const char* kValidTypes[] = {"Idefics3ImageProcessor", "Idefics3ImageProcessorFast",
                                       "Idefics3ImageProcessorPil", "SmolVLMImageProcessor",
                                       "SmolVLMImageProcessorFast", "SmolVLMImageProcessorPil"};

const json* find_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// size / max_image_size: {"longest_edge": N}, N in [1, kMaxImageSide]; absent or null keeps `out`.
// transformers' other size form, {height, width}, resizes to a fixed size, which brigade does not do.
Status read_longest_edge(const json& j, const char* key, int& out) {
  const json* v = find_field(j, key);
  if (v == nullptr) return Status::ok();
  const std::string want = std::string("preprocessor_config.json: ") + key + " " + v->dump() +
                           " must be {\"longest_edge\": N} with N an integer in [1, " + std::to_string(kMaxImageSide) + "]";
  if (!v->is_object() || !v->contains("longest_edge"))
    return v->is_object() && std::string(key) == "size" ? unsupported(want) : corrupt(want);
  const json& n = (*v)["longest_edge"];
  if (!n.is_number_integer() || n.get<int64_t>() < 1 || n.get<int64_t>() > kMaxImageSide) return corrupt(want);
  out = int(n.get<int64_t>());
  return Status::ok();
}

Status read_splitting(const json& j, bool& out) {
  const json* v = find_field(j, "do_image_splitting");
  if (v == nullptr) return Status::ok();
  if (!v->is_boolean()) return corrupt("preprocessor_config.json: do_image_splitting must be true, false or null");
  out = v->get<bool>();
  return Status::ok();
}

// PIL codes transformers' PIL backend passes to Pillow; brigade implements these three.
Status read_resample(const json& j, Resample& out) {
  const json* v = find_field(j, "resample");
  if (v == nullptr) return Status::ok();
  const int64_t code = v->is_number_integer() ? v->get<int64_t>() : -1;
  if (code == int(Resample::lanczos) || code == int(Resample::bilinear) || code == int(Resample::bicubic)) {
    out = Resample(code);
    return Status::ok();
  }
  return unsupported("preprocessor_config.json: resample " + v->dump() +
                     " is not supported; valid: 1 (LANCZOS), 2 (BILINEAR), 3 (BICUBIC)");
}

// The most pixels one image's tiles hold: the resized longer side is at most min(L + 1, 4096)
// (an odd L evened up, or the clamp), rounded up to tiles, squared, plus the global tile.
int64_t largest_image_pixels(const Idefics3ImageProcessorConfig& c) {
  const int64_t t = c.tile;
  if (!c.do_image_splitting) return t * t;
  const int64_t side = std::min<int64_t>(int64_t{c.longest_edge} + 1, kIdefics3MaxImageSize);
  const int64_t tiled = (side + t - 1) / t * t;
  return tiled * tiled + t * t;
}

Status check_sizes(const Idefics3ImageProcessorConfig& c) {
  if (c.do_image_splitting && !c.steps.do_resize)
    return unsupported("preprocessor_config.json: do_resize false with do_image_splitting true (tiles of the image "
                       "at its own size, unbounded) is not supported; set do_resize true, or do_image_splitting "
                       "false (each image resized to one tile)");
  if (largest_image_pixels(c) > kMaxImagePixels)
    return corrupt("preprocessor_config.json: size.longest_edge " + std::to_string(c.longest_edge) +
                   " with max_image_size.longest_edge " + std::to_string(c.tile) + " makes images of up to " +
                   std::to_string(largest_image_pixels(c)) + " pixels in tiles; brigade's bound is " +
                   std::to_string(kMaxImagePixels));
  return Status::ok();
}

// _resize_output_size_rescale_to_max_len(max_len = longest_edge) then
// _resize_output_size_scale_below_upper_bound(MAX_IMAGE_SIZE): {height, width}.
std::pair<int, int> resized_size(int height, int width, int longest_edge) {
  double aspect = double(width) / height;
  if (width >= height) {
    width = longest_edge;
    height = int(width / aspect);
    if (height % 2 != 0) ++height;
  } else {
    height = longest_edge;
    width = int(height * aspect);
    if (width % 2 != 0) ++width;
  }
  height = std::max(height, 1), width = std::max(width, 1);
  aspect = double(width) / height;
  if (width >= height && width > kIdefics3MaxImageSize) {
    width = kIdefics3MaxImageSize;
    height = int(width / aspect);
  } else if (height > width && height > kIdefics3MaxImageSize) {
    height = kIdefics3MaxImageSize;
    width = int(height * aspect);
  }
  return {std::max(height, 1), std::max(width, 1)};
}

// resize_for_vision_encoder's size: {height, width}, both whole tiles. math.ceil(v / tile) of a
// double quotient is the integer ceiling for these sizes (far below 2^53).
std::pair<int, int> tiled_size(int height, int width, int tile) {
  const auto round_up = [tile](int v) { return (v + tile - 1) / tile * tile; };
  const double aspect = double(width) / height;
  if (width >= height) {
    width = round_up(width);
    height = round_up(int(width / aspect));
  } else {
    height = round_up(height);
    width = round_up(int(height * aspect));
  }
  return {height, width};
}

}  // namespace

Expected<Idefics3ImageProcessorConfig> parse_idefics3_image_processor_config(const json& root) {
  if (!root.is_object()) return corrupt("preprocessor_config.json: not a JSON object");
  const json& j = processor_fields(root);
  Idefics3ImageProcessorConfig c;
  BRIGADE_RETURN_IF_ERROR(read_processor_type(j, kValidTypes, "Idefics3 / SmolVLM", c.image_processor_type));
  BRIGADE_RETURN_IF_ERROR(read_longest_edge(j, "size", c.longest_edge));
  BRIGADE_RETURN_IF_ERROR(read_longest_edge(j, "max_image_size", c.tile));
  BRIGADE_RETURN_IF_ERROR(read_splitting(j, c.do_image_splitting));
  Resample resample = c.steps.resample;
  BRIGADE_RETURN_IF_ERROR(read_resample(j, resample));
  // The steps image_processor.h reads, with Idefics3's defaults where absent; the Idefics3
  // processor never center-crops (its do_center_crop / crop_size are unused).
  json shared = j;
  for (const char* own : {"image_processor_type", "size", "max_image_size", "do_image_splitting", "resample",
                          "do_center_crop", "crop_size"})
    shared.erase(own);
  const std::pair<const char*, json> defaults[] = {{"image_mean", c.steps.image_mean}, {"image_std", c.steps.image_std}};
  for (const auto& [key, value] : defaults)
    if (!find_field(shared, key)) shared[key] = value;
  BRIGADE_ASSIGN_OR_RETURN(c.steps, parse_image_processor_config(shared));
  c.steps.resample = resample;
  c.steps.height = c.steps.width = c.tile;
  BRIGADE_RETURN_IF_ERROR(check_sizes(c));
  return c;
}

std::pair<int, int> idefics3_tile_grid(int height, int width, const Idefics3ImageProcessorConfig& c) {
  if (!c.do_image_splitting) return {0, 0};
  const auto [h, w] = c.steps.do_resize ? resized_size(height, width, c.longest_edge) : std::pair{height, width};
  const auto [th, tw] = tiled_size(h, w, c.tile);
  if (th > c.tile || tw > c.tile) return {th / c.tile, tw / c.tile};
  return {0, 0};
}

PatchedImage preprocess_idefics3(const Image& image, const Idefics3ImageProcessorConfig& c, int patch) {
  BRIGADE_CHECK(image.rgb.size() == size_t(image.width) * image.height * 3 && !image.rgb.empty(),
                "image is decoded: rgb holds [height, width, 3]");
  BRIGADE_CHECK(patch >= 1 && patch <= c.tile, "a tile holds at least one patch");
  BRIGADE_CHECK(c.steps.do_resize || !c.do_image_splitting, "the parser refuses splitting without do_resize");
  const Resample r = c.steps.resample;
  Image rgb = c.steps.do_convert_rgb && image.has_alpha() ? composite_on_white(image) : Image{};
  if (c.steps.do_resize) {
    const auto [h, w] = resized_size(image.height, image.width, c.longest_edge);
    rgb = resize_rgb(rgb.rgb.empty() ? image : rgb, w, h, r);
  }
  const Image& src = rgb.rgb.empty() ? image : rgb;
  ImageProcessorConfig steps = c.steps;
  steps.do_resize = steps.do_convert_rgb = false;  // resized here; preprocess rescales and normalizes
  PatchedImage out;
  const auto [rows, cols] = idefics3_tile_grid(image.height, image.width, c);
  if (!c.do_image_splitting) {
    out.pixels = preprocess(resize_rgb(src, c.tile, c.tile, r), steps);
  } else {
    const auto [th, tw] = tiled_size(src.height, src.width, c.tile);
    const Image tiled = resize_rgb(src, tw, th, r);
    if (rows == 0) {  // one tile: the tiled image is tile x tile
      out.pixels = preprocess(tiled, steps);
    } else {
      const std::vector<float> chw = preprocess(tiled, steps);
      out.pixels.reserve(size_t{3} * c.tile * c.tile * (size_t(rows) * cols + 1));
      for (int i = 0; i < rows * cols; ++i) append_tile(chw, tw, th, c.tile, i % cols, i / cols, out.pixels);
      const std::vector<float> global = preprocess(resize_rgb(tiled, c.tile, c.tile, r), steps);
      out.pixels.insert(out.pixels.end(), global.begin(), global.end());
    }
  }
  out.grid_h = std::max(rows, 1) * (c.tile / patch);
  out.grid_w = std::max(cols, 1) * (c.tile / patch);
  return out;
}

Expected<Idefics3ImageProcessorConfig> model_idefics3_image_processor(const std::string& model_path, int tile) {
  BRIGADE_ASSIGN_OR_RETURN(const std::optional<ProcessorJson> found, read_processor_json(model_path));
  if (!found) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path dir = fs::is_directory(model_path, ec) ? fs::path(model_path) : fs::path(model_path).parent_path();
    return not_found(dir.string() +
                     ": no preprocessor_config.json (Idefics3ImageProcessor) for the Idefics3 / SmolVLM processor");
  }
  auto c = parse_idefics3_image_processor_config(found->root);
  if (!c) return Status(c.status().code(), found->file + ": " + c.status().message());
  if (c->tile != tile)
    return invalid_argument(found->file + ": the processor makes tiles of " + std::to_string(c->tile) +
                            " pixels (max_image_size.longest_edge) but the vision tower takes " + std::to_string(tile) +
                            " (vision_config.image_size)");
  return c;
}

Expected<PatchedImage> idefics3_image_pixels(std::span<const uint8_t> bytes, const Idefics3ImageProcessorConfig& config,
                                             int patch) {
  BRIGADE_ASSIGN_OR_RETURN(Image image, decode_image(bytes));
  return preprocess_idefics3(image, config, patch);
}

}  // namespace brigade
