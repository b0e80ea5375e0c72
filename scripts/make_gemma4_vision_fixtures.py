#!/usr/bin/env python3
"""Writes Gemma 4's image fixtures: tiny random Gemma4ForConditionalGeneration checkpoints WITH a
vision tower, and transformers' outputs on them, which tests/models/gemma4_vision_test.cpp (the
processor, the tower and embedder, the language model with images) and
tests/server/test_openai_gemma4_vision.py (chat with images over HTTP) compare with.

  gemma4_vision      the text model of make_gemma4_fixtures.py's gemma4_dense (k_eq_v, two head
                     geometries, proportional RoPE, sliding window 8: shorter than an image; 3 layers) with
                     use_bidirectional_attention "vision" (the sliding layers' image rows see their
                     whole image, the full layers stay causal), vocab 272: the byte tokenizer below.
  gemma4_vision_ple  E2B-like: per-layer inputs (whose rows for the image tokens are the pad
                     token's), use_bidirectional_attention null (causal everywhere).

Vision tower (both): Gemma4VisionModel of width 32 (2 heads of 16, kv heads 2), 2 layers, MLP 48,
patches of 4x4 pixels, pooling_kernel_size 3, a position table of 128 per axis, axial RoPE theta
100, use_clipped_linears with finite random clip ranges on every linear (so the clamps bite), and
standardize with random std_bias / std_scale. Gemma4ImageProcessorPil (the PIL backend: Pillow's
bicubic) with patch_size 4, pooling_kernel_size 3, max_soft_tokens 70 (the least allowed): at
most 630 patches, 70 soft tokens per image.

Tokenizer (tokenizer.json, tokenizer_config.json): byte-level BPE over Gemma 4's special tokens
(<pad> 0, <eos> 1, <bos> 2, ..., <|image|> 7, <|image> 8 (boi), <image|> 9 (eoi), ...) then the 256
bytes, no merges, and the real chat template of google/gemma-4-31B-it
(tests/fixtures/chat_templates/templates/gemma-4.jinja), which writes <|image|> per image part.

expected.json:
  - `sizes`: for (height, width) pairs and (patch_size, pooling_kernel_size, max_soft_tokens)
    settings, processing_gemma4.get_aspect_ratio_preserving_size's target size and the soft
    tokens Gemma4Processor._get_num_multimodal_tokens counts;
  - `images`: per image `source_hw`, `grid` [patch rows, patch cols] after the processor's resize,
    `pixels_b64`: the processor's pixel_values for the real patches [grid_h * grid_w, 3 * 4 * 4]
    (patch-major, then y, x, channel) times 255 as uint8 bytes (they are whole levels over 255),
    `features`: get_image_features' pooler_output for that image [tokens, text hidden];
  - `cases`: `prompt` ids (text, <|image>, the image's <|image|> tokens, <image|>, ...) with
    `images` (which), the logits of Gemma4ForConditionalGeneration's forward at every position
    (ids 0..N_LOGITS-1), `greedy` (N_GREEDY tokens of generate()) and `decode_logits` (generate's
    logits of each of them, same ids: the cached decode);
  - `chats` (gemma4_vision only): OpenAI-style user parts, the prompt ids of the real template
    with each <|image|> expanded as Gemma4Processor.replace_image_token does
    (<|image> + <|image|> * soft tokens + <image|>), and N_CHAT_GREEDY greedy tokens with their
    log-softmax.
mm_token_type_ids (1 at image tokens) are passed as Gemma4Processor returns them, so the
bidirectional mask applies. image{k}.png is image k's bytes, the processor's input.

Run: python3 scripts/make_gemma4_vision_fixtures.py [NAME...] (re-runs itself inside
.brigade/fixtures-venv). The output is committed; CI never runs this.
"""
import base64
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
from make_gemma4_fixtures import gemma4_config  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402
from make_pixtral_fixtures import rounded, write_byte_tokenizer  # noqa: E402

SEEDS = {"gemma4_vision": 4410, "gemma4_vision_ple": 4411}
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|turn>", "<turn|>", "<|image|>", "<|image>", "<image|>",
            "<|video|>", "<|audio|>", "<|channel>", "<channel|>", "<|think|>", '<|"|>']
