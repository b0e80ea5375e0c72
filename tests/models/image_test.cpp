// Image decoding, Pillow-exact resizing and Gemma 3 preprocessing against Pillow 13 and
// transformers' slow Gemma3ImageProcessor (tests/fixtures/images, written by
// scripts/make_image_fixtures.py), and every kind of bad input refused with an error.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "models/image.h"
#include "models/image_processor.h"
#include "models/image_resize.h"

namespace brigade {
namespace {

using json = nlohmann::json;
using testing::read_bytes;

std::string image_fixture(const std::string& file) {
  const char* moved = std::getenv("BRIGADE_FIXTURES_DIR");
  return std::string(moved && *moved ? moved : BRIGADE_FIXTURES) + "/images/" + file;
}

const json& cases() {
  static const json j = [] {
    const std::vector<uint8_t> text = read_bytes(image_fixture("cases.json"));
    return json::parse(text.begin(), text.end());
  }();
  return j;
}

Image decode_fixture(const std::string& file) {
  auto img = decode_image(read_bytes(image_fixture(file)));
  EXPECT_TRUE(img.has_value()) << file << ": " << img.status().to_string();
  return img ? std::move(img).value() : Image{};
}

// Index of the first differing byte, or -1.
long first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return long(i);
  }
  return -1;
}

std::vector<float> read_f32(const std::string& file) {
  const std::vector<uint8_t> bytes = read_bytes(image_fixture(file));
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);  // little-endian host, as the fixture
  return out;
}

// Every PNG colour type and bit depth, and JPEG baseline / progressive / 4:2:0 / 4:2:2 / gray:
// libjpeg62-turbo 2.1 and the libjpeg-turbo 3.x in Pillow's wheel decode to the same bytes.
TEST(ImageDecode, MatchesPillowExactly) {
  ASSERT_GE(cases()["images"].size(), 15u);
  for (const json& c : cases()["images"]) {
    const std::string file = c["file"];
    SCOPED_TRACE(file + " (Pillow mode " + c["pil_mode"].get<std::string>() + ")");
    const Image img = decode_fixture(file);
    EXPECT_EQ(img.width, c["width"].get<int>());
    EXPECT_EQ(img.height, c["height"].get<int>());
    EXPECT_EQ(first_difference(img.rgb, read_bytes(image_fixture(c["rgb"]))), -1);
    ASSERT_EQ(img.has_alpha(), c.contains("alpha"));
    if (!img.has_alpha()) continue;
    EXPECT_EQ(first_difference(img.alpha, read_bytes(image_fixture(c["alpha"]))), -1);
    EXPECT_EQ(first_difference(composite_on_white(img).rgb, read_bytes(image_fixture(c["on_white"]))), -1);
  }
}

TEST(ImageResize, MatchesPillowBitForBit) {
  ASSERT_GE(cases()["resizes"].size(), 8u);
  for (const json& c : cases()["resizes"]) {
    const int w = c["width"], h = c["height"];
    SCOPED_TRACE(c["src"].get<std::string>() + " -> " + std::to_string(w) + "x" + std::to_string(h) +
                 " resample " + std::to_string(c["resample"].get<int>()));
    const Image out = resize_rgb(decode_fixture(c["src"]), w, h, Resample(c["resample"].get<int>()));
    EXPECT_EQ(out.width, w);
    EXPECT_EQ(out.height, h);
    EXPECT_EQ(first_difference(out.rgb, read_bytes(image_fixture(c["file"]))), -1);
  }
}

TEST(ImageResize, SameSizeIsACopy) {
  const Image src = decode_fixture("rgb_37x23.png");
  EXPECT_EQ(resize_rgb(src, 37, 23, Resample::bilinear).rgb, src.rgb);
}

TEST(ImageProcessor, MatchesTransformersPixelValues) {
  ASSERT_GE(cases()["preprocess"].size(), 6u);
  for (const json& c : cases()["preprocess"]) {
    SCOPED_TRACE(c["src"].get<std::string>() + " config " + c["config"].get<std::string>());
    auto config = parse_image_processor_config(cases()["configs"][c["config"].get<std::string>()]);
    ASSERT_TRUE(config.has_value()) << config.status().to_string();
    const std::vector<float> got = preprocess(decode_fixture(c["src"]), *config);
    const std::vector<float> want = read_f32(c["file"]);
    const auto shape = c["shape"].get<std::vector<int>>();
    ASSERT_EQ(shape, (std::vector<int>{3, config->height, config->width}));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6f) << "at flat index " << i;
  }
}

