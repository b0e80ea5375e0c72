#!/usr/bin/env python3
"""Writes tests/fixtures/idefics3 and tests/fixtures/smolvlm: tiny random
Idefics3ForConditionalGeneration (SmolVLM v1, Idefics3-8B) and SmolVLMForConditionalGeneration
(SmolVLM2) checkpoints (a SigLIP-style tower over square tiles, the pixel-shuffle connector and
its one projection, a Llama language model) and transformers' outputs on them, which
tests/models/idefics3_test.cpp, tests/actors/engine_vision_idefics3_test.cpp and
tests/server/test_openai_idefics3.py compare with.

  - idefics3: Idefics3ForConditionalGeneration, scale_factor 2 (8 x 8 patches a 32-pixel tile in
    4-pixel patches: 16 tokens a tile); Idefics3ImageProcessor with do_image_splitting (the image's
    longest edge resized to 96, its sides then rounded up to whole 32-pixel tiles, cut into its
    tiles row by row, then the whole image resized to 32 x 32 after them: the global tile).
  - smolvlm: SmolVLMForConditionalGeneration, scale_factor 4 (4 tokens a tile), another seed,
    do_image_splitting false (each image resized to one 32 x 32 tile: the single-image prompt).

Both have a byte-level tokenizer with <fake_token_around_image>, <image>, <global-img>,
<row_R_col_C> (R, C in 1..6), <end_of_utterance> and SmolVLM's chat template, and Idefics3's
processor files. The prompt text each image becomes is Idefics3Processor's replace_image_token
(SmolVLMProcessor's is the same; it needs num2words, which the venv lacks).

expected.json:
  - `images`: per source image its `source_hw`, `rows` / `cols` (the processor's; 0 / 0 without
    splitting), `n_tiles`, `features` (get_image_features' pooler_output, [tiles * tokens, text
    hidden]); pixel_values.f32 holds the images' tiles in order ([tiles, 3, 32, 32] each, float32
    little-endian) as the processor makes them from image0..2.png;
  - `cases`: `prompt` ids (the processor's expansion of each image, with text around), `images`,
    `logits` (every position, the first N_LOGITS ids) and `greedy` (N_GREEDY tokens);
  - `tiling` (idefics3 only): the processor's rows / cols for more sizes, at the fixture's settings
    and at the real checkpoints' (SmolVLM-256M / 500M: 2048 / 512; Idefics3-8B: 1456 / 364;
    SmolVLM2-2.2B: 1536 / 384);
  - `chats`: OpenAI-style messages, the chat template's text, the prompt ids Idefics3Processor makes
    of it with the images, and N_CHAT_GREEDY greedy tokens with their logprobs.

Run: python3 scripts/make_idefics3_fixtures.py [NAME...] (re-runs itself inside .brigade/fixtures-venv).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, enlarge_siglip_embeddings, random_eager_model, save_state  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402
from make_pixtral_fixtures import rounded, write_byte_tokenizer  # noqa: E402

TILE, PATCH, LONGEST = 32, 4, 96
ROW_COL = [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]
SPECIALS = ["<unk>", "<|im_start|>", "<end_of_utterance>", "<pad>", "<fake_token_around_image>", "<image>",
            "<global-img>"] + ROW_COL
BOS, EOU, FAKE, IMAGE, GLOBAL = 1, 2, 4, 5, 6
VOCAB = len(SPECIALS) + 256
SOURCES = [(40, 90), (32, 32), (70, 30)]  # (h, w): 2 x 3 tiles, 3 x 3, 3 x 2 (each then the global tile)
N_GREEDY, N_CHAT_GREEDY, N_LOGITS = 4, 6, 32
CHATS = [["What is it?", 0], ["Compare", 2, "with", 1]]
TILING_SIZES = [(40, 90), (32, 32), (70, 30), (10, 200), (200, 10), (33, 65), (64, 64), (100, 31), (31, 100),
                (17, 50), (96, 96), (95, 97), (1, 1)]
REAL = [(2048, 512), (1456, 364), (1536, 384)]
REAL_SIZES = [(480, 640), (1080, 1920), (512, 512), (1000, 300), (300, 1000), (2000, 2000), (50, 2000),
              (768, 1024), (896, 448), (5000, 100), (4096, 4095)]
# SmolVLM's chat template (SmolVLMProcessor's DEFAULT_CHAT_TEMPLATE less its video branch; the
# checkpoints' chat_template.json is the same for images).
TEMPLATE = ("<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}{% if message['content'] is "
            "string %}{{': ' + message['content']}}{% else %}{% if message['content'][0]['type'] == 'image' %}"
            "{{':'}}{% else %}{{': '}}{% endif %}{% for line in message['content'] %}{% if line['type'] == 'text' "
            "%}{{line['text']}}{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}{% endif %}"
            "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}")

TEXT = {"model_type": "llama", "vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 48,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "bos_token_id": BOS, "eos_token_id": EOU,
        "pad_token_id": 3, "tie_word_embeddings": False, "rope_theta": 100000.0}
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
          "image_size": TILE, "patch_size": PATCH, "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6}
VARIANTS = {
    "idefics3": {"arch": "Idefics3ForConditionalGeneration", "model_type": "idefics3", "scale_factor": 2,
                 "seed": 3131, "splitting": True},
    "smolvlm": {"arch": "SmolVLMForConditionalGeneration", "model_type": "smolvlm", "scale_factor": 4,
                "seed": 3132, "splitting": False},
}


def processor_config(name):
    return {"image_processor_type": "Idefics3ImageProcessor", "processor_class": "Idefics3Processor",
            "do_image_splitting": VARIANTS[name]["splitting"], "max_image_size": {"longest_edge": TILE},
            "size": {"longest_edge": LONGEST}, "resample": 1, "do_resize": True, "do_rescale": True,
            "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": True, "do_pad": True}


def tile_tokens(name):
    return (TILE // PATCH) ** 2 // VARIANTS[name]["scale_factor"] ** 2


def config_of(name):
    var = VARIANTS[name]
    return {"architectures": [var["arch"]], "model_type": var["model_type"], "dtype": "float32",
            "image_token_id": IMAGE, "scale_factor": var["scale_factor"], "tie_word_embeddings": False,
            "text_config": dict(TEXT), "vision_config": dict(VISION, model_type=var["model_type"] + "_vision"),
            "pad_token_id": 3}


def random_images(seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SOURCES]


def image_processor(name, **over):
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil
    kw = {k: v for k, v in processor_config(name).items() if k not in ("image_processor_type", "processor_class")}
    kw.update(over)
    return Idefics3ImageProcessorPil(**kw)


def preprocess(name, images_u8):
    """Each image's tiles [n, 3, TILE, TILE] and its (rows, cols) as Idefics3ImageProcessorPil makes
    them."""
    import torch
    from PIL import Image
    proc = image_processor(name)
    out = []
    for img in images_u8:
        r = proc(images=[[Image.fromarray(img, "RGB")]], return_row_col_info=True, return_tensors="np")
        pv = torch.from_numpy(r["pixel_values"][0]).to(torch.float32).contiguous()
        assert r["pixel_attention_mask"].all(), "every tile is whole"
        out.append((pv, int(r["rows"][0][0]), int(r["cols"][0][0])))
    return out


def tiling():
    rows = []
    for longest, tile, sizes in [(LONGEST, TILE, TILING_SIZES)] + [(lo, t, REAL_SIZES) for lo, t in REAL]:
        proc = image_processor("idefics3", size={"longest_edge": longest}, max_image_size={"longest_edge": tile})
        for hw in sizes:
            _, r, c = proc.get_number_of_image_patches(*hw, {"size": {"longest_edge": longest},
                                                              "max_image_size": {"longest_edge": tile}})
            rows.append({"hw": list(hw), "longest_edge": longest, "tile": tile, "rows": r, "cols": c})
    return rows


def write_tokenizer(out_dir):
    write_byte_tokenizer(out_dir, SPECIALS, TEMPLATE)
    config = json.loads((out_dir / "tokenizer_config.json").read_text())
    config.update({"bos_token": "<|im_start|>", "eos_token": "<end_of_utterance>"})
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def build(name, out_dir):
    import torch
    import transformers
    seed = VARIANTS[name]["seed"]
    model = random_eager_model(out_dir, config_of(name), getattr(transformers, VARIANTS[name]["arch"]), seed)
    enlarge_siglip_embeddings(model.model.vision_model.embeddings, torch.Generator().manual_seed(seed + 1))
    save_state(model, out_dir)
    return model


def features(model, tiles):
    import torch
    with torch.no_grad():
        each = [model.model.get_image_features(pv[None]).pooler_output[0] for pv, _, _ in tiles]
        together = model.model.get_image_features(torch.cat([pv for pv, _, _ in tiles])[None]).pooler_output[0]
    assert torch.allclose(torch.cat(each), together, atol=1e-5)
    return each


def image_text(rows, cols, n):
    """Idefics3Processor.replace_image_token's text for an image of rows x cols tiles."""
    run = "<image>" * n
    if rows == 0 and cols == 0:
        return "<fake_token_around_image><global-img>" + run + "<fake_token_around_image>"
    text = ""
    for r in range(rows):
        for c in range(cols):
            text += f"<fake_token_around_image><row_{r + 1}_col_{c + 1}>" + run
        text += "\n"
    return text + "\n<fake_token_around_image><global-img>" + run + "<fake_token_around_image>"


