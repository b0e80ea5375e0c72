#!/usr/bin/env python3
"""Writes tests/fixtures/llava_onevision: a tiny random LlavaOnevisionForConditionalGeneration
checkpoint (llava-hf/llava-onevision-qwen2-*-ov-hf's architecture: a SigLIP tower read at its last
layer under "full", LlavaOnevisionMultiModalProjector, the image_newline embedding, a Qwen2
language model) and transformers' outputs on it, which tests/models/llava_onevision_test.cpp,
tests/actors/engine_vision_llava_test.cpp and tests/server/test_openai_llava_onevision.py
compare with.

The checkpoint is the Hub's form at tiny size: config.json as llava-onevision's (text_config and
vision_config objects, image_token_index, image_grid_pinpoints, vision_aspect_ratio anyres_max_9,
vision_feature_layer -1, strategy full), model.safetensors under the Hub's names (`image_newline`,
`vision_tower.vision_model.*`, `multi_modal_projector.*`, `language_model.model.*`,
`language_model.lm_head.weight`), preprocessor_config.json as LlavaOnevisionImageProcessor's. The
tower is make_llava_fixtures.py's SigLIP (2 layers of width 32) at 30-pixel tiles in 4-pixel patches: 7 x 7
patches a tile, the convolution's stride dropping each tile's last 2 pixels a side as SigLIP
so400m/14 drops 6 of 384; the pinpoints OneVision's 36 scaled from 384 to 30 pixels (1x1 to 6x6
tiles); a Qwen2 language model (2 layers, hidden 48). The chat template is llava-1.5's (the byte
tokenizer of make_llava_fixtures.py), not OneVision's: what is checked is how the processor expands
each <image>.

Images: random RGB bytes of the sizes in SOURCES (height x width), as PNGs. Alone in a prompt, each
becomes, as LlavaOnevisionImageProcessorPil makes it, the image squashed to 30 x 30 and the tiles of
the image resized within the best pinpoint and padded with zeros to it; the model packs the base
tile's 49 features, then the tiles' feature grid cut back to the image's aspect (unpad_image),
resized bilinearly when it holds more than 1.1^2 * 9 tiles' worth (anyres_max_9), each row followed
by image_newline. In a prompt with several images, each is its base tile alone: the image padded
square with int(mean * 255), resized to 30 x 30; the model packs its 49 features and one
image_newline. expected.json:
  - `generator`, `image_size`, `patch_size`, `image_token`, `pinpoints`, `max_area` (9);
  - `images`: per image `source_hw`, `n_tiles` (pixel_values' rows: the base image and the
    tiles), `n_image_tokens` (LlavaOnevisionProcessor's count), `resized` (whether anyres_max_9
    resized its grid), `features` [n_image_tokens, 48] and `base_features` [50, 48] (the image as
    one of several); pixel_values.f32 holds every image's pixel_values ([n_tiles, 3, 30, 30] each,
    float32 little-endian) in order, base_pixel_values.f32 each image's base-only form
    ([1, 3, 30, 30]) in order;
  - `layouts`: LlavaOnevisionProcessor's token count for more image sizes, at the fixture's
    settings and at llava-onevision's (384-pixel tiles in 14-pixel patches, its 36 pinpoints);
  - `cases`: `prompt` ids (text around runs of image tokens), `images` (which, in order: k for
    image k alone, len(SOURCES) + k for image k as one of several, base only), `several`, `logits`
    at every position (ids 0..N_LOGITS-1), `greedy` (4 tokens of generate());
  - `chats`: OpenAI-style messages with image parts, the prompt ids the chat template and
    LlavaOnevisionProcessor make, `greedy` (6 tokens, no stop) and their `logprobs`.

Run: python3 scripts/make_llava_onevision_fixtures.py (re-runs itself inside .brigade/fixtures-venv).
CI never runs it: the fixtures are committed.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, randomize  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402
from make_llava_fixtures import IMAGE, SIGLIP, SPECIALS, TEMPLATE, TEXT  # noqa: E402
from make_llava_next_fixtures import hub_name  # noqa: E402
from make_pixtral_fixtures import rounded, write_byte_tokenizer  # noqa: E402

NAME = "llava_onevision"
SEED = 1717
IMAGE_SIZE, PATCH = 30, 4  # 7 x 7 patches a tile: the stride drops 2 pixels a side, as so400m/14 at 384 drops 6
SIDE = IMAGE_SIZE // PATCH
MAX_AREA = 9
PINPOINTS = [[IMAGE_SIZE * h, IMAGE_SIZE * w] for h in range(1, 7) for w in range(1, 7)]
# 2x3 tiles, not resized; one tile; 6x6 tiles resized; a tall 6x2 resized; 1x1 of a tiny one;
# 4x5 cut to rows and resized.
SOURCES = [(40, 60), (28, 28), (150, 170), (160, 50), (9, 13), (100, 140)]
LAYOUT_SIZES = [(40, 60), (28, 28), (150, 170), (160, 50), (9, 13), (100, 140), (1, 1), (1, 500), (500, 1),
                (57, 57), (29, 85), (168, 168), (300, 300), (13, 200), (200, 13), (84, 112), (111, 167)]
REAL = {"image_size": 384, "patch": 14, "pinpoints": [[384 * h, 384 * w] for h in range(1, 7) for w in range(1, 7)]}
REAL_SIZES = [(480, 640), (640, 480), (384, 384), (1080, 1920), (1920, 1080), (300, 1000), (1000, 300), (768, 1024),
              (100, 100), (2000, 2000), (4000, 3000), (383, 769), (2304, 2304), (500, 4000)]
N_GREEDY, N_CHAT_GREEDY, N_LOGITS = 4, 6, 32
CHATS = [["What is it?", 2], ["Compare", 3, "with", 0]]
SIGLIP_MEAN = [0.5, 0.5, 0.5]
PROCESSOR = {
    "image_processor_type": "LlavaOnevisionImageProcessor", "do_resize": True,
    "size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE}, "resample": 3, "do_rescale": True,
    "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": SIGLIP_MEAN, "image_std": [0.5, 0.5, 0.5],
    "do_convert_rgb": True, "do_pad": True, "image_grid_pinpoints": PINPOINTS,
}


def config():
    return {"architectures": ["LlavaOnevisionForConditionalGeneration"], "model_type": "llava_onevision",
            "dtype": "float32", "image_token_index": IMAGE, "video_token_index": 0, "image_grid_pinpoints": PINPOINTS,
            "vision_aspect_ratio": f"anyres_max_{MAX_AREA}", "tie_word_embeddings": False,
            "text_config": dict(TEXT, model_type="qwen2", max_position_embeddings=1024), "vision_config": dict(SIGLIP, image_size=IMAGE_SIZE, patch_size=PATCH, vision_use_head=False),
            "vision_feature_layer": -1, "vision_feature_select_strategy": "full", "projector_hidden_act": "gelu",
            "multimodal_projector_bias": True}


def random_images():
    import numpy as np
    rng = np.random.default_rng(SEED)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SOURCES]


def processor():
    from transformers.models.llava_onevision.image_processing_pil_llava_onevision import LlavaOnevisionImageProcessorPil
    return LlavaOnevisionImageProcessorPil(**{k: v for k, v in PROCESSOR.items() if k != "image_processor_type"})


def preprocess(images_u8):
    """Each image alone: pixel_values [n_tiles, 3, 30, 30] and image_sizes (h, w); and all of them
    as one prompt's: each [1, 3, 30, 30] (base only)."""
    import torch
    from PIL import Image
    proc = processor()
    alone = []
    for img in images_u8:
        p = proc(images=Image.fromarray(img, "RGB"), return_tensors="np", do_pad=False)
        assert list(p["batch_num_images"]) == [1]
        alone.append((torch.from_numpy(p["pixel_values"][0]).to(torch.float32).contiguous(),
                      [int(x) for x in p["image_sizes"][0]]))
    together = proc(images=[[Image.fromarray(img, "RGB") for img in images_u8]], return_tensors="np", do_pad=False)
    assert list(together["batch_num_images"]) == [len(images_u8)]
    base = [torch.from_numpy(pv).to(torch.float32).contiguous() for pv in together["pixel_values"]]
    assert all(b.shape == (1, 3, IMAGE_SIZE, IMAGE_SIZE) for b in base), [b.shape for b in base]
    return alone, base