TEST(ImageProcessor, GemmaDefaultsForMissingFields) {
  auto c = parse_image_processor_config(std::string("{}"));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->height, 896);
  EXPECT_EQ(c->width, 896);
  EXPECT_EQ(c->resample, Resample::bilinear);
  EXPECT_DOUBLE_EQ(c->rescale_factor, 1.0 / 255.0);
  EXPECT_EQ(c->image_mean, (std::array<double, 3>{0.5, 0.5, 0.5}));
  EXPECT_TRUE(c->do_resize && c->do_rescale && c->do_normalize && c->do_convert_rgb);
  // Nulls keep defaults (Gemma 3's real config has "do_convert_rgb": null); processor_config.json nests.
  c = parse_image_processor_config(
      std::string(R"({"image_processor": {"do_convert_rgb": null, "size": {"height": 8, "width": 9}, "image_std": 0.25}})"));
  ASSERT_TRUE(c.has_value()) << c.status().to_string();
  EXPECT_TRUE(c->do_convert_rgb);
  EXPECT_EQ(c->height, 8);
  EXPECT_EQ(c->width, 9);
  EXPECT_EQ(c->image_std, (std::array<double, 3>{0.25, 0.25, 0.25}));
}

// SiglipImageProcessor (PaliGemma's): Gemma 3's steps with its own defaults, 224 x 224 bicubic.
TEST(ImageProcessor, SiglipTakesItsOwnDefaults) {
  for (const char* type : {"SiglipImageProcessor", "SiglipImageProcessorPil", "SiglipImageProcessorFast"}) {
    auto c = parse_image_processor_config(std::string(R"({"image_processor_type": ")") + type + "\"}");
    ASSERT_TRUE(c.has_value()) << type << ": " << c.status().to_string();
    EXPECT_EQ(c->height, 224);
    EXPECT_EQ(c->width, 224);
    EXPECT_EQ(c->resample, Resample::bicubic) << type;
    EXPECT_EQ(c->shortest_edge, 0);
  }
  auto gemma3 = parse_image_processor_config(std::string(R"({"image_processor_type": "Gemma3ImageProcessor"})"));
  ASSERT_TRUE(gemma3.has_value());
  EXPECT_EQ(gemma3->resample, Resample::bilinear) << "Gemma 3's default stays bilinear";
}

TEST(ImageProcessor, RefusesUnsupportedConfigsNamingTheField) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"do_pan_and_scan": true})", "do_pan_and_scan"},
      {R"({"resample": 1})", "valid: 2 (BILINEAR), 3 (BICUBIC)"},
      {R"({"image_processor_type": "BlipImageProcessor"})", "valid: Gemma3ImageProcessor"},
      {R"({"image_processor_type": "CLIPImageProcessor", "crop_size": {"height": 0, "width": 4}})", "'crop_size'"},
      {R"({"do_center_crop": true})", "do_center_crop=true is not supported for Gemma3ImageProcessor"},
      {R"({"size": {"shortest_edge": 224}})", "'size'"},
      {R"({"size": {"height": 0, "width": 4}})", "'size'"},
      {R"({"image_mean": [0.5, 0.5]})", "'image_mean'"},
      {R"({"image_std": [0.5, 0, 0.5]})", "'image_std'"},
      {R"({"do_resize": "yes"})", "'do_resize'"},
      {R"({"rescale_factor": "1/255"})", "'rescale_factor'"},
      {"{not json", "not valid JSON"},
  };
  for (const auto& [text, needle] : bad) {
    auto c = parse_image_processor_config(std::string(text));
    ASSERT_FALSE(c.has_value()) << text;
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << text << " -> " << c.status().to_string();
  }
}

TEST(ImageDataUrl, DecodesBase64) {
  auto b = decode_data_url("data:image/png;base64,iVBORw0KGgo=");
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  EXPECT_EQ(*b, (std::vector<uint8_t>{0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A}));
  b = decode_data_url("data:application/octet-stream;name=x;base64,/+8A\n3q2+");  // no padding needed
  ASSERT_TRUE(b.has_value()) << b.status().to_string();
  EXPECT_EQ(*b, (std::vector<uint8_t>{0xFF, 0xEF, 0x00, 0xDE, 0xAD, 0xBE}));
  b = decode_data_url("data:image/jpeg;base64,");
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->empty());
}

