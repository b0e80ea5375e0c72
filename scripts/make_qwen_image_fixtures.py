#!/usr/bin/env python3
"""Writes tests/fixtures/images_qwen/, which tests/models/qwen_image_processor_test.cpp reads.

References, never brigade's own code (transformers 5, PIL backend):
- pixel values: `Qwen2VLImageProcessorPil.from_pretrained(dir)(images=Image.open(f),
  return_tensors="np")` for a preprocessor_config.json per config in CONFIGS: "pixel_values"
  (little-endian float32 [grid_h * grid_w, 3 * T * P * P], <image>.<config>.f32) and
  "image_grid_thw" (in cases.json). Source images are some of tests/fixtures/images' files (by
  path) and a few made here (seeded numpy, saved as PNG);
- smart_resize: transformers.models.qwen2_vl.image_processing_pil_qwen2_vl.smart_resize on a table
  of sizes and budgets (round-half-even ties, floor/ceil landing on integers, the factor floor on
  thin sides, aspect ratios of 200 and just above it, random sizes), its (height, width) or its
  ValueError;
- config loading: the processor from_pretrained builds from each of CONFIG_PROBES (its pixel
  budget and fields), or the error transformers raises when it preprocesses with it.
cases.json holds all of it. The folder is about 680 KB.

Runs itself inside .brigade/fixtures-venv (make_fixtures.ensure_venv); CI never runs it.
Run from anywhere: python3 scripts/make_qwen_image_fixtures.py
"""
import io
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
from make_image_fixtures import ensure_pillow, pil_bytes, smooth_rgb  # noqa: E402

FIXTURES = mf.ROOT / "tests" / "fixtures"
OUT = FIXTURES / "images_qwen"
SHARED = "images"  # tests/fixtures/images, written by make_image_fixtures.py

# preprocessor_config.json contents. Sizes are chosen to keep the fixture small: each case's
# pixel_values take 4 * 3 * T bytes per pixel of the resized image.
CONFIGS = {
    # transformers' class defaults: min_pixels 3136, max_pixels 1003520, patch 14, merge 2, T 2.
    "default": {"image_processor_type": "Qwen2VLImageProcessor"},
    # max_pixels forces a downscale of anything above 4704 pixels.
    "downscale": {"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 784, "max_pixels": 28 * 28 * 6,
                  "rescale_factor": 0.00392156862745098},
    # newer files' size{} form; min_pixels forces an upscale; patch 7 (factor 14), BILINEAR.
    "upscale_p7": {"image_processor_type": "Qwen2VLImageProcessorFast",
                   "size": {"shortest_edge": 2000, "longest_edge": 14 * 14 * 16}, "patch_size": 7, "resample": 2},
    # one frame, no merging, no normalisation, scalar mean/std ignored.
    "flat": {"merge_size": 1, "temporal_patch_size": 1, "min_pixels": 196, "max_pixels": 14 * 14 * 12,
             "do_normalize": False, "rescale_factor": 1 / 127.5, "image_mean": 0.5, "image_std": 0.5},
    # no resize (the image's sides are multiples of 28), no rescale, per-channel std.
    "noresize": {"do_resize": False, "do_rescale": False, "image_mean": 100, "image_std": [50, 60, 70]},
}

# (image, config): images under SHARED are referenced by path, the others are written here.
CASES = [
    (SHARED + "/baseline_37x23.jpg", "default"),
    (SHARED + "/rgba_21x13.png", "upscale_p7"),
    (SHARED + "/gray_19x11.png", "upscale_p7"),
    (SHARED + "/large_160x120.png", "downscale"),
    # the factor floor (28 x 196 > max_pixels), and Pillow 13 resizing vertically first (the
    # height shrinks by more than twice as many pixels as the width)
    ("images_qwen/tall_30x300.png", "downscale"),
    ("images_qwen/wide_100x60.png", "downscale"),
    ("images_qwen/wide_100x60.png", "flat"),
    ("images_qwen/block_56x28.png", "noresize"),
]

DEFAULT_BUDGET = (56 * 56, 28 * 28 * 1280)
BUDGETS = [DEFAULT_BUDGET, (3136, 12845056), (784, 4704), (2000, 3136), (65536, 16777216)]

# Config files as checkpoints have them, and variations on the pixel budget's two forms.
CONFIG_PROBES = [
    {},
    {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
     "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
     "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor"},
    {"size": {"shortest_edge": 3136, "longest_edge": 12845056}, "do_convert_rgb": True, "resample": 3,
     "rescale_factor": 0.00392156862745098, "image_processor_type": "Qwen2VLImageProcessorFast"},
    {"size": {"shortest_edge": 1000, "longest_edge": 5000}, "max_pixels": 6000},
    {"size": {"shortest_edge": 1000, "longest_edge": 5000}, "min_pixels": 2000},
    {"size": {"min_pixels": 3136, "max_pixels": 12845056}, "min_pixels": 3136, "max_pixels": 1003520},
    {"size": None, "max_pixels": 4000},
    {"max_pixels": None, "min_pixels": None},
    {"size": {"shortest_edge": 3136}},
    {"size": {"longest_edge": 3136}},
    {"size": {"min_pixels": 3136, "max_pixels": 12845056}},
    {"size": {"height": 224, "width": 224}},
    {"min_pixels": 0},
    {"patch_size": 16, "merge_size": 2, "image_mean": 0.5, "image_std": [0.5, 0.5, 0.5], "do_rescale": False},
    {"do_resize": False, "do_normalize": False, "do_convert_rgb": False, "resample": 2},
]