PAD, EOS, BOS, IMAGE, BOI, EOI, VIDEO, AUDIO = 0, 1, 2, 7, 8, 9, 10, 11
VOCAB = len(SPECIALS) + 256
PATCH, KERNEL, MAX_SOFT = 4, 3, 70
SOURCES = [(30, 45), (50, 20), (13, 90)]  # (height, width) of the random images, pixels
N_LOGITS = 32
N_GREEDY = 4
N_CHAT_GREEDY = 6
TEMPLATE = mf.ROOT / "tests" / "fixtures" / "chat_templates" / "templates" / "gemma-4.jinja"
CHATS = [["What is it?", 0], ["Compare", 2, "with", 1, "."]]
SIZE_SETTINGS = [(PATCH, KERNEL, MAX_SOFT), (16, 3, 70), (16, 3, 280), (16, 3, 1120)]
SIZE_HW = [(30, 45), (50, 20), (13, 90), (1, 1), (224, 224), (480, 640), (1080, 1920), (1000, 10), (10, 1000),
           (7, 4000), (4000, 7), (333, 777), (896, 896), (1, 5000), (48, 48), (768, 1024)]

PROCESSOR = {"image_processor_type": "Gemma4ImageProcessor", "do_resize": True, "resample": 3, "do_rescale": True,
             "rescale_factor": 1 / 255, "do_normalize": False, "image_mean": [0.0, 0.0, 0.0],
             "image_std": [1.0, 1.0, 1.0], "do_convert_rgb": True, "patch_size": PATCH, "max_soft_tokens": MAX_SOFT,
             "pooling_kernel_size": KERNEL}

VISION = {"model_type": "gemma4_vision", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
          "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh",
          "rms_norm_eps": 1e-6, "pooling_kernel_size": KERNEL, "patch_size": PATCH, "position_embedding_size": 128,
          "use_clipped_linears": True, "standardize": True,
          "rope_parameters": {"rope_type": "axial", "rope_theta": 100.0}}


def text_configs():
    small = {"num_hidden_layers": 3, "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]}
    return {
        "gemma4_vision": gemma4_config(vocab_size=VOCAB, attention_k_eq_v=True, num_global_key_value_heads=1,
                                       use_bidirectional_attention="vision", **small),
        "gemma4_vision_ple": gemma4_config(vocab_size=VOCAB, hidden_size_per_layer_input=8,
                                           vocab_size_per_layer_input=VOCAB, **small),
    }


def new_model(name):
    """The random model: make_fixtures.randomize, then the layer scalars, the clip ranges and the
    standardize buffers set (randomize leaves buffers alone)."""
    import torch
    import transformers
    text = text_configs()[name]
    text.pop("architectures", None)
    config = transformers.Gemma4Config(text_config=text, vision_config=dict(VISION), audio_config=None,
                                       image_token_id=IMAGE, video_token_id=VIDEO, audio_token_id=AUDIO,
                                       boi_token_id=BOI, eoi_token_id=EOI)
    config.architectures = ["Gemma4ForConditionalGeneration"]
    for c in (config, config.text_config, config.vision_config):
        c._attn_implementation = "eager"
    seed = SEEDS[name]
    torch.manual_seed(seed)
    model = transformers.Gemma4ForConditionalGeneration(config).to(torch.float32).eval()
    mf.randomize(model, seed)
    g = torch.Generator().manual_seed(seed + 7)
    u = lambda lo, hi: float(lo + (hi - lo) * torch.rand((), generator=g))  # noqa: E731
    with torch.no_grad():
        table = model.model.vision_tower.patch_embedder.position_embedding_table
        table.copy_(0.5 * torch.randn(table.shape, generator=g))
        for n, b in model.named_buffers():
            if n.endswith("layer_scalar"):
                b.copy_(1.0 + 0.2 * torch.randn(b.shape, generator=g))
            elif n.endswith("input_min"):
                b.fill_(-u(1.0, 2.5))
            elif n.endswith("input_max"):
                b.fill_(u(1.0, 2.5))
            elif n.endswith("output_min"):
                b.fill_(-u(1.0, 2.5))
            elif n.endswith("output_max"):
                b.fill_(u(1.0, 2.5))
            elif n.endswith("std_bias"):
                b.copy_(torch.randn(b.shape, generator=g))
            elif n.endswith("std_scale"):
                b.copy_(0.3 + 0.2 * torch.rand(b.shape, generator=g))
    return model


def random_images():
    import numpy as np
    rng = np.random.default_rng(4410)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SOURCES]


