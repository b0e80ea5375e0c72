#!/usr/bin/env python3
"""Writes tests/fixtures/llava_next: a tiny random LlavaNextForConditionalGeneration checkpoint
(llava-hf/llava-v1.6-*-hf's architecture: a CLIP tower, LlavaNextMultiModalProjector, the
image_newline embedding, a language model) and transformers' outputs on it, which
tests/models/llava_next_test.cpp, tests/actors/engine_vision_llava_test.cpp and
tests/server/test_openai_llava.py compare with.

The checkpoint is the Hub's form at tiny size: config.json as llava-v1.6's (text_config and
vision_config objects, image_token_index, image_grid_pinpoints, vision_feature_layer -2, strategy
default, projector fields), model.safetensors under the Hub's names (`image_newline`,
`vision_tower.vision_model.*`, `multi_modal_projector.*`, `language_model.model.*`,
`language_model.lm_head.weight`), preprocessor_config.json as LlavaNextImageProcessor's. The tower
is make_llava_fixtures.py's CLIP (3 layers of width 32, 28-pixel tiles in 4-pixel patches: 7 x 7
patches a tile) and the pinpoints llava-v1.6's scaled from 336 to 28 pixels ([28, 56], [56, 28],
[56, 56], [84, 28], [28, 84]); a Llama language model (2 layers, hidden 48).

Images: random RGB bytes of the sizes in SOURCES (height x width), as PNGs. Each becomes, as
LlavaNextImageProcessorPil makes it, the image squashed to 28 x 28 and the tiles of the image
resized within the best pinpoint and padded with zeros to it (image_sizes keeps its size); the
model packs the base tile's 49 features, then the tiles' feature grid cut back to the image's
aspect (unpad_image), each row followed by image_newline. expected.json:
  - `generator`, `image_size`, `patch_size`, `image_token`, `pinpoints`;
  - `images`: per image `source_hw`, `n_tiles` (pixel_values' rows: the base image and the
    tiles), `n_image_tokens` (LlavaNextProcessor's count) and `features` [n_image_tokens, 48]
    (get_image_features' pooler_output); pixel_values.f32 holds every image's pixel_values
    ([n_tiles, 3, 28, 28] each, float32 little-endian) in order;
  - `layouts`: LlavaNextProcessor's token count for more image sizes, at the fixture's settings
    and at llava-v1.6's (336-pixel tiles in 14-pixel patches, its five pinpoints);
  - `cases`: `prompt` ids (text around runs of image tokens), `images` (which, in order), `logits`
    at every position (ids 0..N_LOGITS-1), `greedy` (4 tokens of generate());
  - `chats`: OpenAI-style messages with image parts, the prompt ids the chat template and
    LlavaNextProcessor make (each `<image>` expanded to its image's tokens), `greedy` (6 tokens, no
    stop) and their `logprobs`.

Run: python3 scripts/make_llava_next_fixtures.py (re-runs itself inside .brigade/fixtures-venv).
CI never runs it: the fixtures are committed.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, randomize  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402
from make_llava_fixtures import CLIP, IMAGE, SPECIALS, TEMPLATE, TEXT  # noqa: E402
from make_pixtral_fixtures import rounded, write_byte_tokenizer  # noqa: E402

NAME = "llava_next"
SEED = 1616
IMAGE_SIZE, PATCH = 28, 4
PINPOINTS = [[28, 56], [56, 28], [56, 56], [84, 28], [28, 84]]
# 2x2 tiles cut to 10 rows; 1x2 tiles cut to 8 columns; 2x2 tall; 3x1 (height 84); 1x3 (width 84).
SOURCES = [(40, 60), (28, 28), (61, 33), (90, 25), (20, 100)]
LAYOUT_SIZES = [(40, 60), (28, 28), (61, 33), (90, 25), (20, 100), (1, 1), (1, 500), (500, 1), (57, 57), (29, 85),
                (100, 100), (13, 200), (200, 13), (56, 56), (27, 55)]
REAL = {"image_size": 336, "patch": 14, "pinpoints": [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]}
REAL_SIZES = [(480, 640), (640, 480), (336, 336), (1080, 1920), (1920, 1080), (300, 1000), (1000, 300), (768, 1024),
              (100, 100), (2000, 2000), (333, 666), (337, 673)]
N_GREEDY, N_CHAT_GREEDY, N_LOGITS = 4, 6, 32
CHATS = [["What is it?", 0], ["Compare", 2, "with", 1]]
PROCESSOR = {
    "image_processor_type": "LlavaNextImageProcessor", "do_resize": True, "size": {"shortest_edge": IMAGE_SIZE},
    "resample": 3, "do_center_crop": True, "crop_size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE},
    "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    "do_convert_rgb": True, "do_pad": True, "image_grid_pinpoints": PINPOINTS,
}


def config():
    return {"architectures": ["LlavaNextForConditionalGeneration"], "model_type": "llava_next", "dtype": "float32",
            "image_token_index": IMAGE, "image_grid_pinpoints": PINPOINTS, "tie_word_embeddings": False,
            "text_config": dict(TEXT, model_type="llama"), "vision_config": CLIP, "vision_feature_layer": -2,
            "vision_feature_select_strategy": "default", "projector_hidden_act": "gelu",
            "multimodal_projector_bias": True, "image_seq_length": 49}


def hub_name(key):
    """transformers 5's state-dict name -> the Hub checkpoints' (llava-hf) name."""
    for old, new in (("model.vision_tower.", "vision_tower.vision_model."), ("model.multi_modal_projector.", "multi_modal_projector."),
                     ("model.language_model.", "language_model.model."), ("lm_head.", "language_model.lm_head."),
                     ("model.image_newline", "image_newline")):
        if key.startswith(old):
            return new + key[len(old):]
    return key


def random_images():
    import numpy as np
    rng = np.random.default_rng(SEED)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SOURCES]


def processor():
    from transformers.models.llava_next.image_processing_pil_llava_next import LlavaNextImageProcessorPil
    return LlavaNextImageProcessorPil(**{k: v for k, v in PROCESSOR.items() if k != "image_processor_type"})


def preprocess(images_u8):
    """Each image's pixel_values [n_tiles, 3, 28, 28] and image_sizes (h, w)."""
    import torch
    from PIL import Image
    proc = processor()
    out = []
    for img in images_u8:
        p = proc(images=Image.fromarray(img, "RGB"), return_tensors="np", do_pad=False)
        out.append((torch.from_numpy(p["pixel_values"][0]).to(torch.float32).contiguous(),
                    [int(x) for x in p["image_sizes"][0]]))
    return out


