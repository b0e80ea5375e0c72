#!/usr/bin/env python3
"""Writes tests/fixtures/glm4v/ and tests/fixtures/glm4v_moe/: tiny random
Glm4vForConditionalGeneration (GLM-4.1V-9B's architecture) and Glm4vMoeForConditionalGeneration
(GLM-4.5V / GLM-4.6V's) checkpoints and transformers' outputs on them, which
tests/models/glm4v_test.cpp compares with.

Each checkpoint is saved by save_pretrained (config.json with text_config and vision_config,
model.safetensors under transformers 5's names: `model.visual.*`, `model.language_model.*`,
`lm_head.weight`; the MoE's experts one tensor each, as the Hub has them); the script reloads the
directory with from_pretrained and checks that it reproduces the logits.
Text models: 2 layers, hidden 64, 4 query and 2 KV heads of 16, half of each head rotated
(partial_rotary_factor 0.5: 8 dims), M-RoPE sections [2, 1, 1]; glm4v: GLM-4's four norms per layer
and q/k/v biases; glm4v_moe: a dense first layer, then 8 experts of 32 in 2 groups (top 2, 1 group),
a shared expert, a sigmoid router with a selection bias, routed_scaling_factor 2.
Towers: 2 blocks of width 32 (2 heads of 16), patches of 4x4 pixels over 2 frames, merge 2,
image_size 16 (a 4 x 4 grid of learned position embeddings, bicubically resampled to each image),
a gated block MLP of out_hidden_size 64, a merger MLP of 48; glm4v with attention_bias.
Vocabulary: 256 byte pieces, then GLM's special tokens (<|begin_of_image|> 266, <|end_of_image|> 267,
<|image|> 270, ...; the head's rows of the specials are zeroed, so greedy tokens stay bytes).

Images: random RGB bytes of 28x42, 90x30 and 6x10 pixels (height x width), preprocessed by
transformers' Glm4vImageProcessorPil with this fixture's preprocessor_config.json (size
{shortest_edge 128, longest_edge 3072}, factor 8): 32x40 (rounded), 64x16 (shrunk to the budget)
and 8x16 (scaled up first: its 6-pixel side is below the factor).

expected.json:
  - `generator`, `image_token`, `image_start`, `image_end`, `patch_size`, `merge`, `temporal_patch`;
  - `images`: per image `source_hw`, `grid_thw` [1, h, w] (patches), `pixel_values` [h * w, 96]
    (glm4v only) and `features` [(h / 2) * (w / 2), 64] (get_image_features' pooler_output);
  - `cases`: `prompt` token ids (each image as <|begin_of_image|>, <|image|> x tokens,
    <|end_of_image|>, with text around), `images`, `logits` at every position (ids 0..N_LOGITS-1),
    `prompt_logprobs` (each prompt token's log-softmax under the logits before it, from token 1),
    with mm_token_type_ids marking the <|image|> tokens so that get_rope_index's M-RoPE positions
    apply, `position_ids` [3][len] and `rope_delta`, and `greedy`: N_GREEDY tokens, each the argmax
    of a whole forward over the prompt and the tokens before it.
  - `chats` (glm4v): OpenAI-style messages (a system message, a user turn of text and images),
    the prompt ids of the fixture's tokenizer and chat template with each <|image|> expanded
    (Glm4vProcessor.replace_image_token), N_CHAT_GREEDY greedy tokens and their logprobs.
image{k}.png is image k's bytes. glm4v also carries tokenizer.json (byte-level, no merges, GLM's
special tokens) and chat_template.jinja (GLM-4.1V's prompt format, written after the Hub model's
template: see TEMPLATE); tests/server/test_openai_glm4v.py sends the chats to `brigade serve`.

Run: python3 scripts/make_glm4v_fixtures.py (re-runs itself inside .brigade/fixtures-venv).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, randomize  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402
from make_pixtral_fixtures import bytes_to_unicode  # noqa: E402

# GLM's special tokens after the 256 byte pieces of the tokenizer (ids 256..271).
SPECIALS = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
            "<|assistant|>", "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>",
            "<|end_of_video|>", "<|image|>", "<|video|>"]
ID = {t: 256 + i for i, t in enumerate(SPECIALS)}
IMAGE_START, IMAGE_END, IMAGE = ID["<|begin_of_image|>"], ID["<|end_of_image|>"], ID["<|image|>"]
VIDEO_START, VIDEO_END, VIDEO = ID["<|begin_of_video|>"], ID["<|end_of_video|>"], ID["<|video|>"]
VOCAB = 256 + len(SPECIALS)
EOS = [ID["<|endoftext|>"], ID["<|user|>"], ID["<|observation|>"]]  # GLM-4.1V's generation_config
N_CHAT_GREEDY = 6
# GLM-4.1V's prompt format ([gMASK]<sop>, <|system|> / <|user|> / <|assistant|> turns, each image
# part as <|begin_of_image|><|image|><|end_of_image|>), written after the Hub model's template
# (whose file is not available here).
TEMPLATE = """[gMASK]<sop>
{%- for msg in messages %}
    {%- if msg.role == 'system' %}
