// Decoded images: PNG and JPEG bytes (or a base64 data URL) to RGB8 pixels, as Pillow gives them.
//
// The reference is what a Python server does with the same bytes: `PIL.Image.open(f)` then
// `.convert("RGB")` (and, for transparency, `.convert("RGBA")`'s alpha band). Decoding is
// bit-exact with Pillow for every PNG colour type and bit depth, and for baseline and
// progressive JPEG (libjpeg-turbo with the defaults Pillow uses: ISLOW IDCT, fancy upsampling).
// What Pillow does and brigade copies:
//   - grayscale is replicated to R=G=B; palette images are expanded through the palette;
//     1/2/4-bit grayscale is scaled to 0..255 (0b10 -> 170);
//   - 16-bit RGB, RGBA and gray+alpha PNGs keep each sample's high byte (v >> 8, truncating);
//     16-bit grayscale becomes min(v, 255) (Pillow opens it as mode "I;16" and clips to 8 bits);
//   - alpha is NOT composited into `rgb` (convert("RGB") drops it); it is kept in `alpha`, since
//     transformers' convert_to_rgb composites on white (image_processor.h);
//   - EXIF orientation (a JPEG's APP1 "Exif" segment, a PNG's eXIf chunk before the image data)
//     is applied: the image comes upright, as transformers' load_image
//     (PIL.ImageOps.exif_transpose) and vLLM's image loader give it; XMP orientation is not read;
//   - gAMA, iCCP and sRGB are ignored, as Image.open ignores them.
// Not handled: tRNS on 16-bit PNGs and on 1/2/4-bit grayscale PNGs (ignored: no alpha),
// CMYK/YCCK JPEGs, GIF, WebP and other formats (refused with an error naming the formats accepted).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace brigade {

// Refused above these, before any pixel memory is allocated: 16384 per side, 64 Mpixel (192 MiB RGB).
inline constexpr int kMaxImageSide = 16384;
inline constexpr int64_t kMaxImagePixels = int64_t{64} << 20;

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;    // [height, width, 3], row-major
  std::vector<uint8_t> alpha;  // [height, width]; empty when the image has no transparency
                               // (no alpha channel and no PNG tRNS chunk)
  bool has_alpha() const { return !alpha.empty(); }
};

// Decodes a PNG or JPEG (recognised by its magic bytes). Errors: unsupported for other formats
// (naming PNG and JPEG) and for CMYK JPEGs; corrupt for truncated or malformed data (a JPEG
// whose entropy data ends early included, as Pillow raises "image file is truncated");
// invalid_argument for empty input, zero dimensions or dimensions above the limits above.
// Never crashes on any input; libpng/libjpeg errors are caught and their message is returned.
Expected<Image> decode_image(std::span<const uint8_t> bytes);

// The bytes of a `data:<mime>[;param]*;base64,<data>` URL (RFC 2397), standard base64 alphabet,
// padding optional, ASCII whitespace ignored. The mime type is not checked here (decode_image
// checks the bytes). invalid_argument for a non-data URL, a data URL that is not base64, or
// bad base64 (naming the offending character's offset).
Expected<std::vector<uint8_t>> decode_data_url(std::string_view url);

}  // namespace brigade