def make_images():
    """name -> PNG bytes of the images made here."""
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(20250712)
    return {
        "wide_100x60.png": pil_bytes(Image.fromarray(smooth_rgb(rng, 100, 60)), "PNG"),
        "tall_30x300.png": pil_bytes(Image.fromarray(smooth_rgb(rng, 30, 300)), "PNG"),
        "block_56x28.png": pil_bytes(Image.fromarray(smooth_rgb(rng, 56, 28)), "PNG"),
    }


def load_processor(config):
    """Qwen2VLImageProcessorPil.from_pretrained over a directory holding `config`."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "preprocessor_config.json").write_text(json.dumps(config))
        return Qwen2VLImageProcessorPil.from_pretrained(d)


def write_pixel_cases():
    import numpy as np
    from PIL import Image
    out = []
    for path, cname in CASES:
        img = Image.open(io.BytesIO((FIXTURES / path).read_bytes()))
        result = load_processor(CONFIGS[cname])(images=img, return_tensors="np")
        pv, thw = result["pixel_values"], result["image_grid_thw"].tolist()
        assert pv.dtype == np.float32 and len(thw) == 1, (pv.dtype, thw)
        name = f"{Path(path).name}.{cname}.f32"
        (OUT / name).write_bytes(pv.astype("<f4").tobytes())
        out.append({"image": path, "config": cname, "grid_thw": thw[0], "shape": list(pv.shape), "file": name})
    return out


def near_integer_sizes(factor, budget):
    """Non-square sizes whose floor/ceil argument in smart_resize lands within 1e-9 of an integer,
    where a different order of operations or rounding would step to the next multiple."""
    import math
    lo, hi = budget
    found = []
    for h in range(1, 800):
        for w in range(h + 1, h + 80):
            area = round(h / factor) * round(w / factor) * factor * factor
            if area > hi:
                x = h / math.sqrt(h * w / hi) / factor
            elif area < lo:
                x = h * math.sqrt(lo / (h * w)) / factor
            else:
                continue
            if abs(x - round(x)) < 1e-9:
                found.append((h, w))
    return found[::max(1, len(found) // 8)][:8]


def smart_resize_table():
    import numpy as np
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize
    rows = [(42, 70, 28, *DEFAULT_BUDGET),     # 1.5 rounds up to 2, 2.5 down to 2
            (14, 98, 28, 1, 10 ** 6),          # 0.5 rounds to 0: the min branch
            (1, 1, 28, *DEFAULT_BUDGET), (28, 28, 28, *DEFAULT_BUDGET), (224, 224, 28, *DEFAULT_BUDGET),
            (1080, 1920, 28, *DEFAULT_BUDGET), (16384, 16384, 28, *DEFAULT_BUDGET), (3000, 4000, 28, 3136, 12845056),
            (1, 200, 28, *DEFAULT_BUDGET), (200, 1, 28, *DEFAULT_BUDGET), (10, 2000, 28, *DEFAULT_BUDGET),
            (28, 5600, 28, 784, 4704), (5000, 30, 28, 784, 4704),
            (1, 201, 28, *DEFAULT_BUDGET), (201, 1, 28, *DEFAULT_BUDGET), (10, 2001, 28, *DEFAULT_BUDGET),
            (81, 16384, 28, *DEFAULT_BUDGET)]
    for factor, budget in ((28, DEFAULT_BUDGET), (28, (784, 4704)), (14, (2000, 3136)), (32, (65536, 16777216))):
        rows += [(h, w, factor, *budget) for h, w in near_integer_sizes(factor, budget)]
    rng = np.random.default_rng(7)
    for _ in range(300):
        h, w = (int(v) for v in np.exp(rng.uniform(0, np.log(16384), 2)).round().clip(1, 16384))
        factor = int(rng.choice([14, 28, 32]))
        rows.append((h, w, factor, *BUDGETS[int(rng.integers(len(BUDGETS)))]))
    table = []
    for h, w, factor, lo, hi in rows:
        entry = {"height": h, "width": w, "factor": factor, "min_pixels": lo, "max_pixels": hi}
        try:
            entry["resized"] = list(smart_resize(h, w, factor=factor, min_pixels=lo, max_pixels=hi))
        except ValueError as e:
            entry["error"] = str(e)
        table.append(entry)
    return table


def probe_configs():
    """What transformers makes of each CONFIG_PROBES file: its fields, or its error."""
    import numpy as np
    from PIL import Image
    img = Image.fromarray(np.zeros((56, 56, 3), np.uint8))
    out = []
    for config in CONFIG_PROBES:
        entry = {"config": config}
        try:
            p = load_processor(config)
            p(images=img, return_tensors="np")
            entry["parsed"] = {
                "min_pixels": p.size["shortest_edge"], "max_pixels": p.size["longest_edge"],
                "patch_size": p.patch_size, "temporal_patch_size": p.temporal_patch_size, "merge_size": p.merge_size,
                "resample": int(p.resample), "do_resize": p.do_resize, "do_rescale": p.do_rescale,
                "rescale_factor": p.rescale_factor, "do_normalize": p.do_normalize,
                "image_mean": list(np.broadcast_to(p.image_mean, 3).astype(float)),
                "image_std": list(np.broadcast_to(p.image_std, 3).astype(float)), "do_convert_rgb": p.do_convert_rgb}
        except ValueError as e:
            entry["error"] = str(e)
        out.append(entry)
    return out


def main():
    mf.ensure_venv(__file__)
    ensure_pillow()
    import shutil
    import transformers
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    for name, data in make_images().items():
        (OUT / name).write_bytes(data)
    cases = {"transformers": transformers.__version__, "configs": CONFIGS, "pixels": write_pixel_cases(),
             "smart_resize": smart_resize_table(), "config_probes": probe_configs()}
    (OUT / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    files = sorted(OUT.iterdir())
    print(f"{OUT}: {len(files)} files, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
