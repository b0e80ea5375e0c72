#!/usr/bin/env python3
"""Writes tests/fixtures/llava, llava_full and llava_siglip: tiny random
LlavaForConditionalGeneration checkpoints (llava-hf/llava-1.5-7b-hf's architecture: a vision
tower, LlavaMultiModalProjector, a language model) and transformers' outputs on them, which
tests/models/llava_vision_test.cpp, tests/actors/engine_vision_llava_test.cpp and
tests/server/test_openai_llava.py compare with.

The checkpoints are the Hub's form at tiny size: config.json as llava-1.5's (text_config and
vision_config objects, image_token_index, vision_feature_layer, vision_feature_select_strategy,
projector fields), model.safetensors under the Hub's names (`vision_tower.vision_model.*`,
`multi_modal_projector.*`, `language_model.model.*`, `language_model.lm_head.weight`); the script
reloads each directory with from_pretrained and checks that it reproduces the features.
  - llava: CLIP tower (class embedding, pre_layrnorm, quick_gelu), 3 layers of width 32 (2 heads),
    MLP 48, 28-pixel images in 4-pixel patches (49 patches, 50 positions), vision_feature_layer -2
    (2 of the 3 layers run), strategy default (49 image tokens), gelu projector with biases; a
    Llama language model (2 layers, hidden 48, 3 heads and 1 KV head of 16); a tokenizer and
    llava-1.5's chat template.
  - llava_full: the CLIP tower with vision_feature_layer [0, -1] (the embeddings after
    pre_layrnorm and the last layer, concatenated) and strategy full (the class row kept: 50 image
    tokens), projector gelu_pytorch_tanh without biases; a Qwen2 language model (q/k/v biases).
  - llava_siglip: a SigLIP tower (patch bias, no class token, no pre-norm, gelu_pytorch_tanh),
    vision_feature_layer -1, strategy default (which drops the first patch, as transformers does:
    48 image tokens); a Mistral language model.
Images: random RGB bytes of 40x60, 28x28 and 61x33 pixels (height x width), as PNGs; the
processor is CLIPImageProcessor's (PIL backend: shortest edge 28 bicubic, center crop 28x28, CLIP
mean/std). expected.json:
  - `generator`, `image_size`, `patch_size`, `image_token`, `n_image_tokens`;
  - `images`: per image `source_hw`, `features` [n_image_tokens, 48] (get_image_features'
    pooler_output for it alone) and (llava only) `pixel_values` [3, 28, 28] (CLIPImageProcessorPil's);
  - `cases` (two for llava, the first for the others): `prompt` ids (text around runs of image
    tokens), `images` (which, in order), `logits` at every position (ids 0..N_LOGITS-1),
    `greedy` (4 tokens of generate());
  - `chats` (llava only): OpenAI-style messages with image parts, the prompt ids transformers'
    apply_chat_template and tokenizer make with each `<image>` expanded to n_image_tokens image
    tokens (LlavaProcessor's expansion), `greedy` (6 tokens, no stop) and their `logprobs`.

Run: python3 scripts/make_llava_fixtures.py (re-runs itself inside .brigade/fixtures-venv). CI
never runs it: the fixtures are committed.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, randomize  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402
from make_pixtral_fixtures import rounded, write_byte_tokenizer  # noqa: E402

SEED = 1515
IMAGE = 3
IMAGE_SIZE, PATCH = 28, 4
SOURCES = [(40, 60), (28, 28), (61, 33)]
N_GREEDY, N_CHAT_GREEDY, N_LOGITS = 4, 6, 32
SPECIALS = ["<unk>", "<s>", "</s>", "<image>", "<pad>"]
VOCAB = len(SPECIALS) + 256
# llava-hf/llava-1.5-7b-hf's chat template (its chat_template.json).
TEMPLATE = ("{% for message in messages %}{% if message['role'] != 'system' %}{{ message['role'].upper() + ': '}}"
            "{% endif %}{# Render all images first #}{% for content in message['content'] | selectattr('type', "
            "'equalto', 'image') %}{{ '<image>\n' }}{% endfor %}{# Render all text next #}{% if message['role'] != "
            "'assistant' %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
            "{{ content['text'] + ' '}}{% endfor %}{% else %}{% for content in message['content'] | selectattr('type', "
            "'equalto', 'text') %}{% generation %}{{ content['text'] + ' '}}{% endgeneration %}{% endfor %}{% endif %}"
            "{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}")
CHATS = [["What is it?", 0], ["Compare", 2, "with", 1]]

TEXT = {"vocab_size": VOCAB, "hidden_size": 48, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 3, "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 4, "tie_word_embeddings": False}
CLIP = {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3,
        "num_attention_heads": 2, "image_size": IMAGE_SIZE, "patch_size": PATCH, "projection_dim": 16,
        "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5}
SIGLIP = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
          "num_attention_heads": 2, "image_size": IMAGE_SIZE, "patch_size": PATCH, "hidden_act": "gelu_pytorch_tanh",
          "layer_norm_eps": 1e-6}
VARIANTS = {
    "llava": {"text_config": dict(TEXT, model_type="llama"), "vision_config": CLIP, "vision_feature_layer": -2,
              "vision_feature_select_strategy": "default", "projector_hidden_act": "gelu",
              "multimodal_projector_bias": True},
    "llava_full": {"text_config": dict(TEXT, model_type="qwen2"), "vision_config": CLIP,
                   "vision_feature_layer": [0, -1], "vision_feature_select_strategy": "full",
                   "projector_hidden_act": "gelu_pytorch_tanh", "multimodal_projector_bias": False},
    "llava_siglip": {"text_config": dict(TEXT, model_type="mistral", sliding_window=None), "vision_config": SIGLIP,
                     "vision_feature_layer": -1, "vision_feature_select_strategy": "default",
                     "projector_hidden_act": "gelu", "multimodal_projector_bias": True},
}
PROCESSOR = {
    "image_processor_type": "CLIPImageProcessor", "do_resize": True, "size": {"shortest_edge": IMAGE_SIZE},
    "resample": 3, "do_center_crop": True, "crop_size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE},
    "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    "do_convert_rgb": True,
}


def config_of(name):
    v = VARIANTS[name]
    return dict({"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "dtype": "float32",
                 "image_token_index": IMAGE, "image_seq_length": 49, "tie_word_embeddings": False}, **v)


def hub_name(key):
    """transformers 5's state-dict name -> the Hub checkpoints' (llava-hf) name."""
    for old, new in (("model.vision_tower.", "vision_tower.vision_model."), ("model.multi_modal_projector.", "multi_modal_projector."),
                     ("model.language_model.", "language_model.model."), ("lm_head.", "language_model.lm_head.")):
        if key.startswith(old):
            return new + key[len(old):]
    return key


def random_images():
    import numpy as np
    rng = np.random.default_rng(SEED)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SOURCES]


def preprocess(images_u8):
    import torch
    from PIL import Image
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
    proc = CLIPImageProcessorPil(**{k: v for k, v in PROCESSOR.items() if k != "image_processor_type"})
    return [torch.from_numpy(proc(images=Image.fromarray(img, "RGB"), return_tensors="np")["pixel_values"][0])
            .to(torch.float32).contiguous() for img in images_u8]


def build(name, out_dir):
    import torch
    import transformers
    from safetensors.torch import save_file
    (out_dir / "config.json").write_text(json.dumps(config_of(name), indent=2) + "\n")
    (out_dir / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2) + "\n")
    write_byte_tokenizer(out_dir, SPECIALS, TEMPLATE)
    config = transformers.AutoConfig.from_pretrained(out_dir)
    for c in (config, config.text_config, config.vision_config):
        c._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = transformers.LlavaForConditionalGeneration(config).to(torch.float32).eval()
    randomize(model, SEED)
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():  # the convolution's fan-in is 3 * 4 * 4; CLIP's class embedding as large as a patch's
        emb = model.model.vision_tower.embeddings
        emb.patch_embedding.weight.copy_(torch.randn(emb.patch_embedding.weight.shape, generator=g) *
                                         emb.patch_embedding.weight[0].numel() ** -0.5)
        if hasattr(emb, "class_embedding"):
            emb.class_embedding.copy_(torch.randn(emb.class_embedding.shape, generator=g))
    state = {hub_name(k): v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "model.safetensors").chmod(0o644)
    return model


def features(model, pixels):
    import torch
    with torch.no_grad():
        each = [model.model.get_image_features(pv[None]).pooler_output[0] for pv in pixels]
        together = model.model.get_image_features(torch.stack(pixels)).pooler_output
    for a, b in zip(each, together):
        assert torch.allclose(a, b, atol=1e-5), "an image's features do not depend on the others in the call"
    return each


def run_case(model, pixels, n_tokens, before, which, between, after):
    import torch
    prompt = list(before)
    for k, i in enumerate(which):
        prompt += [IMAGE] * n_tokens + (between[k] if k < len(between) else [])
    prompt += after
    pv = torch.stack([pixels[i] for i in which])
    ids = torch.tensor([prompt])
    with torch.no_grad():
        logits = model(input_ids=ids, pixel_values=pv).logits[0]
        gen = model.generate(ids, pixel_values=pv, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY, pad_token_id=4, eos_token_id=None)
    greedy = gen[0, len(prompt):].tolist()
    assert greedy[0] == int(logits[-1].argmax()), "generate's first token is the prefill's argmax"
    return {"prompt": prompt, "images": which, "logits": rounded(logits[:, :N_LOGITS].tolist()), "greedy": greedy}


def run_chat(model, out_dir, pixels, n_tokens, parts):
    """A chat's prompt as the template and tokenizer write it, each <image> expanded to n_tokens
    image tokens (LlavaProcessor), and N_CHAT_GREEDY greedy tokens with their logprobs."""
    import torch
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(out_dir)
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image"} for p in parts]
    text = tok.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    expanded = text.replace("<image>", "<image>" * n_tokens)
    prompt = tok(expanded, add_special_tokens=False)["input_ids"]
    which = [p for p in parts if not isinstance(p, str)]
    assert prompt.count(IMAGE) == n_tokens * len(which), text
    ids = torch.tensor([prompt])
    with torch.no_grad():
        gen = model.generate(ids, pixel_values=torch.stack([pixels[i] for i in which]),
                             attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=N_CHAT_GREEDY,
                             min_new_tokens=N_CHAT_GREEDY, pad_token_id=4, eos_token_id=None, output_logits=True,
                             return_dict_in_generate=True)
    greedy = gen.sequences[0, len(prompt):].tolist()
    logprobs = [float(torch.log_softmax(step[0].double(), -1)[t]) for step, t in zip(gen.logits, greedy)]
    return {"parts": parts, "text": text, "prompt": prompt, "greedy": greedy, "logprobs": logprobs}


def make(name, images, pixels):
    import torch
    import transformers
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build(name, out_dir)
    from PIL import Image
    for k, img in enumerate(images):
        Image.fromarray(img, "RGB").save(out_dir / f"image{k}.png")
    feats = features(model, pixels)
    n_tokens = feats[0].shape[0]
    cases = [run_case(model, pixels, n_tokens, [1, 5, 7], [1, 2], [[9, 11]], [30, 31])]
    if name == "llava":
        cases.append(run_case(model, pixels, n_tokens, [1, 30], [0], [], [20, 21, 22, 40]))
    chats = [run_chat(model, out_dir, pixels, n_tokens, parts) for parts in CHATS] if name == "llava" else []
    reloaded = transformers.LlavaForConditionalGeneration.from_pretrained(out_dir, dtype=torch.float32).eval()
    for a, b in zip(feats, features(reloaded, pixels)):
        assert torch.allclose(a, b, atol=1e-5), f"the saved checkpoint reproduces the features: {(a - b).abs().max()}"
    expected = {
        "generator": f"scripts/make_llava_fixtures.py (transformers {transformers.__version__})",
        "image_size": IMAGE_SIZE, "patch_size": PATCH, "image_token": IMAGE, "n_image_tokens": n_tokens,
        "images": [dict({"source_hw": list(src), "features": rounded(f.tolist())},
                        **({"pixel_values": [rounded(ch.tolist(), 9) for ch in pv]} if name == "llava" else {}))
                   for src, pv, f in zip(SOURCES, pixels, feats)],
        "cases": cases, "chats": chats,
    }
    (out_dir / "expected.json").write_text(json.dumps(expected) + "\n")
    if name != "llava":
        for f in ("tokenizer.json", "tokenizer_config.json") + tuple(f"image{k}.png" for k in range(len(images))):
            (out_dir / f).unlink()
    print(f"wrote {out_dir}: {n_tokens} tokens per image")


def main():
    ensure_venv(__file__)
    ensure_pillow()
    images = random_images()
    pixels = preprocess(images)
    for name in (sys.argv[1:] or VARIANTS):
        make(name, images, pixels)


if __name__ == "__main__":
    main()
