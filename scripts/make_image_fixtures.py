#!/usr/bin/env python3
"""Writes tests/fixtures/images/, which tests/models/image_test.cpp reads.

References, never brigade's own code:
- decode: Pillow's `ImageOps.exif_transpose(Image.open(f)).convert("RGB")` bytes (<name>.rgb,
  row-major RGB8; upright by the EXIF orientation, as transformers' load_image and vLLM's loader
  turn it) and, for images with transparency (an alpha band or a tRNS chunk), the alpha band of
  `.convert("RGBA")` (<name>.alpha), and transformers' convert_to_rgb of it, composited over white
  (<name>.white.rgb); exif<o>_* images carry each EXIF orientation o (JPEG APP1, big- and
  little-endian; a PNG eXIf chunk);
- resize: Pillow's `Image.resize((w, h), resample)` of the RGB image (<name>.<w>x<h>.<filter>.rgb),
  BILINEAR and BICUBIC at RESIZES, LANCZOS at LANCZOS_RESIZES;
- preprocess: transformers' slow (PIL backend) Gemma 3 image processor,
  `Gemma3ImageProcessorPil(**config)(images=pil_image, return_tensors="np")["pixel_values"][0]`,
  little-endian float32 [3, H, W] (<name>.<case>.f32).
cases.json lists every file with its shape and the processor configs. Images are made
deterministically (seeded numpy); PNGs that Pillow cannot write (16-bit, 2-bit gray) are written
by a minimal PNG encoder here, so Pillow's reading of them is what is recorded. Files are small
(the whole folder is a few hundred KB).

Runs itself inside .brigade/fixtures-venv (make_fixtures.ensure_venv) and installs pillow there
when missing; CI never runs it. Run from anywhere: python3 scripts/make_image_fixtures.py
"""
import importlib.util
import io
import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402

OUT = mf.ROOT / "tests" / "fixtures" / "images"

# Output sizes (width, height): downscale, stronger downscale, upscale, mixed up/down.
RESIZES = [(64, 64), (28, 28), (100, 80), (17, 50)]
FILTERS = {"bilinear": 2, "bicubic": 3}
# LANCZOS (code 1, Idefics3's / SmolVLM's default) at odd sizes: up, down by more than its 3-pixel
# support, mixed, and a height shrinking by more than twice the width (Pillow 13's vertical pass first).
LANCZOS_RESIZES = [(41, 29), (121, 97), (13, 7), (9, 61), (151, 31)]
# Processor configs (preprocessor_config.json fields) for the pixel_values cases.
CONFIGS = {
    "gemma": {"image_processor_type": "Gemma3ImageProcessor", "size": {"height": 32, "width": 48},
              "resample": 2, "do_resize": True, "do_rescale": True,
              "rescale_factor": 0.00392156862745098, "do_normalize": True,
              "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
              "do_convert_rgb": None, "do_pan_and_scan": None},
    "imagenet_bicubic": {"size": {"height": 40, "width": 24}, "resample": 3,
                         "image_mean": [0.48145466, 0.4578275, 0.40821073],
                         "image_std": [0.26862954, 0.26130258, 0.27577711]},
}


def ensure_pillow():
    if importlib.util.find_spec("PIL") is None:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "pillow"])


def smooth_rgb(rng, w, h):
    """Gradients plus noise: JPEG-friendly content whose every channel differs."""
    import numpy as np
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    base = np.stack([255 * x / max(w - 1, 1), 255 * y / max(h - 1, 1),
                     127.5 + 127.5 * np.sin((x + 2 * y) / 3.0)], axis=-1)
    return np.clip(base + rng.normal(0, 20, base.shape), 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def raw_png(rows, width, height, bit_depth, color_type, extra=b""):
    """A non-interlaced PNG from packed scanlines (bytes each, filter type 0 prepended here)."""
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    data = zlib.compress(b"".join(b"\0" + r for r in rows))
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra + png_chunk(b"IDAT", data) +
            png_chunk(b"IEND", b""))


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def adam7_png(rgb):
    """An interlaced 8-bit RGB PNG (Pillow does not write interlaced PNGs)."""
    h, w = rgb.shape[:2]
    rows = [rgb[y0::dy, x0::dx][i].tobytes() for (x0, y0, dx, dy) in ADAM7
            for i in range(len(range(y0, h, dy))) if x0 < w]
    png = raw_png(rows, w, h, 8, 2)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)
    return png[:8] + png_chunk(b"IHDR", ihdr) + png[8 + 25:]