def run_case(name, model, tok, tiles, before, which, between, after):
    import torch
    text = before
    for k, i in enumerate(which):
        _, rows, cols = tiles[i]
        text += image_text(rows, cols, tile_tokens(name)) + (between[k] if k < len(between) else "")
    text += after
    prompt = [BOS] + tok(text, add_special_tokens=False)["input_ids"]
    pv = torch.cat([tiles[i][0] for i in which])[None]
    ids = torch.tensor([prompt])
    with torch.no_grad():
        logits = model(input_ids=ids, pixel_values=pv).logits[0]
        gen = model.generate(ids, pixel_values=pv, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY, pad_token_id=3, eos_token_id=None)
    greedy = gen[0, len(prompt):].tolist()
    assert greedy[0] == int(logits[-1].argmax()), "generate's first token is the prefill's argmax"
    return {"prompt": prompt, "images": which, "logits": rounded(logits[:, :N_LOGITS].tolist()), "greedy": greedy}


def run_chat(name, model, out_dir, images_u8, parts):
    """A chat through Idefics3Processor (apply_chat_template, then the processor's expansion of each
    <image>), and N_CHAT_GREEDY greedy tokens with their logprobs."""
    import torch
    from PIL import Image
    from transformers import AutoTokenizer, Idefics3Processor
    proc = Idefics3Processor(image_processor=image_processor(name), tokenizer=AutoTokenizer.from_pretrained(out_dir),
                             image_seq_len=tile_tokens(name), chat_template=TEMPLATE)
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image"} for p in parts]
    text = proc.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    which = [p for p in parts if not isinstance(p, str)]
    inputs = proc(text=text, images=[[Image.fromarray(images_u8[i], "RGB") for i in which]], return_tensors="pt")
    prompt = inputs["input_ids"][0].tolist()
    with torch.no_grad():
        gen = model.generate(**inputs, do_sample=False, max_new_tokens=N_CHAT_GREEDY, min_new_tokens=N_CHAT_GREEDY,
                             pad_token_id=3, eos_token_id=None, output_logits=True, return_dict_in_generate=True)
    greedy = gen.sequences[0, len(prompt):].tolist()
    logprobs = [float(torch.log_softmax(step[0].double(), -1)[t]) for step, t in zip(gen.logits, greedy)]
    return {"parts": parts, "text": text, "prompt": prompt, "greedy": greedy, "logprobs": logprobs}


