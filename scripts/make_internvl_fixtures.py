#!/usr/bin/env python3
"""Writes tests/fixtures/internvl, internvl_rms, internvl_chat and internvl_internlm2: tiny random
InternVLForConditionalGeneration checkpoints (InternVL3 / InternVL3.5 -hf's architecture: the
InternViT tower, pixel shuffle, InternVLMultiModalProjector, a Qwen2 or Qwen3 language model) and
transformers' outputs on them, which tests/models/internvl_test.cpp and
tests/server/test_openai_internvl.py compare with.

  - internvl: Qwen2 text model (2 layers, width 48), InternViT with LayerNorm, q/k/v biases, no
    qk norm, vision_feature_layer -1, 32-pixel tiles in 4-pixel patches (8 x 8 patches, 16 tokens
    a tile after the 0.5 pixel shuffle); a byte-level tokenizer with <img>, </img>,
    <IMG_CONTEXT> and ChatML tokens and the -hf checkpoints' chat template (transformers'
    convert_internvl_weights_to_hf.py writes it); preprocessor_config.json as GotOcr2's processor
    (crop_to_patches, min 1 / max 4 tiles).
  - internvl_rms: Qwen3 text model, InternViT with RMSNorm, qk norm, no attention biases,
    vision_feature_layer -2, use_mean_pooling false.
  - internvl_chat: internvl's weights in the original remote-code layout (InternVLChatModel:
    vision_model.*, mlp1.*, language_model.model.*; config llm_config / vision_config /
    downsample_ratio / select_layer / ps_version / template), the reverse of transformers'
    convert_internvl_weights_to_hf.py; no expected.json: its outputs must be internvl's.
  - internvl_internlm2: internvl_chat with the language model stored as InternLM2ForCausalLM (InternVL
    2 / 2.5's: model.tok_embeddings, attention.wqkv fused per KV group, attention.wo with a zero bias,
    feed_forward.w1/w3/w2, output), made from the committed internvl checkpoint; its outputs must
    be internvl's too. (One KV group, as internvl's text model has: the per-group split itself is
    checked by make_fixtures.py's internlm2 fixture.)

expected.json (internvl, internvl_rms):
  - `images`: per source image its `source_hw`, `n_tiles` (GotOcr2ImageProcessorPil's crop to
    patches with the thumbnail) and `features` (get_image_features' pooler_output, [tiles * 16,
    text hidden]); internvl's pixel_values.f32 holds the images' tiles in order ([tiles, 3, 32,
    32] each, float32 little-endian) as the processor makes them from image0..2.png;
  - `cases`: `prompt` ids (text around runs of <IMG_CONTEXT> between <img> and </img>), `images`,
    `logits` (every position, the first N_LOGITS ids) and `greedy` (N_GREEDY tokens);
  - `tiling` (internvl only): tile counts of the processor for more sizes, at the fixture's
    settings and at the real checkpoints' (448-pixel tiles, 1..12);
  - `chats` (internvl only): OpenAI-style messages, the prompt ids InternVLProcessor makes of the
    chat template's text with the images, and N_CHAT_GREEDY greedy tokens with their logprobs.

Run: python3 scripts/make_internvl_fixtures.py [NAME...] (re-runs itself inside .brigade/fixtures-venv).
"""
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import INTERNLM_AUTO_MAP, OUT, ensure_venv, internlm2_state, random_eager_model, save_state  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402
from make_pixtral_fixtures import rounded, write_byte_tokenizer  # noqa: E402

SEED = 2323
TILE, PATCH = 32, 4
SPECIALS = ["<unk>", "<s>", "</s>", "<pad>", "<img>", "</img>", "<IMG_CONTEXT>", "<|im_start|>", "<|im_end|>",
            "<video>"]
IMG_START, IMG_END, IMAGE = 4, 5, 6
VOCAB = len(SPECIALS) + 256
SOURCES = [(40, 90), (32, 32), (70, 30)]  # 2x1 tiles + thumbnail, 1 tile, 1x2 tiles + thumbnail (h, w)
N_GREEDY, N_CHAT_GREEDY, N_LOGITS = 4, 6, 32
CHATS = [["What is it?", 0], ["Compare", 2, "with", 1]]
TILING_SIZES = [(40, 90), (32, 32), (70, 30), (10, 200), (200, 10), (33, 65), (64, 64), (100, 31), (31, 100),
                (17, 50)]