def preprocess(images_u8):
    """Per image: pixel_values of its real patches [n, 48], image_position_ids [n, 2], the grid."""
    from PIL import Image
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil
    kw = {k: v for k, v in PROCESSOR.items() if k != "image_processor_type"}
    proc = Gemma4ImageProcessorPil(**kw)
    out = []
    for img in images_u8:
        p = proc(images=Image.fromarray(img, "RGB"), return_tensors="pt")
        pos = p["image_position_ids"][0]
        real = (pos != -1).all(-1)
        n = int(real.sum())
        assert bool(real[:n].all()), "the real patches come first"
        grid = (int(pos[:n, 1].max()) + 1, int(pos[:n, 0].max()) + 1)
        assert grid[0] * grid[1] == n and int(p["num_soft_tokens_per_image"][0]) == n // KERNEL ** 2
        out.append({"pixel_values": p["pixel_values"][0], "positions": pos, "n": n, "grid": grid})
    return out


def sizes_table():
    from transformers.models.gemma4.processing_gemma4 import get_aspect_ratio_preserving_size
    rows = []
    for patch, kernel, soft in SIZE_SETTINGS:
        for h, w in SIZE_HW:
            th, tw = get_aspect_ratio_preserving_size(h, w, patch, soft * kernel ** 2, kernel)
            tokens = (th // patch) * (tw // patch) // kernel ** 2
            rows.append({"patch_size": patch, "pooling_kernel_size": kernel, "max_soft_tokens": soft, "hw": [h, w],
                         "target": [th, tw], "tokens": tokens})
    return rows


def image_tokens(pre):
    return [BOI] + [IMAGE] * (pre["n"] // KERNEL ** 2) + [EOI]


def model_inputs(prompt, pres):
    import torch
    ids = torch.tensor([prompt])
    kw = {"input_ids": ids, "mm_token_type_ids": (ids == IMAGE).long(), "attention_mask": torch.ones_like(ids)}
    if pres:
        kw["pixel_values"] = torch.stack([p["pixel_values"] for p in pres])
        kw["image_position_ids"] = torch.stack([p["positions"] for p in pres])
    return kw


def run_case(model, pres, before, which, between, after):
    import torch
    prompt = list(before)
    for k, i in enumerate(which):
        prompt += image_tokens(pres[i]) + (between[k] if k < len(between) else [])
    prompt += after
    kw = model_inputs(prompt, [pres[i] for i in which])
    with torch.no_grad():
        logits = model(**kw).logits[0]
        gen = model.generate(**kw, do_sample=False, max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY, pad_token_id=PAD,
                             eos_token_id=None, output_logits=True, return_dict_in_generate=True)
    greedy = gen.sequences[0, len(prompt):].tolist()
    assert greedy[0] == int(logits[-1].argmax()), "generate's first token is the prefill's argmax"
    assert torch.allclose(gen.logits[0][0], logits[-1], atol=1e-4), "generate's prefill is the forward's"
    return {"prompt": prompt, "images": which, "logits": rounded(logits[:, :N_LOGITS].tolist()), "greedy": greedy,
            "decode_logits": rounded([step[0, :N_LOGITS].tolist() for step in gen.logits])}


def run_chat(model, out_dir, pres, parts):
    """The prompt of the real template with each <|image|> expanded (Gemma4Processor), and
    N_CHAT_GREEDY greedy tokens of generate() with their logprobs."""
    import torch
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(out_dir)
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image"} for p in parts]
    text = tok.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    which = [p for p in parts if not isinstance(p, str)]
    pieces = text.split(SPECIALS[IMAGE])
    assert len(pieces) == len(which) + 1, text
    expanded = "".join(piece + (SPECIALS[BOI] + SPECIALS[IMAGE] * (pres[which[k]]["n"] // KERNEL ** 2) + SPECIALS[EOI]
                                if k < len(which) else "") for k, piece in enumerate(pieces))
    prompt = tok(expanded, add_special_tokens=False)["input_ids"]
    assert prompt.count(IMAGE) == sum(pres[i]["n"] // KERNEL ** 2 for i in which)
    kw = model_inputs(prompt, [pres[i] for i in which])
    with torch.no_grad():
        gen = model.generate(**kw, do_sample=False, max_new_tokens=N_CHAT_GREEDY, min_new_tokens=N_CHAT_GREEDY,
                             pad_token_id=PAD, eos_token_id=None, output_logits=True, return_dict_in_generate=True)
    greedy = gen.sequences[0, len(prompt):].tolist()
    logprobs = [float(torch.log_softmax(step[0].double(), -1)[t]) for step, t in zip(gen.logits, greedy)]
    return {"parts": parts, "prompt": prompt, "greedy": greedy, "logprobs": logprobs}


def features(model, pres):
    """get_image_features' pooler_output per image alone, checked against all in one call."""
    import torch
    with torch.no_grad():
        each = [model.model.get_image_features(p["pixel_values"][None], p["positions"][None]).pooler_output[0]
                for p in pres]
        together = model.model.get_image_features(torch.stack([p["pixel_values"] for p in pres]),
                                                  torch.stack([p["positions"] for p in pres])).pooler_output
    for a, b in zip(each, together):
        assert torch.allclose(a, b, atol=1e-5), "an image's features do not depend on the others in the call"
    return each


def make(name):
    import numpy as np
    import torch
    import transformers
    from PIL import Image
    from safetensors.torch import save_file
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model = new_model(name)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(model.config.to_json_string())
    (out_dir / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2) + "\n")
    write_byte_tokenizer(out_dir, SPECIALS, TEMPLATE.read_text())
    cfg = json.loads((out_dir / "tokenizer_config.json").read_text())
    cfg.update({"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>",
                "add_bos_token": False})
    (out_dir / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    images = random_images()
    for k, img in enumerate(images):
        Image.fromarray(img, "RGB").save(out_dir / f"image{k}.png")
    pres = preprocess(images)
    feats = features(model, pres)
    t = [BOS, 20, 30]
    cases = [run_case(model, pres, t, [0, 1], [[40, 50]], [60, 70]),
             run_case(model, pres, [BOS, 25], [2], [], [35, 45, 55])]
    chats = [run_chat(model, out_dir, pres, parts) for parts in CHATS] if name == "gemma4_vision" else []
    reloaded = transformers.Gemma4ForConditionalGeneration.from_pretrained(out_dir, dtype=torch.float32).eval()
    for a, b in zip(feats, features(reloaded, pres)):
        assert torch.allclose(a, b, atol=1e-5), f"the saved checkpoint reproduces the features: {(a - b).abs().max()}"
    images_out = []
    for src, p, f in zip(SOURCES, pres, feats):
        pv = p["pixel_values"][: p["n"]].numpy()
        levels = np.rint(pv.astype(np.float64) * 255)
        assert np.array_equal((levels * (1 / 255)).astype(np.float32), pv), "pixel values are whole levels / 255"
        images_out.append({"source_hw": list(src), "grid": list(p["grid"]),
                           "pixels_b64": base64.b64encode(levels.astype(np.uint8).tobytes()).decode(),
                           "features": rounded(f.tolist())})
    expected = {
        "generator": f"scripts/make_gemma4_vision_fixtures.py (transformers {transformers.__version__}, torch "
                     f"{torch.__version__}), seed {SEEDS[name]}",
        "patch_size": PATCH, "pooling_kernel_size": KERNEL, "max_soft_tokens": MAX_SOFT, "image_token": IMAGE,
        "boi_token": BOI, "eoi_token": EOI, "n_logits": N_LOGITS,
        "sizes": sizes_table(), "images": images_out, "cases": cases, "chats": chats,
    }
    (out_dir / "expected.json").write_text(json.dumps(expected) + "\n")
    print(f"wrote {out_dir}: grids {[p['grid'] for p in pres]}, tokens {[f.shape[0] for f in feats]}")


def main():
    mf.ensure_venv(__file__)
    ensure_pillow()
    names = sys.argv[1:] or list(SEEDS)
    unknown = set(names) - set(SEEDS)
    if unknown:
        sys.exit(f"unknown fixtures {sorted(unknown)}; known: {', '.join(SEEDS)}")
    for name in names:
        make(name)


if __name__ == "__main__":
    main()