def make(name):
    import torch
    import transformers
    from PIL import Image
    from transformers import AutoTokenizer
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    images = random_images(VARIANTS[name]["seed"])
    tiles = preprocess(name, images)
    model = build(name, out_dir)
    write_tokenizer(out_dir)
    proc = processor_config(name)
    (out_dir / "preprocessor_config.json").write_text(json.dumps(proc, indent=2) + "\n")
    (out_dir / "processor_config.json").write_text(json.dumps(
        {"processor_class": "Idefics3Processor", "image_seq_len": tile_tokens(name)}, indent=2) + "\n")
    for k, img in enumerate(images):
        Image.fromarray(img, "RGB").save(out_dir / f"image{k}.png")
    (out_dir / "pixel_values.f32").write_bytes(torch.cat([pv for pv, _, _ in tiles]).numpy().astype("<f4").tobytes())
    tok = AutoTokenizer.from_pretrained(out_dir)
    feats = features(model, tiles)
    cases = [run_case(name, model, tok, tiles, "User:", [0, 2], [" and "], " Describe.\nAssistant:"),
             run_case(name, model, tok, tiles, "User: ", [1], [], "<end_of_utterance>\nAssistant:")]
    chats = [run_chat(name, model, out_dir, images, parts) for parts in CHATS]
    cls = getattr(transformers, VARIANTS[name]["arch"])
    reloaded = cls.from_pretrained(out_dir, dtype=torch.float32).eval()
    for a, b in zip(feats, features(reloaded, tiles)):
        assert torch.allclose(a, b, atol=1e-5), f"the saved checkpoint reproduces the features: {(a - b).abs().max()}"
    expected = {
        "generator": f"scripts/make_idefics3_fixtures.py (transformers {transformers.__version__})",
        "tile": TILE, "patch_size": PATCH, "image_token": IMAGE, "tile_tokens": tile_tokens(name),
        "images": [{"source_hw": list(src), "rows": r, "cols": c, "n_tiles": len(pv), "features": rounded(f.tolist())}
                   for src, (pv, r, c), f in zip(SOURCES, tiles, feats)],
        "cases": cases, "chats": chats,
        "tiling": tiling() if name == "idefics3" else [],
    }
    (out_dir / "expected.json").write_text(json.dumps(expected) + "\n")
    print(f"wrote {out_dir}: tiles {[(len(pv), r, c) for pv, r, c in tiles]}, {tile_tokens(name)} tokens a tile")


def main():
    ensure_venv(__file__)
    ensure_pillow()
    for name in sys.argv[1:] or list(VARIANTS):
        make(name)


if __name__ == "__main__":
    main()