TEST(ImageDataUrl, RoundTripsAFixtureThroughDecode) {
  const std::vector<uint8_t> png = read_bytes(image_fixture("gray_19x11.png"));
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string url = "data:image/png;base64,";
  for (size_t i = 0; i < png.size(); i += 3) {
    const uint32_t v = uint32_t(png[i]) << 16 | (i + 1 < png.size() ? png[i + 1] << 8 : 0) |
                       (i + 2 < png.size() ? png[i + 2] : 0);
    url += kAlphabet[v >> 18];
    url += kAlphabet[(v >> 12) & 63];
    url += i + 1 < png.size() ? kAlphabet[(v >> 6) & 63] : '=';
    url += i + 2 < png.size() ? kAlphabet[v & 63] : '=';
  }
  auto bytes = decode_data_url(url);
  ASSERT_TRUE(bytes.has_value()) << bytes.status().to_string();
  EXPECT_EQ(*bytes, png);
  EXPECT_TRUE(decode_image(*bytes).has_value());
}

TEST(ImageDataUrl, RefusesWithClearErrors) {
  const std::pair<const char*, const char*> bad[] = {
      {"https://example.com/cat.png", "not a data URL"},
      {"data:image/png,%89PNG", "not base64-encoded"},
      {"data:image/png;base64", "no ','"},
      {"data:image/png;base64,iVBO*w0K", "offset 4"},
      {"data:image/png;base64,iVBOR", "truncated"},
      {"data:image/png;base64,iV==BO", "after '=' padding"},
  };
  for (const auto& [url, needle] : bad) {
    auto b = decode_data_url(url);
    ASSERT_FALSE(b.has_value()) << url;
    EXPECT_EQ(b.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(b.status().message().find(needle), std::string::npos) << url << " -> " << b.status().to_string();
  }
}

void expect_refused(std::span<const uint8_t> bytes, const std::string& what) {
  auto img = decode_image(bytes);
  EXPECT_FALSE(img.has_value()) << what << " decoded as " << img->width << "x" << img->height;
  if (!img) {
    EXPECT_FALSE(img.status().message().empty()) << what;
  }
}

TEST(ImageBadInput, UnknownFormatsNameTheAcceptedOnes) {
  const std::vector<std::vector<uint8_t>> inputs = {
      {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0}, {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P'},
      {'h', 'e', 'l', 'l', 'o'}, {0x89, 'P', 'N'}, {0xFF, 0xD8}};
  for (const auto& bytes : inputs) {
    auto img = decode_image(bytes);
    ASSERT_FALSE(img.has_value());
    EXPECT_EQ(img.status().code(), StatusCode::unsupported);
    EXPECT_NE(img.status().message().find("accepted formats: PNG, JPEG"), std::string::npos) << img.status().to_string();
  }
  auto empty = decode_image({});
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.status().message(), "empty image data");
}

TEST(ImageBadInput, CmykJpegIsUnsupported) {
  auto img = decode_image(read_bytes(image_fixture("cmyk_8x8.jpg")));
  ASSERT_FALSE(img.has_value());
  EXPECT_EQ(img.status().code(), StatusCode::unsupported);
  EXPECT_NE(img.status().message().find("CMYK"), std::string::npos);
}

// Cut at many points (inside the header, the first row, the middle, the last bytes): an error,
// never a crash or a partial image. A JPEG cut only in its final EOI marker still decodes whole,
// as Pillow decodes it.
TEST(ImageBadInput, TruncatedFilesAreCorrupt) {
  for (const char* file : {"rgb_37x23.png", "palette_24x17.png", "rgba16_11x7.png", "baseline_37x23.jpg",
                           "progressive_37x23.jpg", "subsampled420_37x23.jpg", "large_160x120.png"}) {
    const std::vector<uint8_t> bytes = read_bytes(image_fixture(file));
    const bool jpeg = std::string(file).ends_with(".jpg");
    const size_t n = bytes.size(), tail = jpeg ? 2 : 12;  // EOI / IEND chunk
    for (size_t cut : {size_t(4), size_t(9), size_t(20), size_t(33), n / 4, n / 2, n - tail - 5, n - tail - 1}) {
      SCOPED_TRACE(std::string(file) + " cut at " + std::to_string(cut) + " of " + std::to_string(n));
      auto img = decode_image(std::span(bytes).first(cut));
      ASSERT_FALSE(img.has_value());
      if (cut > 8) {
        EXPECT_EQ(img.status().code(), StatusCode::corrupt) << img.status().to_string();
      }
    }
  }
}

TEST(ImageBadInput, HugeAndZeroDimensionsAreRefusedBeforeAllocating) {
  std::vector<uint8_t> png = read_bytes(image_fixture("gray_19x11.png"));
  // IHDR's width at offset 16 (big-endian); libpng checks the chunk CRC, so patch it too.
  auto set_width = [&](uint32_t w) {
    std::vector<uint8_t> p = png;
    for (int i = 0; i < 4; ++i) p[16 + i] = uint8_t(w >> (24 - 8 * i));
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 12; i < 29; ++i) {
      crc ^= p[i];
      for (int k = 0; k < 8; ++k) crc = crc & 1 ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
    }
    crc ^= 0xFFFFFFFFu;
    for (int i = 0; i < 4; ++i) p[29 + i] = uint8_t(crc >> (24 - 8 * i));
    return p;
  };
  auto img = decode_image(set_width(20000));
  ASSERT_FALSE(img.has_value());
  EXPECT_NE(img.status().message().find("too large"), std::string::npos) << img.status().to_string();
  expect_refused(set_width(0), "zero width");
  ASSERT_TRUE(decode_image(set_width(19)).has_value());  // the CRC patch itself is right

  std::vector<uint8_t> jpg = read_bytes(image_fixture("baseline_37x23.jpg"));
  for (size_t i = 0; i + 8 < jpg.size(); ++i) {  // SOF0: FF C0, length(2), precision, height(2)
    if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
      jpg[i + 5] = 0x7F;  // height 0x7F17 = 32535
      break;
    }
  }
  img = decode_image(jpg);
  ASSERT_FALSE(img.has_value());
  EXPECT_NE(img.status().message().find("too large"), std::string::npos) << img.status().to_string();
}