def pil_bytes(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def make_images():
    """name -> encoded file bytes (the name's suffix is the file extension)."""
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(20250301)
    rgb = smooth_rgb(rng, 37, 23)
    images = {
        "rgb_37x23.png": pil_bytes(Image.fromarray(rgb), "PNG"),
        "gray_19x11.png": pil_bytes(Image.fromarray(rgb[:11, :19, 0]), "PNG"),
        "rgba_21x13.png": None,
        "la_15x9.png": pil_bytes(Image.fromarray(
            np.stack([rgb[:9, :15, 1], rng.integers(0, 256, (9, 15), dtype=np.uint8)], -1), "LA"),
            "PNG"),
        "palette_24x17.png": pil_bytes(Image.fromarray(rgb[:17, :24]).quantize(37), "PNG"),
        "palette_trns_16x8.png": None,
        "gray1_13x7.png": pil_bytes(Image.fromarray(rgb[:7, :13, 0] > 128), "PNG"),
        "large_160x120.png": pil_bytes(Image.fromarray(smooth_rgb(rng, 160, 120)), "PNG"),
        "baseline_37x23.jpg": pil_bytes(Image.fromarray(rgb), "JPEG", quality=90, subsampling=0),
        "progressive_37x23.jpg": pil_bytes(Image.fromarray(rgb), "JPEG", quality=85,
                                           progressive=True, subsampling=0),
        "subsampled420_37x23.jpg": pil_bytes(Image.fromarray(rgb), "JPEG", quality=85,
                                             subsampling=2),
        "subsampled422_37x23.jpg": pil_bytes(Image.fromarray(rgb), "JPEG", quality=85,
                                             subsampling=1),
        "gray_19x11.jpg": pil_bytes(Image.fromarray(rgb[:11, :19, 0]), "JPEG", quality=90),
    }
    alpha = np.concatenate([np.arange(256, dtype=np.uint8), np.full(21 * 13 - 256, 255, np.uint8)])
    rgba = np.concatenate([rgb[:13, :21], alpha.reshape(13, 21, 1)], axis=-1)
    images["rgba_21x13.png"] = pil_bytes(Image.fromarray(rgba, "RGBA"), "PNG")
    pal = Image.fromarray(rgb[:8, :16]).quantize(8)
    images["palette_trns_16x8.png"] = pil_bytes(pal, "PNG", transparency=bytes([0, 128, 255, 7]))

    # 16-bit and 2-bit PNGs (Pillow does not write these): big-endian samples.
    w, h = 11, 7
    v16 = rng.integers(0, 65536, (h, w, 4), dtype=np.uint16)
    v16[0, :4, :] = [[0, 0, 0, 0], [255, 256, 257, 65535], [65280, 65279, 1, 128], [300, 511, 512, 9]]
    images["rgb16_11x7.png"] = raw_png([v16[y, :, :3].astype(">u2").tobytes() for y in range(h)],
                                       w, h, 16, 2)
    images["rgba16_11x7.png"] = raw_png([v16[y].astype(">u2").tobytes() for y in range(h)],
                                        w, h, 16, 6)
    images["gray16_11x7.png"] = raw_png([v16[y, :, 0].astype(">u2").tobytes() for y in range(h)],
                                        w, h, 16, 0)
    images["interlaced_37x23.png"] = adam7_png(rgb)
    images["la16_11x7.png"] = raw_png([v16[y, :, [0, 3]].T.astype(">u2").tobytes() for y in range(h)],
                                      w, h, 16, 4)
    g2 = rng.integers(0, 4, (h, 12), dtype=np.uint8)
    images["gray2_12x7.png"] = raw_png(
        [bytes((r[i] << 6) | (r[i + 1] << 4) | (r[i + 2] << 2) | r[i + 3] for i in range(0, 12, 4))
         for r in g2], 12, h, 2, 0)
    # EXIF orientations 1..8 (Pillow writes little-endian TIFF), one big-endian block written by
    # hand, and an RGBA PNG's eXIf chunk: an asymmetric image, so every transform differs.
    small = Image.fromarray(rgb[:4, :7])
    for o in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = o
        images[f"exif{o}_7x4.jpg"] = pil_bytes(small, "JPEG", quality=95, subsampling=0, exif=exif.tobytes())
    be = (b"Exif\x00\x00" + b"MM\x00\x2a" + struct.pack(">I", 8) + struct.pack(">H", 1) +
          struct.pack(">HHII", 0x0112, 3, 1, 6 << 16) + struct.pack(">I", 0))
    images["exif6be_7x4.jpg"] = pil_bytes(small, "JPEG", quality=95, subsampling=0, exif=be)
    exif = Image.Exif()
    exif[0x0112] = 5
    images["exif5_rgba_7x4.png"] = pil_bytes(Image.fromarray(rgba[:4, :7], "RGBA"), "PNG", exif=exif.tobytes())
    # CMYK JPEG: brigade refuses it (bad input tests), so only the file is written.
    images["cmyk_8x8.jpg"] = pil_bytes(Image.fromarray(rgb[:8, :8]).convert("CMYK"), "JPEG")
    return images


def has_transparency(img):
    return "A" in img.getbands() or img.info.get("transparency") is not None


def write_image_case(name, data, cases):
    import numpy as np
    from PIL import Image
    from transformers.image_transforms import convert_to_rgb
    from PIL import ImageOps
    (OUT / name).write_bytes(data)
    img = Image.open(io.BytesIO(data))
    if not name.startswith("cmyk"):
        img = ImageOps.exif_transpose(img)
    entry = {"file": name, "width": img.width, "height": img.height, "pil_mode": img.mode}
    if name.startswith("cmyk"):
        cases["refused"].append(entry)
        return None
    rgb = img.convert("RGB")
    entry["rgb"] = name + ".rgb"
    (OUT / entry["rgb"]).write_bytes(np.asarray(rgb).tobytes())
    if has_transparency(img):
        entry["alpha"] = name + ".alpha"
        (OUT / entry["alpha"]).write_bytes(np.asarray(img.convert("RGBA"))[:, :, 3].tobytes())
        entry["on_white"] = name + ".white.rgb"
        (OUT / entry["on_white"]).write_bytes(convert_to_rgb(img, return_numpy=True).tobytes())
    cases["images"].append(entry)
    return img


def write_resize_cases(name, img, cases):
    import numpy as np
    rgb = img.convert("RGB")
    sized = [(w, h, fname, code) for (w, h) in RESIZES for fname, code in FILTERS.items()]
    sized += [(w, h, "lanczos", 1) for (w, h) in LANCZOS_RESIZES]
    for (w, h, fname, code) in sized:
        out = f"{name}.{w}x{h}.{fname}.rgb"
        (OUT / out).write_bytes(np.asarray(rgb.resize((w, h), code)).tobytes())
        cases["resizes"].append({"src": name, "width": w, "height": h, "resample": code,
                                 "file": out})


def write_preprocess_cases(name, img, cases):
    import numpy as np
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
    for cname, config in CONFIGS.items():
        kwargs = {k: v for k, v in config.items() if k != "image_processor_type" and v is not None}
        proc = Gemma3ImageProcessorPil(**kwargs)
        pv = proc(images=img, return_tensors="np")["pixel_values"][0]
        assert pv.dtype == np.float32, pv.dtype
        out = f"{name}.{cname}.f32"
        (OUT / out).write_bytes(pv.astype("<f4").tobytes())
        cases["preprocess"].append({"src": name, "config": cname, "shape": list(pv.shape),
                                    "file": out})


RESIZED = {"rgb_37x23.png", "large_160x120.png"}
PREPROCESSED = {"rgb_37x23.png", "large_160x120.png", "rgba_21x13.png", "gray_19x11.png",
                "palette_trns_16x8.png", "baseline_37x23.jpg"}


def main():
    mf.ensure_venv(__file__)
    ensure_pillow()
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        old.unlink()
    cases = {"images": [], "refused": [], "resizes": [], "preprocess": [], "configs": CONFIGS}
    for name, data in make_images().items():
        img = write_image_case(name, data, cases)
        if name in RESIZED:
            write_resize_cases(name, img, cases)
        if name in PREPROCESSED:
            write_preprocess_cases(name, img, cases)
    (OUT / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
