#include "models/image.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE
#include <cstring>
#include <string>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

namespace brigade {
namespace {

// libpng and libjpeg report errors by longjmp. A longjmp that would skip a non-trivial destructor
// is undefined behaviour, so each library call runs in `step` under a guard whose frame holds no
// such object; everything that owns memory (the library structs' RAII handles, pixel buffers)
// lives in the callers and is sized between guarded steps.

Status check_dimensions(const char* format, uint64_t width, uint64_t height) {
  const std::string dims = std::to_string(width) + "x" + std::to_string(height);
  if (width == 0 || height == 0) return invalid_argument(std::string(format) + " image has zero size (" + dims + ")");
  if (width > kMaxImageSide || height > kMaxImageSide || width * height > uint64_t(kMaxImagePixels)) {
    return invalid_argument(std::string(format) + " image is too large (" + dims + "); the limits are " +
                            std::to_string(kMaxImageSide) + " pixels per side and " +
                            std::to_string(kMaxImagePixels >> 20) + " Mpixel");
  }
  return Status::ok();
}

// ---- EXIF orientation ------------------------------------------------------------------------

// The Orientation tag (0x0112, a SHORT or LONG) of IFD0 in an EXIF block that starts at its TIFF
// header ("II" or "MM", 42, the IFD's offset); 1 (as stored) when absent or unreadable.
int exif_orientation(std::span<const uint8_t> tiff) {
  if (tiff.size() < 8) return 1;
  const bool le = tiff[0] == 'I' && tiff[1] == 'I';
  if (!le && !(tiff[0] == 'M' && tiff[1] == 'M')) return 1;
  auto u16 = [&](size_t at) -> uint32_t {
    return le ? uint32_t(tiff[at]) | uint32_t(tiff[at + 1]) << 8 : uint32_t(tiff[at]) << 8 | uint32_t(tiff[at + 1]);
  };
  auto u32 = [&](size_t at) -> uint32_t { return le ? u16(at) | u16(at + 2) << 16 : u16(at) << 16 | u16(at + 2); };
  if (u16(2) != 42) return 1;
  const uint64_t ifd = u32(4);
  if (ifd + 2 > tiff.size()) return 1;
  const uint32_t n = u16(size_t(ifd));
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t e = ifd + 2 + 12 * uint64_t{i};
    if (e + 12 > tiff.size()) return 1;
    if (u16(size_t(e)) != 0x0112) continue;
    const uint32_t type = u16(size_t(e) + 2), count = u32(size_t(e) + 4);
    if (count != 1) return 1;
    if (type == 3) return int(u16(size_t(e) + 8));
    if (type == 4) return int(std::min<uint32_t>(u32(size_t(e) + 8), 9));
    return 1;
  }
  return 1;
}

// The image upright, as PIL's ImageOps.exif_transpose turns it for EXIF orientation o: 2 mirrors
// it, 3 rotates it 180 degrees, 4 flips it, 5 transposes it, 6 rotates it 90 degrees clockwise,
// 7 transverses it, 8 rotates it 90 degrees counter-clockwise; any other value leaves it.
Image upright(Image src, int o) {
  if (o < 2 || o > 8) return src;
  const bool swap = o >= 5;
  const int w = src.width, h = src.height;
  Image out{swap ? h : w, swap ? w : h, std::vector<uint8_t>(src.rgb.size()), {}};
  if (src.has_alpha()) out.alpha.resize(src.alpha.size());
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x) {
      int sx = x, sy = y;  // the source pixel of output (x, y)
      switch (o) {
        case 2: sx = w - 1 - x; break;
        case 3: sx = w - 1 - x, sy = h - 1 - y; break;
        case 4: sy = h - 1 - y; break;
        case 5: sx = y, sy = x; break;
        case 6: sx = y, sy = h - 1 - x; break;
        case 7: sx = w - 1 - y, sy = h - 1 - x; break;
        default: sx = w - 1 - y, sy = x; break;  // 8
      }
      const size_t to = size_t(y) * out.width + x, from = size_t(sy) * w + sx;
      std::memcpy(&out.rgb[to * 3], &src.rgb[from * 3], 3);
      if (src.has_alpha()) out.alpha[to] = src.alpha[from];
    }
  return out;
}

// ---- PNG -------------------------------------------------------------------------------------

struct PngSource {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
};

struct PngHandle {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::string message;  // libpng's last error (png_on_error)
  PngHandle() = default;
  PngHandle(const PngHandle&) = delete;
  PngHandle& operator=(const PngHandle&) = delete;
  ~PngHandle() { png_destroy_read_struct(&png, &info, nullptr); }
};