<|system|>
{{ msg.content }}
    {%- elif msg.role == 'user' %}
<|user|>{{ '\\n' }}
        {%- if msg.content is string %}
{{- msg.content }}
        {%- else %}
            {%- for item in msg.content %}
                {%- if item.type == 'image' or item.type == 'image_url' %}
{{- '<|begin_of_image|><|image|><|end_of_image|>' }}
                {%- elif item.type == 'text' %}
{{- item.text }}
                {%- endif %}
            {%- endfor %}
        {%- endif %}
    {%- elif msg.role == 'assistant' %}
<|assistant|>
{{ msg.content }}
    {%- endif %}
{%- endfor %}
{% if add_generation_prompt %}<|assistant|>
{% endif %}"""
# OpenAI chats: a system message and a user turn of text and images (indices of the fixture's images).
CHATS = [("Be brief.", ["What is it?", 0]), ("Be brief.", ["Compare", 2, "with", 1, "."])]
PATCH, MERGE, TEMPORAL = 4, 2, 2
SOURCES = [(28, 42), (90, 30), (6, 10)]  # (height, width) of the random images, pixels
N_GREEDY = 4
N_LOGITS = 64

PROCESSOR = {
    "image_processor_type": "Glm4vImageProcessor", "processor_class": "Glm4vProcessor", "do_resize": True,
    "resample": 3, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    "do_convert_rgb": True, "patch_size": PATCH, "temporal_patch_size": TEMPORAL, "merge_size": MERGE,
    "size": {"shortest_edge": 128, "longest_edge": 3072},
}

TEXT = {
    "vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "hidden_act": "silu", "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                              "partial_rotary_factor": 0.5, "mrope_section": [2, 1, 1]},
    "pad_token_id": ID["<|endoftext|>"], "eos_token_id": EOS, "attention_dropout": 0.0,
}
VISION = {
    "depth": 2, "hidden_size": 32, "num_heads": 2, "intermediate_size": 48, "out_hidden_size": 32,
    "patch_size": PATCH, "temporal_patch_size": TEMPORAL, "spatial_merge_size": MERGE, "image_size": 16,
    "in_channels": 3, "hidden_act": "silu", "rms_norm_eps": 1e-5,
}
TOKENS = {"image_token_id": IMAGE, "image_start_token_id": IMAGE_START, "image_end_token_id": IMAGE_END,
          "video_token_id": VIDEO, "video_start_token_id": VIDEO_START, "video_end_token_id": VIDEO_END}

FAMILIES = {
    "glm4v": dict(seed=4141, model_cls="Glm4vForConditionalGeneration", config={
        "architectures": ["Glm4vForConditionalGeneration"], "model_type": "glm4v", "tie_word_embeddings": False,
        **TOKENS, "text_config": {"model_type": "glm4v_text", **TEXT},
        "vision_config": {"model_type": "glm4v_vision", **VISION, "attention_bias": True}}),
    "glm4v_moe": dict(seed=4545, model_cls="Glm4vMoeForConditionalGeneration", config={
        "architectures": ["Glm4vMoeForConditionalGeneration"], "model_type": "glm4v_moe", "tie_word_embeddings": False,
        **TOKENS, "text_config": {"model_type": "glm4v_moe_text", **TEXT, "attention_bias": True,
                                  "moe_intermediate_size": 16, "n_routed_experts": 8, "num_experts_per_tok": 2,
                                  "n_shared_experts": 1, "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1,
                                  "norm_topk_prob": True, "routed_scaling_factor": 2.0},
        "vision_config": {"model_type": "glm4v_moe_vision", **VISION, "attention_bias": False}}),
}


def rounded(rows, digits=7):
    return [[float(f"{v:.{digits}g}") for v in row] for row in rows]


def random_images():
    import numpy as np
    rng = np.random.default_rng(4141)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SOURCES]


def preprocess(images_u8):
    """Each image's pixel_values [h * w, 96] and grid_thw by transformers' Glm4vImageProcessorPil."""
    import torch
    from PIL import Image
    from transformers.models.glm4v.image_processing_pil_glm4v import Glm4vImageProcessorPil
    kw = {k: v for k, v in PROCESSOR.items() if k not in ("image_processor_type", "processor_class")}
    proc = Glm4vImageProcessorPil(**kw)
    out = []
    for img in images_u8:
        p = proc(images=Image.fromarray(img, "RGB"), return_tensors="np")
        out.append((torch.from_numpy(p["pixel_values"]).to(torch.float32), torch.tensor(p["image_grid_thw"])))
    return out


def rope_inputs(prompt):
    import torch
    ids = torch.tensor([prompt])
    return ids, (ids == IMAGE).to(torch.int32)


def run_case(model, pixels, before, which, between, after):
    """A prompt with images `which` (each <|begin_of_image|>, its <|image|> tokens,
    <|end_of_image|>) between text pieces; logits, M-RoPE positions and greedy tokens."""
    import torch
    prompt = list(before)
    for k, i in enumerate(which):
        n = int(pixels[i][1].prod()) // (MERGE * MERGE)
        prompt += [IMAGE_START] + [IMAGE] * n + [IMAGE_END] + (between[k] if k < len(between) else [])
    prompt += after
    pv = torch.cat([pixels[i][0] for i in which])
    thw = torch.cat([pixels[i][1] for i in which])
    ids, types = rope_inputs(prompt)
    with torch.no_grad():
        logits = model(input_ids=ids, pixel_values=pv, image_grid_thw=thw, mm_token_type_ids=types).logits[0]
        pos, delta = model.model.get_rope_index(ids, mm_token_type_ids=types, image_grid_thw=thw)
        greedy, seq = [int(logits[-1].argmax())], list(prompt)
        while len(greedy) < N_GREEDY:  # whole forwards: no cache, positions recomputed each time
            seq.append(greedy[-1])
            i2, t2 = rope_inputs(seq)
            model.model.rope_deltas = None
            out = model(input_ids=i2, pixel_values=pv, image_grid_thw=thw, mm_token_type_ids=t2).logits[0]
            greedy.append(int(out[-1].argmax()))
        assert not any(t >= 256 for t in greedy), greedy
    lp = torch.log_softmax(logits.double(), -1)
    prompt_logprobs = [float(lp[q - 1, prompt[q]]) for q in range(1, len(prompt))]
    return {"prompt": prompt, "images": which, "logits": rounded(logits[:, :N_LOGITS].tolist()),
            "prompt_logprobs": prompt_logprobs,
            "position_ids": pos[:, 0].tolist(), "rope_delta": int(delta[0, 0]), "greedy": greedy}


def build(name, fam, out_dir):
    import torch
    import transformers
    (out_dir / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2) + "\n")
    cfg_cls = getattr(transformers, fam["model_cls"].replace("ForConditionalGeneration", "Config"))
    config = cfg_cls(**{k: v for k, v in fam["config"].items() if k not in ("architectures", "model_type")})
    config.architectures = fam["config"]["architectures"]
    for c in (config, config.text_config, config.vision_config):
        c._attn_implementation = "eager"
    torch.manual_seed(fam["seed"])
    model = getattr(transformers, fam["model_cls"])(config).to(torch.float32).eval()
    randomize(model, fam["seed"])
    g = torch.Generator().manual_seed(fam["seed"] + 1)
    with torch.no_grad():  # convolutions' fan-in is not randomize()'s last dimension; a nonzero selection bias
        for conv in (model.model.visual.patch_embed.proj, model.model.visual.downsample):
            conv.weight.copy_(torch.randn(conv.weight.shape, generator=g) * conv.weight[0].numel() ** -0.5)
        # The head never predicts the image ids (as a trained model): their rows zero, logits 0,
        # so the greedy tokens stay text.
        model.lm_head.weight[256:] = 0.0
        for mod in model.modules():
            if hasattr(mod, "e_score_correction_bias"):
                mod.e_score_correction_bias.copy_(torch.randn(mod.e_score_correction_bias.shape, generator=g) * 0.1)
    model.save_pretrained(out_dir, safe_serialization=True)
    return model


def write_tokenizer(out_dir):
    """tokenizer.json (byte-level BPE: the 256 bytes, no merges, then SPECIALS), tokenizer_config.json
    and chat_template.jinja."""
    vocab = {ch: b for b, ch in sorted(bytes_to_unicode().items())}
    vocab.update(ID)
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for t, i in ID.items()]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": []}}
    (out_dir / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False) + "\n")
    config = {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "model_max_length": 512,
              "tokenizer_class": "PreTrainedTokenizerFast", "do_lower_case": False}
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out_dir / "chat_template.jinja").write_text(TEMPLATE)


def run_chat(model, out_dir, pixels, system, parts):
    """A chat's prompt as the template and tokenizer write it with each <|image|> expanded to the
    image's tokens (Glm4vProcessor.replace_image_token; the processor itself needs torchvision),
    and N_CHAT_GREEDY greedy tokens with their logprobs (whole forwards)."""
    import torch
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(out_dir)
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image"} for p in parts]
    messages = [{"role": "system", "content": system}, {"role": "user", "content": content}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, chat_template=TEMPLATE)
    which = [p for p in parts if not isinstance(p, str)]
    pieces = text.split("<|image|>")
    assert len(pieces) == len(which) + 1, text
    expanded = "".join(piece + ("<|image|>" * (int(pixels[which[k]][1].prod()) // (MERGE * MERGE))
                                if k < len(which) else "") for k, piece in enumerate(pieces))
    prompt = tok(expanded, add_special_tokens=False)["input_ids"]
    pv = torch.cat([pixels[i][0] for i in which])
    thw = torch.cat([pixels[i][1] for i in which])
    seq, greedy, logprobs = list(prompt), [], []
    with torch.no_grad():
        while len(greedy) < N_CHAT_GREEDY:
            ids, types = rope_inputs(seq)
            model.model.rope_deltas = None
            row = model(input_ids=ids, pixel_values=pv, image_grid_thw=thw, mm_token_type_ids=types).logits[0, -1]
            t = int(row.argmax())
            greedy.append(t)
            logprobs.append(float(torch.log_softmax(row.double(), -1)[t]))
            seq.append(t)
    return {"system": system, "parts": parts, "prompt": prompt, "greedy": greedy, "logprobs": logprobs}


def features(model, pixels):
    import torch
    with torch.no_grad():
        each = [model.model.get_image_features(pv, thw).pooler_output[0] for pv, thw in pixels]
        together = model.model.get_image_features(torch.cat([p[0] for p in pixels]),
                                                  torch.cat([p[1] for p in pixels])).pooler_output
    for a, b in zip(each, together):
        assert torch.allclose(a, b, atol=1e-5), "an image's features do not depend on the others in the call"
    return each


def make(name, fam, images, pixels):
    import torch
    import transformers
    out_dir = OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build(name, fam, out_dir)
    feats = features(model, pixels)
    cases = [run_case(model, pixels, [1, 5, 7], [0, 2], [[9, 11]], [3, 4]),
             run_case(model, pixels, [1, 30], [1], [], [20, 21, 22, 40])]
    chats = []
    if name == "glm4v":
        write_tokenizer(out_dir)
        chats = [run_chat(model, out_dir, pixels, system, parts) for system, parts in CHATS]
    reloaded = getattr(transformers, fam["model_cls"]).from_pretrained(out_dir, dtype=torch.float32,
                                                                       attn_implementation="eager").eval()
    check = run_case(reloaded, pixels, [1, 30], [1], [], [20, 21, 22, 40])
    diff = (torch.tensor(check["logits"]) - torch.tensor(cases[1]["logits"])).abs().max()
    assert diff < 1e-4 and check["greedy"] == cases[1]["greedy"], f"the saved checkpoint reproduces the logits: {diff}"
    expected = {
        "generator": f"scripts/make_glm4v_fixtures.py (transformers {transformers.__version__})",
        "image_token": IMAGE, "image_start": IMAGE_START, "image_end": IMAGE_END, "patch_size": PATCH,
        "merge": MERGE, "temporal_patch": TEMPORAL,
        "images": [dict(source_hw=list(src), grid_thw=thw[0].tolist(), features=rounded(f.tolist()),
                        **({"pixel_values": rounded(pv.tolist())} if name == "glm4v" else {}))
                   for src, (pv, thw), f in zip(SOURCES, pixels, feats)],
        "cases": cases,
        **({"chats": chats} if chats else {}),
    }
    (out_dir / "expected.json").write_text(json.dumps(expected) + "\n")
    if name == "glm4v":
        from PIL import Image
        for k, img in enumerate(images):
            Image.fromarray(img, "RGB").save(out_dir / f"image{k}.png")
    print(f"wrote {out_dir}: grids {[p[1][0].tolist() for p in pixels]}")


def main():
    ensure_venv(__file__)
    ensure_pillow()
    images = random_images()
    pixels = preprocess(images)
    for name in sys.argv[1:] or FAMILIES:
        make(name, FAMILIES[name], images, pixels)


if __name__ == "__main__":
    main()