def onevision_processor(tokenizer, image_size, pinpoints):
    from transformers.models.llava_onevision.image_processing_pil_llava_onevision import LlavaOnevisionImageProcessorPil
    from transformers.models.llava_onevision.processing_llava_onevision import LlavaOnevisionProcessor
    ip = LlavaOnevisionImageProcessorPil(size={"height": image_size, "width": image_size}, image_grid_pinpoints=pinpoints,
                                         image_mean=SIGLIP_MEAN, image_std=[0.5, 0.5, 0.5])
    side = image_size // (PATCH if image_size == IMAGE_SIZE else REAL["patch"])

    class ImagesOnly(LlavaOnevisionProcessor):  # no video processor here (it needs torchvision)
        def check_argument_for_proper_class(self, name, arg):
            return None if name == "video_processor" and arg is None else super().check_argument_for_proper_class(name, arg)

    return ImagesOnly(image_processor=ip, tokenizer=tokenizer, num_image_tokens=side * side,
                                   vision_feature_select_strategy="full", image_token="<image>", video_token="<pad>",
                                   vision_aspect_ratio=f"anyres_max_{MAX_AREA}")


def token_counts(sizes, image_size, pinpoints, tokenizer_dir):
    """LlavaOnevisionProcessor's image token count for lone images of these (h, w) sizes."""
    from transformers import AutoTokenizer
    proc = onevision_processor(AutoTokenizer.from_pretrained(tokenizer_dir), image_size, pinpoints)
    return [proc._get_number_of_features(h, w, image_size, image_size) for h, w in sizes]