def token_counts(sizes, image_size, patch, pinpoints, tokenizer_dir):
    """LlavaNextProcessor's image token count for images of these (h, w) sizes."""
    from transformers import AutoTokenizer
    from transformers.models.llava_next.image_processing_pil_llava_next import LlavaNextImageProcessorPil
    from transformers.models.llava_next.processing_llava_next import LlavaNextProcessor
    ip = LlavaNextImageProcessorPil(size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size},
                                    image_grid_pinpoints=pinpoints)
    proc = LlavaNextProcessor(image_processor=ip, tokenizer=AutoTokenizer.from_pretrained(tokenizer_dir),
                              patch_size=patch, vision_feature_select_strategy="default", image_token="<image>",
                              num_additional_image_tokens=1)
    return [proc._get_number_of_features(h, w, image_size, image_size) - 1 for h, w in sizes]


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
    model = transformers.LlavaNextForConditionalGeneration(cfg).to(torch.float32).eval()
    randomize(model, SEED)
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():  # the convolution's fan-in is 3 * 4 * 4; CLIP's class embedding as large as a patch's
        emb = model.model.vision_tower.embeddings
        emb.patch_embedding.weight.copy_(torch.randn(emb.patch_embedding.weight.shape, generator=g) *
                                         emb.patch_embedding.weight[0].numel() ** -0.5)
        emb.class_embedding.copy_(torch.randn(emb.class_embedding.shape, generator=g))
        model.model.image_newline.copy_(torch.randn(model.model.image_newline.shape, generator=g))
    state = {hub_name(k): v.contiguous() for k, v in model.state_dict().items()}
    assert "image_newline" in state, sorted(state)[:5]
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "model.safetensors").chmod(0o644)
    return model


def features(model, pixels):
    import torch
    with torch.no_grad():
        each = [model.model.get_image_features(pv[None], image_sizes=torch.tensor([hw])).pooler_output[0]
                for pv, hw in pixels]
        # Several images in one call: pixel_values padded to the most tiles, as the processor's do_pad does.
        most = max(pv.shape[0] for pv, _ in pixels)
        stacked = torch.stack([torch.cat([pv, pv.new_zeros(most - pv.shape[0], *pv.shape[1:])]) for pv, _ in pixels])
        together = model.model.get_image_features(stacked, image_sizes=torch.tensor([hw for _, hw in pixels])).pooler_output
    for a, b in zip(each, together):
        assert torch.allclose(a, b, atol=1e-5), "an image's features do not depend on the others in the call"
    return each


def model_inputs(pixels, which):
    import torch
    most = max(pixels[i][0].shape[0] for i in which)
    pv = torch.stack([torch.cat([pixels[i][0], pixels[i][0].new_zeros(most - pixels[i][0].shape[0], 3, IMAGE_SIZE,
                                                                        IMAGE_SIZE)]) for i in which])
    return {"pixel_values": pv, "image_sizes": torch.tensor([pixels[i][1] for i in which])}


