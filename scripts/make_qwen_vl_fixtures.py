#!/usr/bin/env python3
"""Writes tests/fixtures/qwen2_5_vl/ and tests/fixtures/qwen2_vl/: tiny random
Qwen2_5_VLForConditionalGeneration and Qwen2VLForConditionalGeneration checkpoints and
transformers' outputs on them, which tests/models/qwen_vision_test.cpp (the vision towers) and the
language-model tests compare with.

Each checkpoint is its family's Hub form at tiny size: config.json flat as
Qwen/Qwen2.5-VL-7B-Instruct's and Qwen/Qwen2-VL-7B-Instruct's (text fields at the top level,
vision_config beside them, the vision config's own names: in_chans, Qwen2-VL's embed_dim /
hidden_size / mlp_ratio and no hidden_act), model.safetensors under the Hub's names (`visual.*`,
`model.layers.*`, `model.embed_tokens`, `model.norm`, `lm_head`, not transformers 5's
`model.visual.*` / `model.language_model.*`); the script reloads the directory with
from_pretrained and checks that it reproduces the logits. Text model: 2 layers, hidden 64, 4 query
and 2 KV heads of 16, M-RoPE sections [2, 3, 3] (unequal, summing to head_dim / 2). Towers: patches
of 4x4 pixels over 2 frames (a patch row is 3 * 2 * 4 * 4 = 96 floats), merge 2;
  - Qwen2.5-VL: 3 blocks of width 32 (2 heads of 16), RMSNorm, gated SiLU MLP of 48 with biases,
    window_size 24 px = 3 x 3 merged tokens per window, block 1 full attention, blocks 0 and 2
    windowed, merger to 64;
  - Qwen2-VL: 2 blocks of width 32 (2 heads), LayerNorm, fc1 (mlp_ratio 2) / quick_gelu / fc2,
    full attention, merger to 64.
Images: random RGB bytes of grid * 4 pixels per side (grid_h x grid_w patches: 8x12, 10x4 and
6x6), each preprocessed by transformers' PIL Qwen2VLImageProcessor with this fixture's
preprocessor_config.json (no resize at these sizes). With 3 x 3 windows, 8x12 (4x6 tokens) has
four windows, two of them partial; 10x4 (5x2 tokens) two, both partial; 6x6 (3x3) exactly one.

expected.json:
  - `generator`, `vocab_size`, `patch_size`, `merge`, `temporal_patch`, `image_token`,
    `vision_start`, `vision_end`;
  - `images`: per image `grid_thw` [1, h, w] (patches), `pixel_values` [h * w, 96] (the
    processor's rows: each merge x merge block of patches is 4 consecutive rows) and `features`
    [(h / 2) * (w / 2), 64] (get_image_features' pooler_output: what replaces the image's tokens);
  - `cases`: `prompt` token ids, `images` (which images, in the order of their blocks: each block
    is vision_start, image_pad x tokens, vision_end, with text around), `logits` at every position
    (mm_token_type_ids marking the image pads, so M-RoPE positions apply), `greedy` (8 tokens of
    generate()), `position_ids` [3][len] and `rope_delta` (get_rope_index: every later token's
    rotary position is its index + rope_delta).
image0.png is the first image's bytes: preprocessing it gives images[0].pixel_values.

Run: python3 scripts/make_qwen_vl_fixtures.py (re-runs itself inside .brigade/fixtures-venv, as
scripts/make_fixtures.py does). CI never runs it: the fixtures are committed (about 1 MiB each).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, randomize  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402

VISION_START, VISION_END, IMAGE, VIDEO = 300, 301, 302, 303  # past a synthetic BPE's 300 ids
PATCH, MERGE, TEMPORAL = 4, 2, 2
GRIDS = [(8, 12), (10, 4), (6, 6)]  # (grid_h, grid_w) in patches
N_GREEDY = 8


def text_fields(arch, model_type):
    """The flat text part of a Hub Qwen2(.5)-VL config.json, at tiny size."""
    return {
        "architectures": [arch], "model_type": model_type, "attention_dropout": 0.0,
        "bos_token_id": 1, "eos_token_id": 2, "vision_start_token_id": VISION_START,
        "vision_end_token_id": VISION_END, "vision_token_id": 304, "image_token_id": IMAGE,
        "video_token_id": VIDEO, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
        "intermediate_size": 96, "max_position_embeddings": 4096, "max_window_layers": 2,
        "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0, "sliding_window": 4096, "tie_word_embeddings": False, "torch_dtype": "float32",
        "use_cache": True, "use_sliding_window": False, "vocab_size": 320,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
    }


FAMILIES = {
    "qwen2_5_vl": dict(
        seed=5151, model_cls="Qwen2_5_VLForConditionalGeneration",
        config={**text_fields("Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl"), "vision_config": {
            "depth": 3, "hidden_act": "silu", "hidden_size": 32, "intermediate_size": 48, "num_heads": 2,
            "in_chans": 3, "out_hidden_size": 64, "patch_size": PATCH, "spatial_merge_size": MERGE,
            "spatial_patch_size": PATCH, "window_size": 24, "fullatt_block_indexes": [1],
            "tokens_per_second": 2, "temporal_patch_size": TEMPORAL}}),
    "qwen2_vl": dict(
        seed=5252, model_cls="Qwen2VLForConditionalGeneration",
        config={**text_fields("Qwen2VLForConditionalGeneration", "qwen2_vl"), "vision_config": {
            "depth": 2, "embed_dim": 32, "mlp_ratio": 2, "num_heads": 2, "in_chans": 3, "hidden_size": 64,
            "patch_size": PATCH, "spatial_merge_size": MERGE, "spatial_patch_size": PATCH,
            "temporal_patch_size": TEMPORAL}}),
}

PROCESSOR = {
    "image_processor_type": "Qwen2VLImageProcessor", "do_resize": True, "resample": 3, "do_rescale": True,
    "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711], "do_convert_rgb": True, "min_pixels": 16 * 16,
    "max_pixels": 128 * 128, "patch_size": PATCH, "temporal_patch_size": TEMPORAL, "merge_size": MERGE,
}


def tokens(grid):
    return (grid[0] // MERGE) * (grid[1] // MERGE)


def block(grid):
    return [VISION_START] + [IMAGE] * tokens(grid) + [VISION_END]


# (prompt, which images in the order of their blocks). Text ids avoid 0..2.
PROMPTS = [
    ([1, 17, 42] + block(GRIDS[0]) + [99, 200, 3, 77], [0]),
    ([1, 5] + block(GRIDS[1]) + [6, 120] + block(GRIDS[2]) + [33, 9, 14, 71, 48], [1, 2]),
]


def rounded(rows, digits=7):
    return [[float(f"{v:.{digits}g}") for v in row] for row in rows]


def hub_name(key):
    """transformers 5's state-dict name -> the Hub checkpoints' name."""
    for old, new in (("model.visual.", "visual."), ("model.language_model.", "model.")):
        if key.startswith(old):
            return new + key[len(old):]
    return key


def random_images(seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (h * PATCH, w * PATCH, 3), dtype=np.uint8) for h, w in GRIDS]


def preprocess(images_u8):
    """pixel_values and grid_thw of each image by transformers' PIL Qwen2VLImageProcessor."""
    import torch
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    kw = {k: v for k, v in PROCESSOR.items() if k != "image_processor_type"}
    proc = Qwen2VLImageProcessorPil(**kw)
    out = []
    for img, (h, w) in zip(images_u8, GRIDS):
        p = proc(images=Image.fromarray(img, "RGB"), return_tensors="np")
        assert p["image_grid_thw"].tolist() == [[1, h, w]], p["image_grid_thw"]
        out.append(torch.from_numpy(p["pixel_values"]).to(torch.float32))
    return out


