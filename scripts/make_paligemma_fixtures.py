#!/usr/bin/env python3
"""Writes tests/fixtures/paligemma and tests/fixtures/paligemma2: a tiny random
PaliGemmaForConditionalGeneration each (PaliGemma 1's architecture: a SigLIP tower, its last hidden
state through multi_modal_projector.linear (with bias) straight into a Gemma 1 language model;
PaliGemma 2's: the same over a Gemma 2 language model) and transformers' outputs on them.

The tower: 16-pixel images in 4-pixel patches (4 x 4 = 16 image tokens an image; no pooling head,
no tiling), 3 layers, the last hidden state after post_layernorm; the projector maps the tower's
width 32 to the text width 32 (projection_dim). The image features go into the sequence unscaled
(the text embeddings alone are multiplied by sqrt(hidden); they are drawn N(0, 0.15^2) so that, so
scaled, they are about as large as the image features: N(0, 1) would drown the images and the
context, and with tied embeddings each token would mostly predict itself, making the greedy tokens
one repeated id). The tower's position and patch embeddings are drawn large enough to matter (as
the Aya Vision fixture's). SiglipImageProcessorPil resizes every image to 16 x 16 (bicubic, whatever
its aspect: the sources are 40 x 90, 32 x 32 and 70 x 30) and normalizes to [-1, 1]. The text: 2 layers,
2 heads of 16 over 1 kv head (as MQA in gemma-2b); PaliGemma 2 adds Gemma 2's rules: a sliding
window of 24 on layer 0 (layer 1 global), sandwich norms, query_pre_attn_scalar 16 and softcaps
small enough to bind (attention 5, logits 10). A byte-level tokenizer with <pad> <eos> <bos> <unk>
<image> at 0..4 (PaliGemma's pad 0, eos 1, bos 2; <image> inside the vocab).

What these fixtures pin down is PaliGemma's prefix-LM attention: the prompt (image tokens, <bos>,
the text and its "\n": every token PaliGemmaProcessor returns with token_type_ids 0) attends
bidirectionally, on PaliGemma 2's sliding layer too (the prefix overrides the window); generated
tokens attend causally (and within the window on the sliding layer). Three of paligemma2's four
prompts (28, 57 and 27 tokens) are longer than its window, so a prompt row there sees keys the window
alone would hide (brigade runs such a prompt alone in its step, its sliding layers unwindowed); the
text-only prompt (12 tokens) fits it. The generated tokens run past the window, so it binds in their
`decode_logits` and `greedy`. Each case's
`causal_max_diff` is the largest difference between its logits and a plain causal forward of the
same prompt, so a causal implementation is caught. transformers numbers positions from 1 in
PaliGemma; RoPE only sees differences, so 0-based positions give the same logits.

expected.json (per directory):
  - `images`: per source image its `source_hw` and `features` (get_image_features' pooler_output,
    [16, text hidden]); pixel_values.f32 holds the images in order ([n, 3, 16, 16], float32
    little-endian) as the processor makes them from image0..2.png;
  - `cases`: `text` (what PaliGemmaProcessor was given; for the text-only case, "detect cat", whose
    ids [bos] + "detect cat" + "\n" are fed straight to the model: the processor refuses a text
    without images, and brigade lays it out so), `images`, `prompt` (the processor's
    input_ids: without an <image> marker it writes the images' tokens, <bos>, the text, "\n"; with
    markers, <bos> after the last one and "\n" at the end), `logits` (every position, the first
    N_LOGITS ids), `greedy` (N_GREEDY tokens of generate), `decode_logits` (the first N_LOGITS ids of
    each cached decode step i >= 1, fed greedy token i - 1) and `causal_max_diff`.

The script checks, besides: the attention probabilities of both forwards (prefix: all > 0 on every
layer; plain: zero above the diagonal and outside the window), that token_type_ids of ones give the
plain causal forward, that 0-based position ids give the same logits, that one forward of prompt +
greedy tokens (those with token_type_ids 1) reproduces generate's step logits, that AutoProcessor
on the written directory makes case 0's ids and pixels, and that from_pretrained reproduces the
features. The C++ tests compare brigade's image features, prefill logits, decode logits and greedy
tokens with these. The checkpoint holds model.state_dict()'s names (model.vision_tower.*,
model.multi_modal_projector.linear.*, model.language_model.*; lm_head.weight left out: tied).

Run: python3 scripts/make_paligemma_fixtures.py (re-runs itself inside .brigade/fixtures-venv).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, enlarge_siglip_embeddings, random_eager_model, save_state  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402
from make_pixtral_fixtures import rounded, write_byte_tokenizer  # noqa: E402

SEED = 5151
IMAGE_SIZE, PATCH = 16, 4
IMAGE_TOKENS = (IMAGE_SIZE // PATCH) ** 2
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<image>"]
PAD, EOS, BOS, IMAGE = 0, 1, 2, 4
VOCAB = len(SPECIALS) + 256
SOURCES = [(40, 90), (32, 32), (70, 30)]  # (h, w): wide, square, tall; all resized to 16 x 16
N_GREEDY, N_LOGITS = 12, 32
EMBED_STD = 0.15
# (text given to the processor, source images); text None: the text-only case built by hand.
CASES = [("caption en", [0]), ("<image><image>answer en what differs?", [2, 1]), ("Look <image> now", [1]),
         (None, [])]
TEXT_ONLY = "detect cat"

TEXT_COMMON = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
               "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 1024,
               "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "bos_token_id": BOS, "eos_token_id": EOS,
               "pad_token_id": PAD, "tie_word_embeddings": True}
TEXTS = {
    "paligemma": dict(TEXT_COMMON, model_type="gemma", hidden_act="gelu_pytorch_tanh"),
    "paligemma2": dict(TEXT_COMMON, model_type="gemma2", hidden_activation="gelu_pytorch_tanh", sliding_window=24,
                       layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=16,
                       attn_logit_softcapping=5.0, final_logit_softcapping=10.0),
}
VISION = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3,
          "num_attention_heads": 2, "num_channels": 3, "image_size": IMAGE_SIZE, "patch_size": PATCH,
          "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6, "vision_use_head": False,
          "projection_dim": 32}
PROCESSOR = {
    "image_processor_type": "SiglipImageProcessor", "processor_class": "PaliGemmaProcessor",
    "image_seq_length": IMAGE_TOKENS, "size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE}, "resample": 3,
    "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_convert_rgb": True,
}


def config_for(name):
    return {"architectures": ["PaliGemmaForConditionalGeneration"], "model_type": "paligemma", "dtype": "float32",
            "image_token_index": IMAGE, "projection_dim": 32, "hidden_size": 32, "vocab_size": VOCAB,
            "bos_token_id": BOS, "eos_token_id": EOS, "pad_token_id": PAD, "tie_word_embeddings": True,
            "text_config": TEXTS[name], "vision_config": VISION}


def random_images():
    import numpy as np
    rng = np.random.default_rng(SEED)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SOURCES]


def image_processor():
    from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil
    proc = SiglipImageProcessorPil(**{k: v for k, v in PROCESSOR.items()
                                      if k not in ("image_processor_type", "processor_class", "image_seq_length")})
    proc.image_seq_length = IMAGE_TOKENS  # what PaliGemmaProcessor reads (from preprocessor_config.json)
    return proc


def processor(out_dir):
    from transformers import AutoTokenizer, PaliGemmaProcessor
    proc = PaliGemmaProcessor(image_processor=image_processor(), tokenizer=AutoTokenizer.from_pretrained(out_dir))
    assert proc.image_token == "<image>" and proc.image_token_id == IMAGE, (proc.image_token, proc.image_token_id)
    assert proc.tokenizer.convert_tokens_to_ids(["<pad>", "<eos>", "<bos>", "<image>"]) == [PAD, EOS, BOS, IMAGE]
    return proc


def preprocess(images_u8):
    import torch
    from PIL import Image
    proc = image_processor()
    out = []
    for img in images_u8:
        r = proc(images=Image.fromarray(img, "RGB"), return_tensors="np")
        assert r["pixel_values"].shape == (1, 3, IMAGE_SIZE, IMAGE_SIZE), r["pixel_values"].shape
        out.append(torch.from_numpy(r["pixel_values"]).to(torch.float32).contiguous())
    return out


def write_tokenizer(out_dir):
    write_byte_tokenizer(out_dir, SPECIALS, None)
    config = json.loads((out_dir / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    config.update({"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"})
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def build(out_dir, name):
    import torch
    import transformers
    model = random_eager_model(out_dir, config_for(name), transformers.PaliGemmaForConditionalGeneration, SEED)
    assert model.config.text_config.use_bidirectional_attention is True  # PaliGemmaConfig's default for both
    g = torch.Generator().manual_seed(SEED + 1)
    enlarge_siglip_embeddings(model.model.vision_tower.embeddings, g)
    with torch.no_grad():
        # Text embeddings N(0, EMBED_STD^2): times sqrt(32) they are as large as the image features
        # (N(0, 1) would drown them and the context, and with tied embeddings each token would
        # predict itself).
        tok = model.model.language_model.embed_tokens.weight
        tok.copy_(torch.randn(tok.shape, generator=g) * EMBED_STD)
    assert model.lm_head.weight.data_ptr() == model.model.language_model.embed_tokens.weight.data_ptr()
    state = save_state(model, out_dir, drop=("lm_head.weight",))
    print(f"{name}: model.safetensors tensors:")
    for k, v in state.items():
        print(f"  {k} {list(v.shape)}")
    return model


def features(model, pixels):
    import torch
    with torch.no_grad():
        each = [model.model.get_image_features(pv).pooler_output.reshape(-1, model.config.text_config.hidden_size)
                for pv in pixels]
        together = model.model.get_image_features(torch.cat(pixels)).pooler_output
    assert torch.allclose(torch.cat(each), together.reshape(-1, together.shape[-1]), atol=1e-5)
    assert all(f.shape == (IMAGE_TOKENS, 32) for f in each)
    return each


def check_masks(model, ids, pv, tti, window):
    """Checks the attention the two forwards really used (every layer's probabilities): with the
    processor's token_type_ids every prompt token sees every other, on the sliding layer too; without
    them (eager) it is causal, and within the window on the sliding layer."""
    import torch
    n = ids.shape[1]
    with torch.no_grad():
        bi = model(input_ids=ids, pixel_values=pv, token_type_ids=tti, output_attentions=True).attentions
        ca = model(input_ids=ids, pixel_values=pv, output_attentions=True).attentions
    q, k = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    text = model.config.text_config
    for layer, kind in enumerate(getattr(text, "layer_types", None) or ["full_attention"] * text.num_hidden_layers):
        ok = k <= q
        if kind == "sliding_attention":
            ok &= k > q - window
        assert not bool(ca[layer][0][:, ~ok].any()), "the plain forward is causal (windowed)"
        assert bool((bi[layer][0] > 0).all()), "the prefix forward attends everywhere, window or not"


def run_case(model, out_dir, images_u8, pixels, text, which, window):
    import torch
    from PIL import Image
    if text is None:
        tok = processor(out_dir).tokenizer
        prompt = [BOS] + tok(TEXT_ONLY, add_special_tokens=False)["input_ids"] + tok("\n", add_special_tokens=False)[
            "input_ids"]
        ids = torch.tensor([prompt])
        tti = torch.zeros_like(ids)
        pv = None
        kw = {}
    else:
        proc = processor(out_dir)
        inputs = proc(text=text, images=[Image.fromarray(images_u8[i], "RGB") for i in which], return_tensors="pt")
        prompt = inputs["input_ids"][0].tolist()
        ids = inputs["input_ids"]
        tti = inputs["token_type_ids"]
        assert tti.eq(0).all(), "the whole prompt is prefix"
        pv = inputs["pixel_values"].to(torch.float32)
        assert torch.equal(pv, torch.cat([pixels[i] for i in which])), "the processor's pixels are ours"
        assert prompt.count(IMAGE) == IMAGE_TOKENS * len(which) and prompt.count(BOS) == 1
        kw = {"pixel_values": pv}
    with torch.no_grad():
        logits = model(input_ids=ids, token_type_ids=tti, **kw).logits[0]
        causal = model(input_ids=ids, **kw).logits[0]  # eager, no mask: create_causal_mask's causal mask
        ones = model(input_ids=ids, token_type_ids=torch.ones_like(tti), **kw).logits[0]
        zero_based = model(input_ids=ids, token_type_ids=tti, position_ids=torch.arange(len(prompt))[None],
                           **kw).logits[0]
        gen = model.generate(ids, attention_mask=torch.ones_like(ids), token_type_ids=tti, do_sample=False,
                             max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY, pad_token_id=PAD, eos_token_id=None,
                             output_logits=True, return_dict_in_generate=True, **kw)
    assert torch.allclose(causal, ones, atol=1e-3), "token_type_ids 1 (-1 blocks) is the plain causal forward"
    assert torch.allclose(logits, zero_based, atol=1e-3), "0-based positions give the same logits (RoPE: differences)"
    causal_max_diff = float((logits - causal).abs().max())
    assert causal_max_diff > 0.1, f"the prefix attention matters: {causal_max_diff}"
    check_masks(model, ids, pv, tti, window)
    greedy = gen.sequences[0, len(prompt):].tolist()
    assert greedy[0] == int(logits[-1].argmax()), "generate's first token is the prefill's argmax"
    assert torch.allclose(gen.logits[0][0], logits[-1], atol=1e-3)
    # The whole sequence at once, the generated tokens as suffix (token_type_ids 1), gives the
    # decode steps' logits: generated tokens attend causally.
    full = gen.sequences[:, :-1]
    full_tti = torch.cat([tti, torch.ones((1, N_GREEDY - 1), dtype=tti.dtype)], dim=1)
    with torch.no_grad():
        full_logits = model(input_ids=full, token_type_ids=full_tti, **kw).logits[0]
    for i, step in enumerate(gen.logits):
        assert torch.allclose(full_logits[len(prompt) - 1 + i], step[0], atol=1e-3), f"decode step {i}"
    return {"text": TEXT_ONLY if text is None else text, "images": which, "prompt": prompt, "logits": rounded(logits[:, :N_LOGITS].tolist()),
            "greedy": greedy, "decode_logits": rounded([step[0, :N_LOGITS].tolist() for step in gen.logits[1:]]),
            "causal_max_diff": float(f"{causal_max_diff:.7g}")}


def make(name, images, pixels):
    import torch
    import transformers
    from PIL import Image
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build(out_dir, name)
    write_tokenizer(out_dir)
    (out_dir / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2) + "\n")
    for k, img in enumerate(images):
        Image.fromarray(img, "RGB").save(out_dir / f"image{k}.png")
    (out_dir / "pixel_values.f32").write_bytes(torch.cat(pixels).numpy().astype("<f4").tobytes())
    feats = features(model, pixels)
    window = TEXTS[name].get("sliding_window")
    cases = [run_case(model, out_dir, images, pixels, text, which, window) for text, which in CASES]
    auto = transformers.AutoProcessor.from_pretrained(out_dir)  # the directory's own processor files
    first = auto(text=CASES[0][0], images=[Image.fromarray(images[i], "RGB") for i in CASES[0][1]], return_tensors="pt")
    assert first["input_ids"][0].tolist() == cases[0]["prompt"] and auto.image_token_id == IMAGE
    assert torch.equal(first["pixel_values"].to(torch.float32), torch.cat([pixels[i] for i in CASES[0][1]]))
    reloaded = transformers.PaliGemmaForConditionalGeneration.from_pretrained(out_dir, dtype=torch.float32).eval()
    for a, b in zip(feats, features(reloaded, pixels)):
        assert torch.allclose(a, b, atol=1e-5), f"the saved checkpoint reproduces the features: {(a - b).abs().max()}"
    expected = {
        "generator": f"scripts/make_paligemma_fixtures.py (transformers {transformers.__version__})",
        "image_size": IMAGE_SIZE, "patch_size": PATCH, "image_token": IMAGE, "image_tokens": IMAGE_TOKENS, "bos": BOS,
        "images": [{"source_hw": list(src), "features": rounded(f.tolist())} for src, f in zip(SOURCES, feats)],
        "cases": cases,
    }
    (out_dir / "expected.json").write_text(json.dumps(expected, separators=(",", ":")) + "\n")
    print(f"wrote {out_dir}: prompts of {[len(c['prompt']) for c in cases]} tokens, causal_max_diff "
          f"{[c['causal_max_diff'] for c in cases]}")


def main():
    ensure_venv(__file__)
    ensure_pillow()
    images = random_images()
    pixels = preprocess(images)
    for name in TEXTS:
        make(name, images, pixels)


if __name__ == "__main__":
    main()