void png_on_error(png_structp png, png_const_charp msg) {
  static_cast<PngHandle*>(png_get_error_ptr(png))->message.assign(msg);
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}  // Pillow does not surface PNG warnings either

void png_read_from(png_structp png, png_bytep out, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->bytes.size() - src->pos) png_error(png, "truncated PNG data");
  std::memcpy(out, src->bytes.data() + src->pos, n);
  src->pos += n;
}

// Runs `step` (libpng calls only); false when libpng raised an error (h.message says which).
template <class Step>
bool png_guarded(PngHandle& h, Step&& step) {
  if (setjmp(png_jmpbuf(h.png))) return false;
  step();
  return true;
}

// The decoded rows after png_configure: [height, row_bytes], n_channels samples of bit_depth.
struct PngLayout {
  int n_channels = 0;
  int bit_depth = 8;  // 16 only for 16-bit grayscale without alpha, clipped in png_to_image
  size_t row_bytes = 0;
};

// Expands everything to 8-bit gray / gray+alpha / RGB / RGBA as Pillow's modes hold it.
void png_configure(png_structp png, png_infop info, PngLayout& layout) {
  const int color_type = png_get_color_type(png, info);
  const int bit_depth = png_get_bit_depth(png, info);
  const bool trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    png_set_palette_to_rgb(png);
    if (trns) png_set_tRNS_to_alpha(png);
  } else if (bit_depth == 8 && trns) {
    png_set_tRNS_to_alpha(png);
  }
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bit_depth == 16 && color_type != PNG_COLOR_TYPE_GRAY) png_set_strip_16(png);  // high byte
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  layout.n_channels = png_get_channels(png, info);
  layout.bit_depth = png_get_bit_depth(png, info);
  layout.row_bytes = png_get_rowbytes(png, info);
}

Image png_to_image(int width, int height, const PngLayout& layout, const std::vector<uint8_t>& rows) {
  Image img{width, height, std::vector<uint8_t>(size_t(width) * height * 3), {}};
  const int c = layout.n_channels;
  const bool alpha = c == 2 || c == 4;
  if (alpha) img.alpha.resize(size_t(width) * height);
  for (int y = 0; y < height; ++y) {
    const uint8_t* row = rows.data() + size_t(y) * layout.row_bytes;
    for (int x = 0; x < width; ++x) {
      const size_t i = size_t(y) * width + x;
      uint8_t* out = &img.rgb[i * 3];
      if (layout.bit_depth == 16) {  // gray, big-endian
        const int v = row[x * 2] << 8 | row[x * 2 + 1];
        out[0] = out[1] = out[2] = uint8_t(std::min(v, 255));
      } else if (c <= 2) {
        out[0] = out[1] = out[2] = row[x * c];
      } else {
        std::memcpy(out, row + x * c, 3);
      }
      if (alpha) img.alpha[i] = row[x * c + c - 1];
    }
  }
  return img;
}

// The orientation in an eXIf chunk before the image data (one after it is not read); its data
// is the TIFF block, which some writers prefix with JPEG's "Exif\0\0".
int png_orientation(png_structp png, png_infop info) {
  png_uint_32 n = 0;
  png_bytep exif = nullptr;
  if ((png_get_eXIf_1(png, info, &n, &exif) & PNG_INFO_eXIf) == 0 || exif == nullptr) return 1;
  std::span<const uint8_t> tiff(exif, n);
  if (tiff.size() >= 6 && std::memcmp(tiff.data(), "Exif\0\0", 6) == 0) tiff = tiff.subspan(6);
  return exif_orientation(tiff);
}

Expected<Image> decode_png(std::span<const uint8_t> bytes) {
  PngHandle h;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &h, png_on_error, png_on_warning);
  if (h.png) h.info = png_create_info_struct(h.png);
  if (!h.png || !h.info) return out_of_resources("PNG: libpng could not allocate its decoder");
  PngSource src{bytes};
  png_set_read_fn(h.png, &src, png_read_from);
  if (!png_guarded(h, [&] { png_read_info(h.png, h.info); })) return corrupt("PNG header: " + h.message);
  const uint32_t width = png_get_image_width(h.png, h.info), height = png_get_image_height(h.png, h.info);
  BRIGADE_RETURN_IF_ERROR(check_dimensions("PNG", width, height));

  PngLayout layout;
  if (!png_guarded(h, [&] { png_configure(h.png, h.info, layout); })) return corrupt("PNG: " + h.message);
  std::vector<uint8_t> rows(layout.row_bytes * height);
  std::vector<png_bytep> row_ptrs(height);
  for (uint32_t y = 0; y < height; ++y) row_ptrs[y] = rows.data() + size_t(y) * layout.row_bytes;
  if (!png_guarded(h, [&] { png_read_image(h.png, row_ptrs.data()); })) return corrupt("PNG data: " + h.message);
  return upright(png_to_image(int(width), int(height), layout, rows), png_orientation(h.png, h.info));
}

