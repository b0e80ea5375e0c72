#!/usr/bin/env python3
"""Writes tests/fixtures/aya_vision: a tiny random AyaVisionForConditionalGeneration (Aya Vision 8B /
32B's architecture: a SigLIP tower read at vision_feature_layer, AyaVisionMultiModalProjector's
pixel shuffle by downsample_factor, LayerNorm and SwiGLU, a Cohere2 language model) and
transformers' outputs on it, which tests/models/aya_vision_test.cpp,
tests/actors/engine_vision_aya_test.cpp and tests/server/test_openai_aya_vision.py compare with.

The tower: 32-pixel tiles in 4-pixel patches (8 x 8), 3 layers read at hidden_states[-2] (so a
reader that takes the last one, or post_layernorm, is caught), downsample_factor 2: 16 tokens a
tile; alignment_intermediate_size 40 (not the text width). GotOcr2ImageProcessorPil with
crop_to_patches (what AyaVisionProcessor passes), 1..4 tiles and the thumbnail, as InternVL's. The
text: Cohere2 (2 layers, a sliding window of 8 on the first); a byte-level tokenizer with Aya's image
tokens (<image>, <|START_OF_IMG|>, <|END_OF_IMG|>, <|IMG_PATCH|>, <|IMG_LINE_BREAK|>, TILE,
TILE_GLOBAL) and Cohere's turn tokens, and a chat template in the form of Aya Vision's (`<image>`
per image part).

expected.json:
  - `images`: per source image its `source_hw`, `n_tiles` and `features` (get_image_features'
    pooler_output, [tiles * 16, text hidden]); pixel_values.f32 holds the images' tiles in order
    ([tiles, 3, 32, 32] each, float32 little-endian) as the processor makes them from image0..2.png;
  - `cases`: `prompt` ids (AyaVisionProcessor's text for each image: <|START_OF_IMG|>, TILE_k and
    TILE_GLOBAL before each tile's run of <|IMG_PATCH|>, <|END_OF_IMG|>), `images`, `logits` (every
    position, the first N_LOGITS ids) and `greedy` (N_GREEDY tokens);
  - `chats`: OpenAI-style messages, the chat template's text, the prompt ids AyaVisionProcessor
    makes of it with the images, and N_CHAT_GREEDY greedy tokens with their logprobs.

Run: python3 scripts/make_aya_vision_fixtures.py (re-runs itself inside .brigade/fixtures-venv).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, enlarge_siglip_embeddings, random_eager_model, save_state  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402
from make_pixtral_fixtures import rounded, write_byte_tokenizer  # noqa: E402

SEED = 4141
TILE, PATCH, DOWNSAMPLE = 32, 4, 2
SPECIALS = ["<PAD>", "<UNK>", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", "<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>",
            "<|CHATBOT_TOKEN|>", "<|SYSTEM_TOKEN|>", "<image>", "<|START_OF_IMG|>", "<|END_OF_IMG|>", "<|IMG_PATCH|>",
            "<|IMG_LINE_BREAK|>", "TILE", "TILE_GLOBAL"]
BOS, EOT, IMAGE = 2, 3, 11
VOCAB = len(SPECIALS) + 256
SOURCES = [(40, 90), (32, 32), (70, 30)]  # (h, w): 2 tiles + thumbnail, 1 tile, 2 tiles + thumbnail
N_GREEDY, N_CHAT_GREEDY, N_LOGITS = 4, 6, 32
CHATS = [["What is it?", 0], ["Compare", 2, "with", 1]]
TILE_TOKENS = (TILE // (PATCH * DOWNSAMPLE)) ** 2
# Aya Vision's chat template in its form (Cohere's turns; an image part writes <image>).
TEMPLATE = ("{{ bos_token }}{% for message in messages %}<|START_OF_TURN_TOKEN|>{% if message['role'] == 'user' %}"
            "<|USER_TOKEN|>{% elif message['role'] == 'system' %}<|SYSTEM_TOKEN|>{% else %}<|CHATBOT_TOKEN|>{% endif %}"
            "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for item in message['content'] %}"
            "{% if item['type'] == 'image' %}<image>{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}"
            "{% endfor %}{% endif %}<|END_OF_TURN_TOKEN|>{% endfor %}{% if add_generation_prompt %}"
            "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}")

TEXT = {"model_type": "cohere2", "vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
        "max_position_embeddings": 1024, "layer_norm_eps": 1e-5, "bos_token_id": BOS, "eos_token_id": EOT,
        "pad_token_id": 0, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"],
        "logit_scale": 0.125, "rope_theta": 50000.0, "tie_word_embeddings": True}
VISION = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3,
          "num_attention_heads": 2, "image_size": TILE, "patch_size": PATCH, "hidden_act": "gelu_pytorch_tanh",
          "layer_norm_eps": 1e-6, "vision_use_head": False}
CONFIG = {"architectures": ["AyaVisionForConditionalGeneration"], "model_type": "aya_vision", "dtype": "float32",
          "image_token_index": IMAGE, "downsample_factor": DOWNSAMPLE, "adapter_layer_norm_eps": 1e-5,
          "alignment_intermediate_size": 40, "vision_feature_layer": -2, "vision_feature_select_strategy": "full",
          "tie_word_embeddings": True, "text_config": TEXT, "vision_config": VISION}
PROCESSOR = {
    "image_processor_type": "GotOcr2ImageProcessor", "processor_class": "AyaVisionProcessor",
    "crop_to_patches": True, "min_patches": 1, "max_patches": 4, "size": {"height": TILE, "width": TILE},
    "resample": 3, "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": True,
}


def random_images():
    import numpy as np
    rng = np.random.default_rng(SEED)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SOURCES]


def image_processor():
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil
    return GotOcr2ImageProcessorPil(**{k: v for k, v in PROCESSOR.items()
                                       if k not in ("image_processor_type", "processor_class")})


def processor(out_dir):
    from transformers import AutoTokenizer, AyaVisionProcessor
    return AyaVisionProcessor(image_processor=image_processor(), tokenizer=AutoTokenizer.from_pretrained(out_dir),
                              patch_size=PATCH, img_size=TILE, downsample_factor=DOWNSAMPLE, chat_template=TEMPLATE)


def preprocess(images_u8):
    import torch
    from PIL import Image
    proc = image_processor()
    out = []
    for img in images_u8:
        r = proc(images=Image.fromarray(img, "RGB"), crop_to_patches=True, return_tensors="np")
        assert int(r["num_patches"][0]) == len(r["pixel_values"])
        out.append(torch.from_numpy(r["pixel_values"]).to(torch.float32).contiguous())
    return out


def write_tokenizer(out_dir):
    write_byte_tokenizer(out_dir, SPECIALS, TEMPLATE)
    config = json.loads((out_dir / "tokenizer_config.json").read_text())
    config.update({"bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>", "pad_token": "<PAD>",
                   "unk_token": "<UNK>"})
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def build(out_dir):
    import torch
    import transformers
    model = random_eager_model(out_dir, CONFIG, transformers.AyaVisionForConditionalGeneration, SEED)
    enlarge_siglip_embeddings(model.model.vision_tower.embeddings, torch.Generator().manual_seed(SEED + 1))
    save_state(model, out_dir, drop=("lm_head.weight",))
    return model


def features(model, tiles):
    import torch
    with torch.no_grad():
        each = [model.model.get_image_features(pv).pooler_output.reshape(-1, model.config.text_config.hidden_size)
                for pv in tiles]
        together = model.model.get_image_features(torch.cat(tiles)).pooler_output
    assert torch.allclose(torch.cat(each), together.reshape(-1, together.shape[-1]), atol=1e-5)
    return each


def run_case(model, out_dir, tiles, before, which, between, after):
    import torch
    proc = processor(out_dir)
    text = before
    for k, i in enumerate(which):
        text += proc.replace_image_token({"num_patches": [len(tiles[i])]}, 0) + (between[k] if k < len(between) else "")
    text += after
    prompt = [BOS] + proc.tokenizer(text, add_special_tokens=False)["input_ids"]
    pv = torch.cat([tiles[i] for i in which])
    ids = torch.tensor([prompt])
    with torch.no_grad():
        logits = model(input_ids=ids, pixel_values=pv).logits[0]
        gen = model.generate(ids, pixel_values=pv, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY, pad_token_id=0, eos_token_id=None)
    greedy = gen[0, len(prompt):].tolist()
    assert greedy[0] == int(logits[-1].argmax()), "generate's first token is the prefill's argmax"
    return {"prompt": prompt, "images": which, "logits": rounded(logits[:, :N_LOGITS].tolist()), "greedy": greedy}


def run_chat(model, out_dir, images_u8, parts):
    import torch
    from PIL import Image
    proc = processor(out_dir)
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image"} for p in parts]
    text = proc.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    which = [p for p in parts if not isinstance(p, str)]
    inputs = proc(text=text, images=[Image.fromarray(images_u8[i], "RGB") for i in which], return_tensors="pt",
                  add_special_tokens=False)
    prompt = inputs["input_ids"][0].tolist()
    with torch.no_grad():
        gen = model.generate(**inputs, do_sample=False, max_new_tokens=N_CHAT_GREEDY, min_new_tokens=N_CHAT_GREEDY,
                             pad_token_id=0, eos_token_id=None, output_logits=True, return_dict_in_generate=True)
    greedy = gen.sequences[0, len(prompt):].tolist()
    logprobs = [float(torch.log_softmax(step[0].double(), -1)[t]) for step, t in zip(gen.logits, greedy)]
    return {"parts": parts, "text": text, "prompt": prompt, "greedy": greedy, "logprobs": logprobs}


def main():
    ensure_venv(__file__)
    ensure_pillow()
    import torch
    import transformers
    from PIL import Image
    out_dir = OUT / "aya_vision"
    out_dir.mkdir(parents=True, exist_ok=True)
    images = random_images()
    tiles = preprocess(images)
    model = build(out_dir)
    write_tokenizer(out_dir)
    (out_dir / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2) + "\n")
    (out_dir / "processor_config.json").write_text(json.dumps(
        {"processor_class": "AyaVisionProcessor", "patch_size": PATCH, "img_size": TILE,
         "downsample_factor": DOWNSAMPLE}, indent=2) + "\n")
    for k, img in enumerate(images):
        Image.fromarray(img, "RGB").save(out_dir / f"image{k}.png")
    (out_dir / "pixel_values.f32").write_bytes(torch.cat(tiles).numpy().astype("<f4").tobytes())
    feats = features(model, tiles)
    cases = [run_case(model, out_dir, tiles, "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", [0, 2], [" and "],
                      " Describe.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"),
             run_case(model, out_dir, tiles, "Look: ", [1], [], " ok")]
    chats = [run_chat(model, out_dir, images, parts) for parts in CHATS]
    reloaded = transformers.AyaVisionForConditionalGeneration.from_pretrained(out_dir, dtype=torch.float32).eval()
    for a, b in zip(feats, features(reloaded, tiles)):
        assert torch.allclose(a, b, atol=1e-5), f"the saved checkpoint reproduces the features: {(a - b).abs().max()}"
    expected = {
        "generator": f"scripts/make_aya_vision_fixtures.py (transformers {transformers.__version__})",
        "tile": TILE, "patch_size": PATCH, "image_token": IMAGE, "tile_tokens": TILE_TOKENS,
        "images": [{"source_hw": list(src), "n_tiles": len(pv), "features": rounded(f.tolist())}
                   for src, pv, f in zip(SOURCES, tiles, feats)],
        "cases": cases, "chats": chats,
    }
    (out_dir / "expected.json").write_text(json.dumps(expected) + "\n")
    print(f"wrote {out_dir}: tiles {[len(t) for t in tiles]}, {TILE_TOKENS} tokens a tile")


if __name__ == "__main__":
    main()