def build(name, fam, out_dir):
    import torch
    import transformers
    from safetensors.torch import save_file
    (out_dir / "config.json").write_text(json.dumps(fam["config"], indent=2) + "\n")
    config = transformers.AutoConfig.from_pretrained(out_dir)
    config._attn_implementation = "eager"
    for sub in (config.text_config, config.vision_config):
        sub._attn_implementation = "eager"
    torch.manual_seed(fam["seed"])
    model = getattr(transformers, fam["model_cls"])(config).to(torch.float32).eval()
    randomize(model, fam["seed"])
    g = torch.Generator().manual_seed(fam["seed"] + 1)
    visual = model.model.visual
    with torch.no_grad():
        # randomize() gives *embed* tensors unit variance and ln_q (no "norm" in its name) the
        # biases' 0.1: the patch embedding is a convolution over 96 inputs, ln_q a norm.
        w = visual.patch_embed.proj.weight
        w.copy_(torch.randn(w.shape, generator=g) * w[0].numel() ** -0.5)
        ln_q = visual.merger.ln_q
        ln_q.weight.copy_(1.0 + 0.1 * torch.randn(ln_q.weight.shape, generator=g))
        if getattr(ln_q, "bias", None) is not None:
            ln_q.bias.copy_(0.1 * torch.randn(ln_q.bias.shape, generator=g))
    state = {hub_name(k): v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return model


def tower_features(model, pixels):
    import torch
    grids = torch.tensor([[1, h, w] for h, w in GRIDS])
    with torch.no_grad():
        each = [model.model.get_image_features(pv, grids[i:i + 1]).pooler_output[0] for i, pv in enumerate(pixels)]
        together = model.model.get_image_features(torch.cat(pixels), grids).pooler_output
    for a, b in zip(each, together):
        assert torch.allclose(a, b, atol=1e-5), "an image's features do not depend on the others in the call"
    return each


def run_case(model, pixels, prompt, which):
    import torch
    ids = torch.tensor([prompt])
    types = (ids == IMAGE).int()
    pv = torch.cat([pixels[i] for i in which])
    thw = torch.tensor([[1, *GRIDS[i]] for i in which])
    with torch.no_grad():
        logits = model(input_ids=ids, pixel_values=pv, image_grid_thw=thw, mm_token_type_ids=types).logits[0]
        position_ids, delta = model.model.get_rope_index(ids, mm_token_type_ids=types, image_grid_thw=thw)
        model.model.rope_deltas = None
        gen = model.generate(ids, pixel_values=pv, image_grid_thw=thw, mm_token_type_ids=types,
                             attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=N_GREEDY,
                             min_new_tokens=N_GREEDY, pad_token_id=0, eos_token_id=None)
        model.model.rope_deltas = None
    greedy = gen[0, len(prompt):].tolist()
    assert greedy[0] == int(logits[-1].argmax()), "generate's first token is the prefill's argmax"
    return {"prompt": prompt, "images": which, "logits": rounded(logits.tolist()), "greedy": greedy,
            "position_ids": position_ids[:, 0].tolist(), "rope_delta": int(delta.flatten()[0])}


def check_reload(out_dir, model_cls, pixels, case, want_logits):
    """from_pretrained on the written directory (Hub names, flat config) gives the same logits."""
    import torch
    import transformers
    model = getattr(transformers, model_cls).from_pretrained(out_dir, attn_implementation="eager").eval()
    ids = torch.tensor([case["prompt"]])
    pv = torch.cat([pixels[i] for i in case["images"]])
    thw = torch.tensor([[1, *GRIDS[i]] for i in case["images"]])
    with torch.no_grad():
        logits = model(input_ids=ids, pixel_values=pv, image_grid_thw=thw, mm_token_type_ids=(ids == IMAGE).int()).logits[0]
    assert torch.allclose(logits, want_logits, atol=1e-5), "the Hub-layout checkpoint reloads to the same model"


def write_fixture(out_dir, name, expected, image0_u8, processor):
    """expected.json, the first image as image0.png and the processor file; prints the size."""
    from PIL import Image
    (out_dir / "expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
    Image.fromarray(image0_u8, "RGB").save(out_dir / "image0.png")
    (out_dir / "preprocessor_config.json").write_text(json.dumps(processor, indent=2) + "\n")
    size = sum(f.stat().st_size for f in out_dir.iterdir())
    print(f"{name}: {size / 1024:.0f} KiB")


def make(name, fam):
    import torch
    import transformers
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build(name, fam, out_dir)
    images_u8 = random_images(fam["seed"] + 2)
    pixels = preprocess(images_u8)
    features = tower_features(model, pixels)
    cases = [run_case(model, pixels, prompt, which) for prompt, which in PROMPTS]
    with torch.no_grad():
        pv = pixels[0]
        ids = torch.tensor([cases[0]["prompt"]])
        want = model(input_ids=ids, pixel_values=pv, image_grid_thw=torch.tensor([[1, *GRIDS[0]]]),
                     mm_token_type_ids=(ids == IMAGE).int()).logits[0]
    check_reload(out_dir, fam["model_cls"], pixels, cases[0], want)
    expected = {
        "generator": f"transformers {transformers.__version__}, torch {torch.__version__}, "
                     f"{fam['model_cls']}, fp32, eager attention, seed {fam['seed']}",
        "vocab_size": fam["config"]["vocab_size"],
        "patch_size": PATCH, "merge": MERGE, "temporal_patch": TEMPORAL,
        "image_token": IMAGE, "vision_start": VISION_START, "vision_end": VISION_END,
        "images": [{"grid_thw": [1, h, w], "pixel_values": rounded(pv.tolist(), 9), "features": rounded(f.tolist())}
                   for (h, w), pv, f in zip(GRIDS, pixels, features)],
        "cases": cases,
    }
    write_fixture(out_dir, name, expected, images_u8[0], PROCESSOR)


def main():
    ensure_venv(__file__)
    ensure_pillow()
    for name, fam in FAMILIES.items():
        make(name, fam)


if __name__ == "__main__":
    main()
