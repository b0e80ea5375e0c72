// Pillow's Image.resize for RGB8 images, bit for bit (libImaging/Resample.c, ImagingResample).
//
// Exactness matters because the vision encoder's outputs are compared with transformers', whose
// slow image processors resize through Pillow: a one-level difference in a pixel moves
// pixel_values by 2/255 and the encoder's outputs with it.
//
// The algorithm, as Pillow has it: a separable convolution, horizontal pass first, then
// vertical; a pass whose size is unchanged is skipped. For output index i of a pass from n_in
// to n_out samples, scale = n_in / n_out, the filter is stretched by max(scale, 1) (so a
// downscale averages, i.e. antialiases), and its taps cover input indices
// [int(center - support + 0.5), int(center + support + 0.5)) clipped to the input, where
// center = (i + 0.5) * scale and support = filter support * max(scale, 1). The tap weights are
// normalised to sum 1, then made fixed point with 22 fractional bits (rounded away from zero),
// and each pass rounds (adds 0.5) and clips to 0..255, so the intermediate image is uint8 too.
#pragma once

#include "models/image.h"

namespace brigade {

// PIL filter codes (PIL.Image.Resampling) brigade implements; the value is the code
// preprocessor_config.json's `resample` holds. The filters' supports, in input pixels before a
// downscale stretches them: LANCZOS 3 (sinc(x) * sinc(x / 3), Pillow's), BILINEAR 1 (the
// triangle), BICUBIC 2 (Keys' cubic, a = -0.5). Which codes a processor accepts is its parser's
// choice (image_processor.h: 2 or 3; idefics3_image_processor.h: 1, 2 or 3).
enum class Resample : int { lanczos = 1, bilinear = 2, bicubic = 3 };

// Image.resize((width, height), filter) of src's RGB pixels, as Pillow 13 computes it (both
// passes' order included). The result has no alpha (composite first: image_processor.h). width
// and height in [1, kMaxImageSide]; a resize to src's own size returns a copy, as Pillow does.
Image resize_rgb(const Image& src, int width, int height, Resample filter);

}  // namespace brigade