def build(out_dir):
    import torch
    import transformers
    from safetensors.torch import save_file
    (out_dir / "config.json").write_text(json.dumps(config(), indent=2) + "\n")
    (out_dir / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2) + "\n")
    write_byte_tokenizer(out_dir, SPECIALS, TEMPLATE)
    cfg = transformers.AutoConfig.from_pretrained(out_dir)
    for c in (cfg, cfg.text_config, cfg.vision_config):
        c._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = transformers.LlavaOnevisionForConditionalGeneration(cfg).to(torch.float32).eval()
    randomize(model, SEED)
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():  # the convolution's fan-in is 3 * 4 * 4
        emb = model.model.vision_tower.embeddings
        emb.patch_embedding.weight.copy_(torch.randn(emb.patch_embedding.weight.shape, generator=g) *
                                         emb.patch_embedding.weight[0].numel() ** -0.5)
        model.model.image_newline.copy_(torch.randn(model.model.image_newline.shape, generator=g))
    state = {hub_name(k): v.contiguous() for k, v in model.state_dict().items()}
    assert "image_newline" in state, sorted(state)[:5]
    assert not any(k.startswith("vision_tower.vision_model.head") for k in state), "no SigLIP head"
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "model.safetensors").chmod(0o644)
    return model


def features(model, alone, base):
    """Each image's features alone (patched), and each as one of several (base only)."""
    import torch
    with torch.no_grad():
        each = [model.model.get_image_features(pv[None], image_sizes=torch.tensor([hw]),
                                               batch_num_images=torch.tensor([1])).pooler_output[0]
                for pv, hw in alone]
        several = model.model.get_image_features(
            torch.stack(base), image_sizes=torch.tensor([hw for _, hw in alone]),
            batch_num_images=torch.tensor([len(base)])).pooler_output
    assert all(f.shape[0] == SIDE * SIDE + 1 for f in several)
    return each, list(several)