// ---- JPEG ------------------------------------------------------------------------------------

struct JpegHandle {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  bool hit_eof = false;  // the data ended early; libjpeg pads with a fake EOI and only warns
  JpegHandle() = default;
  JpegHandle(const JpegHandle&) = delete;
  JpegHandle& operator=(const JpegHandle&) = delete;
  ~JpegHandle() { jpeg_destroy_decompress(&cinfo); }  // safe on a zeroed or half-created struct
};

JpegHandle* jpeg_handle(j_common_ptr cinfo) { return static_cast<JpegHandle*>(cinfo->client_data); }

void jpeg_on_error(j_common_ptr cinfo) {
  JpegHandle* h = jpeg_handle(cinfo);
  (*cinfo->err->format_message)(cinfo, h->message);
  std::longjmp(h->jump, 1);
}

// Other warnings (e.g. extraneous bytes before a marker) are ignored, as Pillow ignores them.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_handle(cinfo)->hit_eof = true;
}

template <class Step>
bool jpeg_guarded(JpegHandle& h, Step&& step) {
  if (setjmp(h.jump)) return false;
  step();
  return true;
}

Status jpeg_failure(const JpegHandle& h, const char* stage) {
  if (h.hit_eof) return corrupt(std::string("truncated JPEG data (") + stage + ": " + h.message + ")");
  return corrupt(std::string("JPEG ") + stage + ": " + h.message);
}

// Picks the output colour space (Pillow's modes "L" and "RGB"); CMYK/YCCK are refused.
Status jpeg_choose_output(jpeg_decompress_struct& cinfo) {
  switch (cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: cinfo.out_color_space = JCS_GRAYSCALE; break;
    case JCS_YCbCr:
    case JCS_RGB: cinfo.out_color_space = JCS_RGB; break;
    case JCS_CMYK:
    case JCS_YCCK: return unsupported("CMYK JPEG images are not supported; convert the image to RGB");
    default:
      return unsupported("JPEG with " + std::to_string(cinfo.num_components) +
                         " components in an unknown colour space is not supported");
  }
  cinfo.dct_method = JDCT_ISLOW;  // libjpeg's and Pillow's default, stated since bytes depend on it
  cinfo.do_fancy_upsampling = TRUE;
  return Status::ok();
}

Expected<Image> decode_jpeg(std::span<const uint8_t> bytes) {
  JpegHandle h;
  h.cinfo.err = jpeg_std_error(&h.err);
  h.err.error_exit = jpeg_on_error;
  h.err.emit_message = jpeg_on_message;
  h.cinfo.client_data = &h;
  if (!jpeg_guarded(h, [&] {
        jpeg_create_decompress(&h.cinfo);  // keeps err and client_data
        jpeg_mem_src(&h.cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
        jpeg_save_markers(&h.cinfo, JPEG_APP0 + 1, 0xFFFF);  // APP1: EXIF
        jpeg_read_header(&h.cinfo, TRUE);
      })) {
    return jpeg_failure(h, "header");
  }
  BRIGADE_RETURN_IF_ERROR(check_dimensions("JPEG", h.cinfo.image_width, h.cinfo.image_height));
  BRIGADE_RETURN_IF_ERROR(jpeg_choose_output(h.cinfo));
  int orientation = 1;  // the first APP1 "Exif" segment's, as Pillow keeps the first
  for (jpeg_saved_marker_ptr m = h.cinfo.marker_list; m != nullptr; m = m->next)
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0) {
      orientation = exif_orientation(std::span<const uint8_t>(m->data + 6, m->data_length - 6));
      break;
    }
  if (!jpeg_guarded(h, [&] { jpeg_start_decompress(&h.cinfo); })) return jpeg_failure(h, "decoder setup");

  const int width = int(h.cinfo.output_width), height = int(h.cinfo.output_height);
  const int n_comp = h.cinfo.output_components;
  BRIGADE_CHECK(n_comp == 1 || n_comp == 3, "out_color_space is gray or RGB");
  std::vector<uint8_t> pixels(size_t(width) * height * n_comp);
  if (!jpeg_guarded(h, [&] {
        while (h.cinfo.output_scanline < h.cinfo.output_height) {
          JSAMPROW row = pixels.data() + size_t(h.cinfo.output_scanline) * width * n_comp;
          jpeg_read_scanlines(&h.cinfo, &row, 1);
        }
      })) {
    return jpeg_failure(h, "data");
  }
  if (h.hit_eof) return corrupt("truncated JPEG data: the entropy-coded data ends before the image does");
  if (n_comp == 3) return upright(Image{width, height, std::move(pixels), {}}, orientation);
  Image img{width, height, std::vector<uint8_t>(pixels.size() * 3), {}};
  for (size_t i = 0; i < pixels.size(); ++i) img.rgb[i * 3] = img.rgb[i * 3 + 1] = img.rgb[i * 3 + 2] = pixels[i];
  return upright(std::move(img), orientation);
}