// An EXIF block that cannot be read (its IFD past the end, an orientation out of 1..8, a tag
// count beyond the block) leaves the image as stored, as Pillow's exif_transpose does; a readable
// one turns it (6: 90 degrees clockwise, so 7 x 4 becomes 4 x 7).
TEST(ImageDecode, UnreadableExifLeavesTheImageAsStored) {
  const std::vector<uint8_t> jpg = read_bytes(image_fixture("exif6be_7x4.jpg"));
  const std::string marker("Exif\0\0MM", 8);
  const auto at = std::search(jpg.begin(), jpg.end(), marker.begin(), marker.end());
  ASSERT_NE(at, jpg.end());
  const size_t tiff = size_t(at - jpg.begin()) + 6;  // MM, 42, IFD offset 8; 1 entry: tag, type, count, value
  auto dims = [](const std::vector<uint8_t>& b) {
    auto img = decode_image(b);
    EXPECT_TRUE(img.has_value()) << img.status().to_string();
    return img ? std::pair(img->width, img->height) : std::pair(0, 0);
  };
  EXPECT_EQ(dims(jpg), std::pair(4, 7));
  std::vector<uint8_t> far = jpg;
  far[tiff + 4] = far[tiff + 5] = 0xFF;  // IFD offset 0xFFFF0008
  EXPECT_EQ(dims(far), std::pair(7, 4));
  std::vector<uint8_t> nine = jpg;
  nine[tiff + 8 + 2 + 9] = 9;  // the SHORT value 6 -> 9
  EXPECT_EQ(dims(nine), std::pair(7, 4));
  std::vector<uint8_t> untyped = jpg;
  untyped[tiff + 8 + 2 + 2] = 0x00, untyped[tiff + 8 + 2 + 3] = 0x07;  // type 7 (UNDEFINED): not a number
  EXPECT_EQ(dims(untyped), std::pair(7, 4));
}

// Random byte flips and random tails after a valid signature: the decoder may succeed (a flip in
// JPEG entropy data only changes pixels) but must not crash, leak or read out of bounds (run
// under scripts/asan.sh).
TEST(ImageBadInput, FlippedBytesNeverCrash) {
  std::mt19937 rng(7);
  for (const char* file : {"rgb_37x23.png", "palette_trns_16x8.png", "gray16_11x7.png", "baseline_37x23.jpg",
                           "progressive_37x23.jpg", "gray_19x11.jpg", "exif6be_7x4.jpg", "exif5_rgba_7x4.png"}) {
    const std::vector<uint8_t> bytes = read_bytes(image_fixture(file));
    for (int trial = 0; trial < 150; ++trial) {
      std::vector<uint8_t> b = bytes;
      for (int k = 0; k < 1 + trial % 4; ++k) b[8 + rng() % (b.size() - 8)] ^= uint8_t(1 + rng() % 255);
      auto img = decode_image(b);
      if (img) {
        EXPECT_EQ(img->rgb.size(), size_t(img->width) * img->height * 3);
      }
    }
  }
  for (std::string magic : {std::string("\x89PNG\r\n\x1a\n"), std::string("\xFF\xD8\xFF")}) {
    for (int trial = 0; trial < 100; ++trial) {
      std::vector<uint8_t> b(magic.begin(), magic.end());
      for (int k = 0; k < trial * 3; ++k) b.push_back(uint8_t(rng()));
      expect_refused(b, "random bytes after a signature");
    }
  }
}

}  // namespace
}  // namespace brigade