REAL_SIZES = [(480, 640), (1080, 1920), (448, 448), (1000, 300), (300, 1000), (2000, 2000), (50, 2000),
              (768, 1024), (896, 448)]
# The -hf checkpoints' chat template (transformers' convert_internvl_weights_to_hf.py).
TEMPLATE = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}{% if message['content'] is "
            "string %}{{ message['content'] }}{% else %}{% for content in message['content'] %}{% if content['type'] "
            "== 'image' %}{{ '<IMG_CONTEXT>\n' }}{% elif content['type'] == 'video' %}{{ '<video>\n' }}{% elif "
            "content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}{{'<|im_end|>\n'}}"
            "{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\n' }}{% endif %}")

TEXT = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 512,
        "rms_norm_eps": 1e-6, "bos_token_id": 1, "eos_token_id": 8, "pad_token_id": 3, "tie_word_embeddings": False,
        "rope_theta": 1000000.0}
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
          "image_size": TILE, "patch_size": PATCH, "hidden_act": "gelu", "layer_norm_eps": 1e-6}
VARIANTS = {
    "internvl": {"text_config": dict(TEXT, model_type="qwen2"),
                 "vision_config": dict(VISION, norm_type="layer_norm", use_qk_norm=False, attention_bias=True),
                 "vision_feature_layer": -1},
    "internvl_rms": {"text_config": dict(TEXT, model_type="qwen3", tie_word_embeddings=True),
                     "vision_config": dict(VISION, num_hidden_layers=3, norm_type="rms_norm", use_qk_norm=True, attention_bias=False,
                                           use_mean_pooling=False),
                     "vision_feature_layer": -2},
}
# crop_to_patches false as the -hf checkpoints' files say: InternVLProcessor passes true whatever the
# file says (its images_kwargs default), so images are still tiled.
PROCESSOR = {
    "image_processor_type": "GotOcr2ImageProcessor", "processor_class": "InternVLProcessor",
    "crop_to_patches": False, "min_patches": 1, "max_patches": 4, "size": {"height": TILE, "width": TILE},
    "resample": 3, "do_resize": True, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
    "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225], "do_convert_rgb": True,
}
N_TILE_TOKENS = (TILE // PATCH) ** 2 // 4


def config_of(name):
    return dict({"architectures": ["InternVLForConditionalGeneration"], "model_type": "internvl", "dtype": "float32",
                 "image_token_id": IMAGE, "image_seq_length": N_TILE_TOKENS, "downsample_ratio": 0.5,
                 "projector_hidden_act": "gelu", "vision_feature_select_strategy": "default",
                 "tie_word_embeddings": VARIANTS[name]["text_config"]["tie_word_embeddings"]}, **VARIANTS[name])


def random_images():
    import numpy as np
    rng = np.random.default_rng(SEED)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SOURCES]


def image_processor(**over):
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil
    kw = {k: v for k, v in PROCESSOR.items() if k not in ("image_processor_type", "processor_class")}
    kw.update(over)
    return GotOcr2ImageProcessorPil(**kw)


def preprocess(images_u8):
    """Each image's tiles [n, 3, TILE, TILE] as GotOcr2ImageProcessorPil makes them with
    crop_to_patches (InternVLProcessor's default)."""
    import torch
    from PIL import Image
    proc = image_processor()
    out = []
    for img in images_u8:
        r = proc(images=Image.fromarray(img, "RGB"), crop_to_patches=True, return_tensors="np")
        assert int(r["num_patches"][0]) == len(r["pixel_values"])
        out.append(torch.from_numpy(r["pixel_values"]).to(torch.float32).contiguous())
    return out