def resized(h, w):
    """Whether anyres_max_9 resizes a lone h x w image's feature grid (pack_image_features' test)."""
    import math
    from transformers.image_processing_utils import select_best_resolution
    bh, bw = select_best_resolution([h, w], PINPOINTS)
    cur_h, cur_w = bh // IMAGE_SIZE * SIDE, bw // IMAGE_SIZE * SIDE
    if w / h > cur_w / cur_h:
        cur_h -= 2 * ((cur_h - int(round(h * (cur_w / w), 7))) // 2)
    else:
        cur_w -= 2 * ((cur_w - int(round(w * (cur_h / h), 7))) // 2)
    return math.sqrt(cur_h * cur_w / (MAX_AREA * SIDE ** 2)) > 1.1


def model_inputs(alone, base, which, several):
    import torch
    if several:
        return {"pixel_values": torch.stack([base[i] for i in which]),
                "image_sizes": torch.tensor([alone[i][1] for i in which]),
                "batch_num_images": torch.tensor([len(which)])}
    (i,) = which
    return {"pixel_values": alone[i][0][None], "image_sizes": torch.tensor([alone[i][1]]),
            "batch_num_images": torch.tensor([1])}


def run_case(model, alone, base, counts, before, which, between, after):
    import torch
    several = len(which) > 1
    prompt = list(before)
    for k, i in enumerate(which):
        prompt += [IMAGE] * (SIDE * SIDE + 1 if several else counts[i]) + (between[k] if k < len(between) else [])
    prompt += after
    ids = torch.tensor([prompt])
    inputs = model_inputs(alone, base, which, several)
    with torch.no_grad():
        logits = model(input_ids=ids, **inputs).logits[0]
        gen = model.generate(ids, **inputs, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY, pad_token_id=4, eos_token_id=None)
    greedy = gen[0, len(prompt):].tolist()
    assert greedy[0] == int(logits[-1].argmax()), "generate's first token is the prefill's argmax"
    return {"prompt": prompt, "images": [i + len(SOURCES) for i in which] if several else which, "several": several, "logits": rounded(logits[:, :N_LOGITS].tolist()),
            "greedy": greedy}


def run_chat(model, out_dir, images_u8, alone, base, parts):
    """A chat's prompt as the template, LlavaOnevisionProcessor and the tokenizer make it, and
    N_CHAT_GREEDY greedy tokens with their logprobs."""
    import torch
    from PIL import Image
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(out_dir)
    proc = onevision_processor(tok, IMAGE_SIZE, PINPOINTS)
    proc.image_processor = processor()
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image"} for p in parts]
    text = tok.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    which = [p for p in parts if not isinstance(p, str)]
    got = proc(text=text, images=[[Image.fromarray(images_u8[i], "RGB") for i in which]], return_tensors="pt",
               add_special_tokens=False)
    prompt = got["input_ids"][0].tolist()
    inputs = model_inputs(alone, base, which, len(which) > 1)
    assert torch.equal(got["image_sizes"], inputs["image_sizes"])
    assert torch.equal(got["pixel_values"].reshape(inputs["pixel_values"].shape), inputs["pixel_values"])
    ids = torch.tensor([prompt])
    with torch.no_grad():
        gen = model.generate(ids, **inputs, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=N_CHAT_GREEDY, min_new_tokens=N_CHAT_GREEDY, pad_token_id=4,
                             eos_token_id=None, output_logits=True, return_dict_in_generate=True)
    greedy = gen.sequences[0, len(prompt):].tolist()
    logprobs = [float(torch.log_softmax(step[0].double(), -1)[t]) for step, t in zip(gen.logits, greedy)]
    return {"parts": parts, "text": text, "prompt": prompt, "greedy": greedy, "logprobs": logprobs}


def main():
    ensure_venv(__file__)
    ensure_pillow()
    import numpy as np
    import torch
    import transformers
    from PIL import Image
    out_dir = OUT / NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    images = random_images()
    alone, base = preprocess(images)
    model = build(out_dir)
    for k, img in enumerate(images):
        Image.fromarray(img, "RGB").save(out_dir / f"image{k}.png")
    feats, base_feats = features(model, alone, base)
    counts = token_counts(SOURCES, IMAGE_SIZE, PINPOINTS, out_dir)
    for f, n in zip(feats, counts):
        assert f.shape[0] == n, f"the processor's count {n} is the model's {f.shape[0]} features"
    flags = [resized(h, w) for h, w in SOURCES]
    assert any(flags) and not all(flags), flags
    cases = [run_case(model, alone, base, counts, [1, 5, 7], [2], [], [30, 31]),
             run_case(model, alone, base, counts, [1, 30], [0], [], [20, 21, 22, 40]),
             run_case(model, alone, base, counts, [1], [5], [], [13]),
             run_case(model, alone, base, counts, [1, 9], [3, 1, 4], [[12], [14, 15]], [13])]
    chats = [run_chat(model, out_dir, images, alone, base, parts) for parts in CHATS]
    reloaded = transformers.LlavaOnevisionForConditionalGeneration.from_pretrained(out_dir, dtype=torch.float32).eval()
    again, again_base = features(reloaded, alone, base)
    for a, b in zip(feats + base_feats, again + again_base):
        assert torch.allclose(a, b, atol=1e-5), f"the saved checkpoint reproduces the features: {(a - b).abs().max()}"
    np.concatenate([pv.numpy().reshape(-1) for pv, _ in alone]).astype("<f4").tofile(out_dir / "pixel_values.f32")
    np.concatenate([b.numpy().reshape(-1) for b in base]).astype("<f4").tofile(out_dir / "base_pixel_values.f32")
    expected = {
        "generator": f"scripts/make_llava_onevision_fixtures.py (transformers {transformers.__version__})",
        "image_size": IMAGE_SIZE, "patch_size": PATCH, "image_token": IMAGE, "pinpoints": PINPOINTS,
        "max_area": MAX_AREA,
        "images": [{"source_hw": list(src), "n_tiles": int(pv.shape[0]), "n_image_tokens": n, "resized": r,
                    "features": rounded(f.tolist()), "base_features": rounded(bf.tolist())}
                   for src, (pv, _), n, r, f, bf in zip(SOURCES, alone, counts, flags, feats, base_feats)],
        "layouts": {
            "fixture": [[h, w, n] for (h, w), n in zip(LAYOUT_SIZES, token_counts(LAYOUT_SIZES, IMAGE_SIZE, PINPOINTS,
                                                                                  out_dir))],
            "onevision": [[h, w, n] for (h, w), n in zip(REAL_SIZES, token_counts(REAL_SIZES, REAL["image_size"],
                                                                                  REAL["pinpoints"], out_dir))],
        },
        "cases": cases, "chats": chats,
    }
    (out_dir / "expected.json").write_text(json.dumps(expected) + "\n")
    print(f"wrote {out_dir}: tiles {[int(pv.shape[0]) for pv, _ in alone]}, tokens {counts}, resized {flags}")


if __name__ == "__main__":
    main()