// ---- format sniffing and data URLs -----------------------------------------------------------

bool starts_with(std::span<const uint8_t> bytes, std::string_view magic) {
  return bytes.size() >= magic.size() && std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
}

// A format we recognise but do not decode, for a more useful error; nullptr when unknown.
const char* other_format(std::span<const uint8_t> bytes) {
  if (starts_with(bytes, "GIF87a") || starts_with(bytes, "GIF89a")) return "GIF";
  if (starts_with(bytes, "RIFF") && bytes.size() >= 12 && std::memcmp(bytes.data() + 8, "WEBP", 4) == 0)
    return "WebP";
  if (starts_with(bytes, "BM")) return "BMP";
  if (starts_with(bytes, "II*") || starts_with(bytes, std::string_view("MM\0*", 4))) return "TIFF";
  return nullptr;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Standard alphabet; '=' padding optional but only at the end; whitespace skipped.
Expected<std::vector<uint8_t>> decode_base64(std::string_view text) {
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3 + 3);
  uint32_t bits = 0;
  int n_bits = 0, n_sextets = 0;
  size_t pad_at = text.size();
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_space(c)) continue;
    if (c == '=') { pad_at = i; break; }
    const int v = base64_value(c);
    if (v < 0) return invalid_argument("bad base64 in data URL: character " + std::to_string(int(uint8_t(c))) +
                                       " at offset " + std::to_string(i) + " is not in the base64 alphabet");
    bits = bits << 6 | uint32_t(v);
    n_bits += 6;
    ++n_sextets;
    if (n_bits >= 8) {
      n_bits -= 8;
      out.push_back(uint8_t(bits >> n_bits));
      bits &= (1u << n_bits) - 1;
    }
  }
  for (size_t i = pad_at; i < text.size(); ++i) {
    if (text[i] != '=' && !is_space(text[i]))
      return invalid_argument("bad base64 in data URL: data after '=' padding at offset " + std::to_string(i));
  }
  if (n_sextets % 4 == 1) return invalid_argument("bad base64 in data URL: truncated (one dangling character)");
  return out;
}

}  // namespace

Expected<Image> decode_image(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return invalid_argument("empty image data");
  if (starts_with(bytes, "\x89PNG\r\n\x1a\n")) return decode_png(bytes);
  if (starts_with(bytes, "\xFF\xD8\xFF")) return decode_jpeg(bytes);
  if (const char* name = other_format(bytes))
    return unsupported(std::string(name) + " images are not supported; accepted formats: PNG, JPEG");
  return unsupported("unknown image format (not PNG or JPEG by its first bytes); accepted formats: PNG, JPEG");
}

Expected<std::vector<uint8_t>> decode_data_url(std::string_view url) {
  constexpr std::string_view kScheme = "data:";
  if (url.substr(0, kScheme.size()) != kScheme)
    return invalid_argument("not a data URL (expected data:<mime>;base64,<data>)");
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos)
    return invalid_argument("malformed data URL: no ',' before the data (expected data:<mime>;base64,<data>)");
  const std::string_view header = url.substr(kScheme.size(), comma - kScheme.size());
  constexpr std::string_view kBase64 = ";base64";
  if (header.size() < kBase64.size() || header.substr(header.size() - kBase64.size()) != kBase64)
    return invalid_argument("data URL is not base64-encoded (expected data:<mime>;base64,<data>)");
  return decode_base64(url.substr(comma + 1));
}

}  // namespace brigade