def tiling():
    proc = image_processor()
    real = image_processor(size={"height": 448, "width": 448}, max_patches=12)
    rows = [{"hw": list(hw), "tile": TILE, "min": 1, "max": 4,
             "n_tiles": proc.get_number_of_image_patches(*hw, {"crop_to_patches": True})} for hw in TILING_SIZES]
    rows += [{"hw": list(hw), "tile": 448, "min": 1, "max": 12,
              "n_tiles": real.get_number_of_image_patches(*hw, {"crop_to_patches": True, "max_patches": 12,
                                                                 "size": {"height": 448, "width": 448}})}
             for hw in REAL_SIZES]
    return rows


def write_tokenizer(out_dir):
    write_byte_tokenizer(out_dir, SPECIALS, TEMPLATE)
    config = json.loads((out_dir / "tokenizer_config.json").read_text())
    config.update({"eos_token": "<|im_end|>", "extra_special_tokens": {
        "start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
        "video_token": "<video>"}})
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def build(name, out_dir):
    import torch
    import transformers
    model = random_eager_model(out_dir, config_of(name), transformers.InternVLForConditionalGeneration, SEED)
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():  # layer scales, class token and positions large enough to matter
        tower = model.model.vision_tower
        tower.embeddings.cls_token.copy_(torch.randn(tower.embeddings.cls_token.shape, generator=g))
        tower.embeddings.position_embeddings.copy_(torch.randn(tower.embeddings.position_embeddings.shape, generator=g))
        proj = tower.embeddings.patch_embeddings.projection.weight
        proj.copy_(torch.randn(proj.shape, generator=g) * proj[0].numel() ** -0.5)
        for layer in tower.encoder.layer:
            layer.lambda_1.copy_(0.5 + torch.rand(layer.lambda_1.shape, generator=g))
            layer.lambda_2.copy_(0.5 + torch.rand(layer.lambda_2.shape, generator=g))
    save_state(model, out_dir, drop=("lm_head.weight",) if model.config.tie_word_embeddings else ())
    return model


def features(model, tiles):
    import torch
    with torch.no_grad():
        each = [model.model.get_image_features(pv).pooler_output.reshape(-1, model.config.text_config.hidden_size)
                for pv in tiles]
        together = model.model.get_image_features(torch.cat(tiles)).pooler_output
    assert torch.allclose(torch.cat(each), together.reshape(-1, together.shape[-1]), atol=1e-5)
    return each


def image_run(n_tiles):
    return [IMG_START] + [IMAGE] * (N_TILE_TOKENS * n_tiles) + [IMG_END]


def run_case(model, tiles, before, which, between, after):
    import torch
    prompt = list(before)
    for k, i in enumerate(which):
        prompt += image_run(len(tiles[i])) + (between[k] if k < len(between) else [])
    prompt += after
    pv = torch.cat([tiles[i] for i in which])
    ids = torch.tensor([prompt])
    with torch.no_grad():
        logits = model(input_ids=ids, pixel_values=pv).logits[0]
        gen = model.generate(ids, pixel_values=pv, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY, pad_token_id=3, eos_token_id=None)
    greedy = gen[0, len(prompt):].tolist()
    assert greedy[0] == int(logits[-1].argmax()), "generate's first token is the prefill's argmax"
    return {"prompt": prompt, "images": which, "logits": rounded(logits[:, :N_LOGITS].tolist()), "greedy": greedy}


def run_chat(model, out_dir, images_u8, parts):
    """A chat through InternVLProcessor (apply_chat_template, then the processor's expansion of each
    <IMG_CONTEXT> into <img> + 16 per tile + </img>), and N_CHAT_GREEDY greedy tokens with their
    logprobs."""
    import torch
    from PIL import Image
    from transformers import AutoTokenizer, InternVLProcessor
    # AutoProcessor would also build the video processor, which needs torchvision (not in the venv):
    # build the processor without one (its class check skipped; images never reach it).
    InternVLProcessor.check_argument_for_proper_class = lambda self, name, arg: None
    proc = InternVLProcessor(image_processor=image_processor(), tokenizer=AutoTokenizer.from_pretrained(out_dir),
                             image_seq_length=N_TILE_TOKENS, chat_template=TEMPLATE)
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image"} for p in parts]
    text = proc.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    which = [p for p in parts if not isinstance(p, str)]
    inputs = proc(text=text, images=[Image.fromarray(images_u8[i], "RGB") for i in which], return_tensors="pt")
    prompt = inputs["input_ids"][0].tolist()
    with torch.no_grad():
        gen = model.generate(**inputs, do_sample=False, max_new_tokens=N_CHAT_GREEDY, min_new_tokens=N_CHAT_GREEDY,
                             pad_token_id=3, eos_token_id=None, output_logits=True, return_dict_in_generate=True)
    greedy = gen.sequences[0, len(prompt):].tolist()
    logprobs = [float(torch.log_softmax(step[0].double(), -1)[t]) for step, t in zip(gen.logits, greedy)]
    return {"parts": parts, "text": text, "prompt": prompt, "n_tiles": [int(n) for n in
            [len(inputs["pixel_values"])]], "greedy": greedy, "logprobs": logprobs}


