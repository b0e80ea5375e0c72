#!/usr/bin/env python3
"""Writes tests/fixtures/gemma3_vision/: a tiny Gemma3ForConditionalGeneration (text model and
SigLIP tower) and transformers' outputs on prompts with images, which
tests/models/gemma3_vision_test.cpp compares with.

The checkpoint is Gemma 3 4B's form at tiny size: a SigLIP tower of 2 layers over 56x56 images
in 7x7 patches (an 8x8 grid; Gemma 3's is 64x64 patches of 14), average-pooled 2x2 into 16 image
tokens, the Gemma RMSNorm and
the projection into the text model's 64 dims; the text model is the gemma3_mm fixture's (layers 0
and 1 sliding with a window of 8, which a 16-token image crosses, layer 2 global).
expected.json holds, for random images (`images_u8`: [3, 56, 56] bytes each, channels first),
normalised as Gemma3ImageProcessor does ((x / 255 - 0.5) / 0.5 in float32):
  - `images`: each image's features as the language model receives them (get_image_features'
    pooler_output, [16, 64]);
  - `cases`: prompts of token ids with images in them (the image token repeated 16 times between
    the begin- and end-of-image tokens, as Gemma3Processor expands `<start_of_image>`), the
    logits at every position (token_type_ids marking the image tokens, so each image attends to
    itself bidirectionally as transformers' Gemma 3 does) and the greedy continuation;
image0.png (the first image as a file) and preprocessor_config.json (Gemma3ImageProcessor at 56x56)
let the file path be checked too: decoding and preprocessing it gives the first image's pixels.

Run: python3 scripts/make_vision_fixtures.py (re-runs itself inside .brigade/fixtures-venv, as
scripts/make_fixtures.py does). CI never runs it: the fixture is committed (about 800 KiB).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, gemma_config, randomize  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402

NAME = "gemma3_vision"
SEED = 4242
BOI, EOI, IMAGE = 300, 301, 302  # past the 300 ids of a synthetic byte-level BPE vocabulary
TOKENS_PER_IMAGE = 16
N_IMAGES = 3
N_GREEDY = 8


def config_kw():
    return dict(
        text_config=gemma_config(
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            rope_theta=1000000.0, rope_local_base_freq=10000.0,
            rope_scaling={"rope_type": "linear", "factor": 8.0}, vocab_size=320),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, image_size=56, patch_size=7,
                           vision_use_head=False, layer_norm_eps=1e-6),
        mm_tokens_per_image=TOKENS_PER_IMAGE, boi_token_index=BOI, eoi_token_index=EOI,
        image_token_index=IMAGE)


def image_block():
    """What Gemma3Processor puts where a prompt says <start_of_image> (its "\\n\\n" around the
    block are ordinary text tokens here)."""
    return [BOI] + [IMAGE] * TOKENS_PER_IMAGE + [EOI]


# (prompt, which images, in order of their blocks). Text ids avoid 0..2.
PROMPTS = [
    ([1, 17, 42] + image_block() + [99, 200, 3, 77], [0]),
    ([1] + image_block() + [5, 6] + image_block() + [120, 33, 9, 14, 71, 48, 8, 200, 31, 64, 19], [1, 2]),
    ([1] + [(i * 37 + 11) % 240 + 3 for i in range(12)] + image_block() + [44, 45], [2]),
]


def main():
    ensure_venv(__file__)
    ensure_pillow()
    import torch
    import transformers
    config = transformers.Gemma3Config(**config_kw())
    config._attn_implementation = "eager"
    config.text_config._attn_implementation = "eager"
    config.vision_config._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = transformers.Gemma3ForConditionalGeneration(config).to(torch.float32).eval()
    randomize(model, SEED)
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        # randomize() gives tensors named *embed* unit variance; the patch embedding is a
        # convolution over 3 x 7 x 7 inputs and the position table is added to it.
        emb = model.model.vision_tower.embeddings
        emb.patch_embedding.weight.copy_(torch.randn(emb.patch_embedding.weight.shape, generator=g) * 147 ** -0.5)
        emb.position_embedding.weight.copy_(torch.randn(emb.position_embedding.weight.shape, generator=g) * 0.5)
        proj = model.model.multi_modal_projector.mm_input_projection_weight
        proj.copy_(torch.randn(proj.shape, generator=g) * proj.shape[0] ** -0.5)
    out_dir = OUT / NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    (out_dir / "generation_config.json").unlink(missing_ok=True)

    images_u8 = torch.randint(0, 256, (N_IMAGES, 3, 56, 56), generator=g, dtype=torch.uint8)
    pixels = (images_u8.to(torch.float32) / 255.0 - 0.5) / 0.5
    with torch.no_grad():
        features = model.model.get_image_features(pixels).pooler_output  # [N_IMAGES, 16, 64]
        cases = []
        for prompt, which in PROMPTS:
            ids = torch.tensor([prompt])
            types = (ids == IMAGE).long()
            pv = pixels[which]
            logits = model(input_ids=ids, pixel_values=pv, token_type_ids=types).logits[0]
            gen = model.generate(ids, pixel_values=pv, token_type_ids=types, attention_mask=torch.ones_like(ids),
                                 do_sample=False, max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY,
                                 pad_token_id=0, eos_token_id=None)
            cases.append({
                "prompt": prompt,
                "images": which,
                "logits": [[float(f"{v:.7g}") for v in row.tolist()] for row in logits],
                "greedy": gen[0, len(prompt):].tolist(),
            })
    expected = {
        "generator": f"transformers {transformers.__version__}, torch {torch.__version__}, "
                     f"Gemma3ForConditionalGeneration, fp32, eager attention, seed {SEED}",
        "vocab_size": config.text_config.vocab_size,
        "image_size": 56,
        "tokens_per_image": TOKENS_PER_IMAGE,
        "images_u8": [img.flatten().tolist() for img in images_u8],
        "image_features": [[float(f"{v:.7g}") for v in img.flatten().tolist()] for img in features],
        "cases": cases,
    }
    (out_dir / "expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
    # The first image as a PNG file, and the processor at the tower's size: decoding and
    # preprocessing the file gives exactly images_u8[0]'s pixel values (no resize at 56x56).
    from PIL import Image
    Image.fromarray(images_u8[0].permute(1, 2, 0).numpy(), "RGB").save(out_dir / "image0.png")
    processor = {"image_processor_type": "Gemma3ImageProcessor", "size": {"height": 56, "width": 56},
                 "resample": 2, "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255,
                 "do_normalize": True, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
                 "do_convert_rgb": True, "do_pan_and_scan": None}
    (out_dir / "preprocessor_config.json").write_text(json.dumps(processor, indent=2) + "\n")
    size = sum(f.stat().st_size for f in out_dir.iterdir())
    print(f"{NAME}: {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