def run_case(model, pixels, counts, before, which, between, after):
    import torch
    prompt = list(before)
    for k, i in enumerate(which):
        prompt += [IMAGE] * counts[i] + (between[k] if k < len(between) else [])
    prompt += after
    ids = torch.tensor([prompt])
    inputs = model_inputs(pixels, which)
    with torch.no_grad():
        logits = model(input_ids=ids, **inputs).logits[0]
        gen = model.generate(ids, **inputs, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY, pad_token_id=4, eos_token_id=None)
    greedy = gen[0, len(prompt):].tolist()
    assert greedy[0] == int(logits[-1].argmax()), "generate's first token is the prefill's argmax"
    return {"prompt": prompt, "images": which, "logits": rounded(logits[:, :N_LOGITS].tolist()), "greedy": greedy}


def run_chat(model, out_dir, images_u8, pixels, parts):
    """A chat's prompt as the template, LlavaNextProcessor and the tokenizer make it, and
    N_CHAT_GREEDY greedy tokens with their logprobs."""
    import torch
    from PIL import Image
    from transformers import AutoTokenizer
    from transformers.models.llava_next.processing_llava_next import LlavaNextProcessor
    tok = AutoTokenizer.from_pretrained(out_dir)
    proc = LlavaNextProcessor(image_processor=processor(), tokenizer=tok, patch_size=PATCH,
                              vision_feature_select_strategy="default", image_token="<image>", num_additional_image_tokens=1)
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image"} for p in parts]
    text = tok.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    which = [p for p in parts if not isinstance(p, str)]
    got = proc(text=text, images=[Image.fromarray(images_u8[i], "RGB") for i in which], return_tensors="pt",
               add_special_tokens=False)
    prompt = got["input_ids"][0].tolist()
    inputs = model_inputs(pixels, which)
    assert torch.equal(got["image_sizes"], inputs["image_sizes"])
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
    pixels = preprocess(images)
    model = build(out_dir)
    for k, img in enumerate(images):
        Image.fromarray(img, "RGB").save(out_dir / f"image{k}.png")
    feats = features(model, pixels)
    counts = token_counts(SOURCES, IMAGE_SIZE, PATCH, PINPOINTS, out_dir)
    for f, n in zip(feats, counts):
        assert f.shape[0] == n, f"the processor's count {n} is the model's {f.shape[0]} features"
    cases = [run_case(model, pixels, counts, [1, 5, 7], [1, 2], [[9, 11]], [30, 31]),
             run_case(model, pixels, counts, [1, 30], [0], [], [20, 21, 22, 40]),
             run_case(model, pixels, counts, [1], [3, 4], [[12]], [13])]
    chats = [run_chat(model, out_dir, images, pixels, parts) for parts in CHATS]
    reloaded = transformers.LlavaNextForConditionalGeneration.from_pretrained(out_dir, dtype=torch.float32).eval()
    for a, b in zip(feats, features(reloaded, pixels)):
        assert torch.allclose(a, b, atol=1e-5), f"the saved checkpoint reproduces the features: {(a - b).abs().max()}"
    np.concatenate([pv.numpy().reshape(-1) for pv, _ in pixels]).astype("<f4").tofile(out_dir / "pixel_values.f32")
    expected = {
        "generator": f"scripts/make_llava_next_fixtures.py (transformers {transformers.__version__})",
        "image_size": IMAGE_SIZE, "patch_size": PATCH, "image_token": IMAGE, "pinpoints": PINPOINTS,
        "images": [{"source_hw": list(src), "n_tiles": int(pv.shape[0]), "n_image_tokens": n,
                    "features": rounded(f.tolist())}
                   for src, (pv, _), n, f in zip(SOURCES, pixels, counts, feats)],
        "layouts": {
            "fixture": [[h, w, n] for (h, w), n in zip(LAYOUT_SIZES, token_counts(LAYOUT_SIZES, IMAGE_SIZE, PATCH,
                                                                                  PINPOINTS, out_dir))],
            "llava_v1_6": [[h, w, n] for (h, w), n in zip(REAL_SIZES, token_counts(REAL_SIZES, REAL["image_size"],
                                                                                   REAL["patch"], REAL["pinpoints"],
                                                                                   out_dir))],
        },
        "cases": cases, "chats": chats,
    }
    (out_dir / "expected.json").write_text(json.dumps(expected) + "\n")
    print(f"wrote {out_dir}: tiles {[int(pv.shape[0]) for pv, _ in pixels]}, tokens {counts}")


if __name__ == "__main__":
    main()