def remote_name(key):
    """transformers 5's state-dict name -> the original InternVLChatModel checkpoint's (the reverse
    of convert_internvl_weights_to_hf.py's mapping); q/k/v are fused by the caller."""
    key = key.replace("model.language_model.", "language_model.model.").replace("lm_head.", "language_model.lm_head.")
    key = key.replace("model.multi_modal_projector.layer_norm", "mlp1.0")
    key = key.replace("model.multi_modal_projector.linear_1", "mlp1.1")
    key = key.replace("model.multi_modal_projector.linear_2", "mlp1.3")
    if key.startswith("model.vision_tower."):
        key = "vision_model." + key[len("model.vision_tower."):]
        for old, new in ((".layer.", ".layers."), ("cls_token", "class_embedding"),
                         ("position_embeddings", "position_embedding"), ("patch_embeddings.projection", "patch_embedding"),
                         ("attention.projection_layer", "attn.proj"), ("attention.", "attn."),
                         ("layernorm_before", "norm1"), ("layernorm_after", "norm2")):
            key = key.replace(old, new)
        key = re.sub(r"lambda_(\d)", r"ls\1", key)
    return key


def write_remote(model, out_dir, llm_arch="Qwen2ForCausalLM"):
    """internvl's checkpoint as the original remote-code InternVLChatModel stores it, its language
    model as Qwen2ForCausalLM (internvl_chat) or as the InternLM2ForCausalLM that computes the same
    (internvl_internlm2: InternVL 2 / 2.5's layout; bias true, wo's bias zero, as Qwen2's o_proj
    has none)."""
    import torch
    from safetensors.torch import save_file
    state = {}
    sd = model.state_dict()
    for k, v in sd.items():
        if ".attention.k_proj." in k or ".attention.v_proj." in k:
            continue
        if ".attention.q_proj." in k:
            parts = [sd[k.replace("q_proj", p)] for p in ("q_proj", "k_proj", "v_proj")]
            state[remote_name(k).replace("attn.q_proj", "attn.qkv")] = torch.cat(parts).contiguous()
            continue
        state[remote_name(k)] = v.contiguous()
    llm = dict(VARIANTS["internvl"]["text_config"], architectures=[llm_arch])
    if llm_arch == "InternLM2ForCausalLM":
        text = VARIANTS["internvl"]["text_config"]
        assert text["head_dim"] * text["num_attention_heads"] == text["hidden_size"], "InternLM2's head_dim is derived"
        state = internlm2_state(state, text["num_attention_heads"], text["num_key_value_heads"], text["head_dim"])
        for i in range(text["num_hidden_layers"]):
            state[f"language_model.model.layers.{i}.attention.wo.bias"] = torch.zeros(text["hidden_size"])
        llm = {k: v for k, v in llm.items() if k not in ("head_dim", "model_type")}
        llm.update(model_type="internlm2", bias=True, hidden_act="silu",
                   auto_map=INTERNLM_AUTO_MAP["internlm2"])
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "model.safetensors").chmod(0o644)
    vision = {k: v for k, v in VARIANTS["internvl"]["vision_config"].items()
              if k not in ("use_qk_norm", "attention_bias")}
    vision.update({"architectures": ["InternVisionModel"], "model_type": "intern_vit_6b", "qkv_bias": True,
                   "qk_normalization": False, "use_flash_attn": False, "drop_path_rate": 0.0})
    config = {"architectures": ["InternVLChatModel"], "model_type": "internvl_chat", "torch_dtype": "float32",
              "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig",
                           "AutoModel": "modeling_internvl_chat.InternVLChatModel"},
              "llm_config": llm, "vision_config": vision, "downsample_ratio": 0.5, "select_layer": -1,
              "ps_version": "v2", "template": "internvl2_5", "force_image_size": TILE, "dynamic_image_size": True,
              "use_thumbnail": True, "min_dynamic_patch": 1, "max_dynamic_patch": 4, "use_backbone_lora": 0,
              "use_llm_lora": 0, "tie_word_embeddings": False,
              # InternVLChatModel sets img_context_token_id from the tokenizer at run time; brigade
              # reads it here when present (the fixture's vocabulary is not Qwen's).
              "img_context_token_id": IMAGE}
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def make(name, images, tiles):
    import torch
    import transformers
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build(name, out_dir)
    from PIL import Image
    feats = features(model, tiles)
    cases = [run_case(model, tiles, [1, 40, 41], [0, 2], [[50, 51]], [60, 61]),
             run_case(model, tiles, [1, 30], [1], [], [20, 21, 22, 40])]
    chats = []
    if name == "internvl":
        (out_dir / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2) + "\n")
        (out_dir / "processor_config.json").write_text(json.dumps(
            {"processor_class": "InternVLProcessor", "image_seq_length": N_TILE_TOKENS}, indent=2) + "\n")
        write_tokenizer(out_dir)
        for k, img in enumerate(images):
            Image.fromarray(img, "RGB").save(out_dir / f"image{k}.png")
        # Every image's tiles in order, raw little-endian float32 (compact and exact).
        (out_dir / "pixel_values.f32").write_bytes(torch.cat(tiles).numpy().astype("<f4").tobytes())
        chats = [run_chat(model, out_dir, images, parts) for parts in CHATS]
    reloaded = transformers.InternVLForConditionalGeneration.from_pretrained(out_dir, dtype=torch.float32).eval()
    for a, b in zip(feats, features(reloaded, tiles)):
        assert torch.allclose(a, b, atol=1e-5), f"the saved checkpoint reproduces the features: {(a - b).abs().max()}"
    expected = {
        "generator": f"scripts/make_internvl_fixtures.py (transformers {transformers.__version__})",
        "tile": TILE, "patch_size": PATCH, "image_token": IMAGE, "img_start": IMG_START, "img_end": IMG_END,
        "tile_tokens": N_TILE_TOKENS,
        "images": [{"source_hw": list(src), "n_tiles": len(pv), "features": rounded(f.tolist())}
                   for src, pv, f in zip(SOURCES, tiles, feats)],
        "cases": cases, "chats": chats,
        "tiling": tiling() if name == "internvl" else [],
    }
    (out_dir / "expected.json").write_text(json.dumps(expected) + "\n")
    if name == "internvl":
        remote = OUT / "internvl_chat"
        remote.mkdir(parents=True, exist_ok=True)
        write_remote(model, remote)
    print(f"wrote {out_dir}: tiles {[len(t) for t in tiles]}, {N_TILE_TOKENS} tokens a tile")


def make_internlm2():
    """internvl_internlm2 from the committed internvl checkpoint (write_remote), so internvl's
    expected.json stays its reference."""
    import torch
    import transformers
    model = transformers.InternVLForConditionalGeneration.from_pretrained(OUT / "internvl", dtype=torch.float32).eval()
    out_dir = OUT / "internvl_internlm2"
    out_dir.mkdir(parents=True, exist_ok=True)
    write_remote(model, out_dir, "InternLM2ForCausalLM")
    print(f"wrote {out_dir}")


def main():
    ensure_venv(__file__)
    ensure_pillow()
    names = sys.argv[1:] or [*VARIANTS, "internvl_internlm2"]
    if any(n != "internvl_internlm2" for n in names):
        images = random_images()
        tiles = preprocess(images)
        for name in names:
            if name != "internvl_internlm2":
                make(name, images, tiles)
    if "internvl_internlm2" in names:
        make_internlm2()


if __name__ == "__main__":
    main()
