#!/usr/bin/env python3
"""Writes tests/fixtures/mistral3_vision/: a tiny random Mistral3ForConditionalGeneration (Mistral
Small 3.1 / 3.2's architecture: a Pixtral vision tower, Mistral3MultiModalProjector, a Mistral
language model) and transformers' outputs on it, which tests/models/pixtral_vision_test.cpp (the
tower and projector, the image processor) compares with.

The checkpoint is the Hub's form at tiny size: config.json as mistralai/Mistral-Small-3.1-24B-
Instruct-2503's (text_config and vision_config objects, image_token_index, spatial_merge_size,
projector fields at the top level), model.safetensors under the Hub's names (`vision_tower.*`,
`multi_modal_projector.*`, `language_model.model.*`, `language_model.lm_head.weight`); the script
reloads the directory with from_pretrained and checks that it reproduces the features.
Text model: 2 layers, hidden 48, 2 query heads and 1 KV head of 16, vocab 276: the tokenizer
below ([IMG] 10, [IMG_BREAK] 12, [IMG_END] 13 as in tekken). Tower: 2 blocks of width 32 (2 heads of 16), gated SiLU MLP of 48,
patches of 4x4 pixels, spatial_merge_size 2 (a token is 8x8 pixels), the processor's longest edge
48 pixels.

Images: random RGB bytes of 28x42, 16x8 and 90x30 pixels (height x width). PixtralImageProcessorPil
(patch_size 8 = patch * merge, as PixtralProcessor passes it) resizes them to 32x48 (rounded up
to whole tokens), 16x8 (as they are) and 48x16 (fit within 48, then rounded up).

expected.json:
  - `generator`, `patch_size`, `merge`, `image_token`, `image_break`, `image_end`, `longest_edge`;
  - `images`: per image `source_hw` (the bytes' size), `image_sizes` [h, w] (the processor's size
    after resizing, pixels), `pixel_values` [3, h, w] (the processor's, padding cut off) and
    `features` [(h / 8) * (w / 8), 48] (get_image_features' pooler_output for that image alone:
    what replaces its [IMG] tokens), and `tokens`: the ids mistral-common's ImageEncoder writes
    for it (the [IMG] / [IMG_BREAK] / [IMG_END] layout PixtralProcessor writes too);
  - `cases`: `prompt` token ids (text around the images' layouts), `images` (which, in order),
    `logits` at every position of Mistral3ForConditionalGeneration's forward with those images
    (ids 0..N_LOGITS-1 of each row),
    `greedy` (4 tokens of generate()).
get_image_features of all images in one call (padded to the largest) is checked here to equal
the single images' (the block-diagonal attention keeps them apart).
image{k}.png is image k's bytes: the processor's input.

The tokenizer (tokenizer.json, tokenizer_config.json): the Hub's Mistral 3 files in form, at tiny
size: the first 20 special tokens at the ids Mistral Small 3.1's tokenizer.json gives them (<unk>,
<s>, </s>, [INST], [/INST], ..., [IMG] 10, <pad>, [IMG_BREAK] 12, [IMG_END] 13, ...,
[SYSTEM_PROMPT] 17, [/SYSTEM_PROMPT] 18), then the 256 byte-level pieces and no merges (one token
a byte), and the real chat template of mistralai/Mistral-Small-3.2-24B-Instruct-2506 (llama.cpp's
copy, models/templates). `chats` in expected.json: OpenAI-style messages with image parts (which
fixture images, in order), the prompt ids transformers' apply_chat_template and tokenizer make
with each `[IMG]` the template writes replaced by that image's layout (PixtralProcessor's
replace_image_token, as mistral-common writes it: `tokens` above), and `greedy`: N_CHAT_GREEDY
tokens of generate() on them (no stop at </s>) with `logprobs`, each one's log-softmax. tests/server/test_openai_pixtral.py sends the same
chats to `brigade serve`.

Run: python3 scripts/make_pixtral_fixtures.py (re-runs itself inside .brigade/fixtures-venv, as
scripts/make_fixtures.py does). CI never runs it: the fixture is committed (about 300 KiB).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import OUT, ensure_venv, randomize  # noqa: E402
from make_image_fixtures import ensure_pillow  # noqa: E402

NAME = "mistral3_vision"
SEED = 3131
IMAGE, IMAGE_BREAK, IMAGE_END = 10, 12, 13
PATCH, MERGE, LONGEST = 4, 2, 48
SOURCES = [(28, 42), (16, 8), (90, 30)]  # (height, width) of the random images, pixels
N_GREEDY = 4
N_CHAT_GREEDY = 6
N_LOGITS = 64  # the ids whose logits `cases` keep (a wrong hidden state moves them all; whole rows quadruple the file)
SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
            "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
            "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]"]
VOCAB = len(SPECIALS) + 256
TEMPLATE = (Path(__file__).resolve().parent.parent / ".brigade" / "llamacpp-src" / "llama_cpp_python-0.3.36" / "vendor" /
            "llama.cpp" / "models" / "templates" / "Mistral-Small-3.2-24B-Instruct-2506.jinja")
# OpenAI chats: a system message (the template's default one is long and dated) and a user turn
# of text and images (indices of the fixture's images).
CHATS = [("Be brief.", ["What is it?", 0]), ("Be brief.", ["Compare", 2, "with", 1, "."])]

CONFIG = {
    "architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3", "dtype": "float32",
    "image_token_index": IMAGE, "multimodal_projector_bias": False, "projector_hidden_act": "gelu",
    "spatial_merge_size": MERGE, "vision_feature_layer": -1, "tie_word_embeddings": False,
    "text_config": {
        "model_type": "mistral", "vocab_size": VOCAB, "hidden_size": 48, "intermediate_size": 64,
        "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
        "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 1e9, "sliding_window": None,
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "hidden_act": "silu", "tie_word_embeddings": False,
    },
    "vision_config": {
        "model_type": "pixtral", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
        "num_attention_heads": 2, "head_dim": 16, "image_size": LONGEST, "patch_size": PATCH, "num_channels": 3,
        "hidden_act": "silu", "rope_theta": 10000.0,
    },
}

PROCESSOR = {
    "image_processor_type": "PixtralImageProcessor", "do_resize": True, "resample": 3, "do_rescale": True,
    "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711], "do_convert_rgb": True,
    "patch_size": {"height": PATCH, "width": PATCH}, "size": {"longest_edge": LONGEST},
}


def rounded(rows, digits=7):
    return [[float(f"{v:.{digits}g}") for v in row] for row in rows]


def hub_name(key):
    """transformers 5's state-dict name -> the Hub checkpoints' name."""
    for old, new in (("model.vision_tower.", "vision_tower."), ("model.multi_modal_projector.", "multi_modal_projector."),
                     ("model.language_model.", "language_model.model."), ("lm_head.", "language_model.lm_head.")):
        if key.startswith(old):
            return new + key[len(old):]
    return key


def random_images():
    import numpy as np
    rng = np.random.default_rng(SEED)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in SOURCES]


def preprocess(images_u8):
    """Each image's pixel_values [3, h, w] by transformers' PixtralImageProcessorPil, padding cut off."""
    import torch
    from PIL import Image
    from transformers.models.pixtral.image_processing_pil_pixtral import PixtralImageProcessorPil
    kw = {k: v for k, v in PROCESSOR.items() if k != "image_processor_type"}
    proc = PixtralImageProcessorPil(**kw)
    out = []
    for img in images_u8:
        p = proc(images=Image.fromarray(img, "RGB"), patch_size={"height": PATCH * MERGE, "width": PATCH * MERGE},
                 return_tensors="np")
        h, w = (int(x) for x in p["image_sizes"][0])
        out.append(torch.from_numpy(p["pixel_values"][0, :, :h, :w]).to(torch.float32).contiguous())
    return out


def processor_tokens(images_u8, pixels):
    """The ids mistral-common's ImageEncoder (image_patch_size 4, spatial_merge_size 2,
    max_image_size 48, [IMG] / [IMG_BREAK] / [IMG_END] at tekken's ids) writes for each image:
    the layout transformers' PixtralProcessor.replace_image_token also writes (that processor
    insists on torchvision, which the fixtures venv lacks). Its processed size is checked to be
    transformers'."""
    import numpy as np
    import mistral_common.tokens.tokenizers.image as mc_image
    from mistral_common.protocol.instruct.chunk import ImageChunk
    from mistral_common.tokens.tokenizers.image import ImageConfig, ImageEncoder, SpecialImageIDs
    from PIL import Image
    # Its pixel transform needs OpenCV (not in the venv); only the tokens and the size are used.
    mc_image.transform_image = lambda image, size: np.zeros((3, size[1], size[0]), dtype=np.float32)
    encoder = ImageEncoder(ImageConfig(image_patch_size=PATCH, max_image_size=LONGEST, spatial_merge_size=MERGE),
                           SpecialImageIDs(img=IMAGE, img_break=IMAGE_BREAK, img_end=IMAGE_END))
    out = []
    for img, pv in zip(images_u8, pixels):
        enc = encoder(ImageChunk(image=Image.fromarray(img, "RGB")))
        assert tuple(enc.image.shape[1:]) == tuple(pv.shape[1:]), (enc.image.shape, pv.shape)
        out.append([int(t) for t in enc.tokens])
    return out


def batch(chosen):
    """Images' pixel_values padded to the largest in one tensor, and their image_sizes."""
    import torch
    import torch.nn.functional as F
    hmax, wmax = max(p.shape[1] for p in chosen), max(p.shape[2] for p in chosen)
    pv = torch.stack([F.pad(p, (0, wmax - p.shape[2], 0, hmax - p.shape[1])) for p in chosen])
    return pv, torch.tensor([list(p.shape[1:]) for p in chosen])


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (the ByteLevel pre-tokenizer's)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def write_byte_tokenizer(out_dir, specials, template):
    """tokenizer.json (byte-level BPE over `specials` + 256 bytes, no merges) and
    tokenizer_config.json with the chat template `template` (<s>, </s>, <unk>, <pad> named)."""
    vocab = {t: i for i, t in enumerate(specials)}
    for b, ch in sorted(bytes_to_unicode().items()):
        vocab[ch] = len(specials) + b
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(specials)]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": []}}
    (out_dir / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False) + "\n")
    config = {"add_bos_token": False, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
              "unk_token": "<unk>", "pad_token": "<pad>", "model_max_length": 512,
              "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": template}
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def write_tokenizer(out_dir):
    """The byte-level tokenizer with Mistral's specials and the real Mistral Small 3.2 chat template."""
    write_byte_tokenizer(out_dir, SPECIALS, TEMPLATE.read_text())


def run_chat(model, out_dir, pixels, tokens, system, parts):
    """A chat's prompt as the real template and tokenizer write it, each [IMG] expanded to its
    image's layout, and N_CHAT_GREEDY greedy tokens of generate() on it."""
    import torch
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(out_dir)
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image_url", "image_url": {"url": ""}}
               for p in parts]
    messages = [{"role": "system", "content": system}, {"role": "user", "content": content}]
    text = tok.apply_chat_template(messages, tokenize=False)
    which = [p for p in parts if not isinstance(p, str)]
    pieces = text.split("[IMG]")
    assert len(pieces) == len(which) + 1, text
    prompt = []
    for k, piece in enumerate(pieces):
        prompt += tok(piece, add_special_tokens=False)["input_ids"]
        if k < len(which):
            prompt += tokens[which[k]]
    expanded = "".join(piece + ("".join(tok.convert_ids_to_tokens(tokens[which[k]])) if k < len(which) else "")
                       for k, piece in enumerate(pieces))
    whole = tok(expanded, add_special_tokens=False)["input_ids"]
    assert whole == prompt, "the expanded text tokenizes to the layout's ids (replace_image_token's text)"
    pv, sizes = batch([pixels[i] for i in which])
    ids = torch.tensor([prompt])
    with torch.no_grad():
        gen = model.generate(ids, pixel_values=pv, image_sizes=sizes, attention_mask=torch.ones_like(ids),
                             do_sample=False, max_new_tokens=N_CHAT_GREEDY, min_new_tokens=N_CHAT_GREEDY,
                             pad_token_id=0, eos_token_id=None, output_logits=True, return_dict_in_generate=True)
    greedy = gen.sequences[0, len(prompt):].tolist()
    logprobs = [float(torch.log_softmax(step[0].double(), -1)[t]) for step, t in zip(gen.logits, greedy)]
    return {"system": system, "parts": parts, "prompt": prompt, "greedy": greedy, "logprobs": logprobs}


def run_case(model, pixels, tokens, before, which, between, after):
    """A prompt of text ids with images `which` (each as its token layout) between the pieces:
    `before`, image which[0], between[0], ..., `after`; transformers' logits at every position and
    N_GREEDY greedy tokens."""
    import torch
    prompt = list(before)
    for k, i in enumerate(which):
        prompt += tokens[i] + (between[k] if k < len(between) else [])
    prompt += after
    pv, sizes = batch([pixels[i] for i in which])
    ids = torch.tensor([prompt])
    with torch.no_grad():
        logits = model(input_ids=ids, pixel_values=pv, image_sizes=sizes).logits[0]
        gen = model.generate(ids, pixel_values=pv, image_sizes=sizes, attention_mask=torch.ones_like(ids),
                             do_sample=False, max_new_tokens=N_GREEDY, min_new_tokens=N_GREEDY, pad_token_id=0,
                             eos_token_id=None)
    greedy = gen[0, len(prompt):].tolist()
    assert greedy[0] == int(logits[-1].argmax()), "generate's first token is the prefill's argmax"
    return {"prompt": prompt, "images": which, "logits": rounded(logits[:, :N_LOGITS].tolist()), "greedy": greedy}


def build(out_dir):
    import torch
    import transformers
    from safetensors.torch import save_file
    (out_dir / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    (out_dir / "preprocessor_config.json").write_text(json.dumps(PROCESSOR, indent=2) + "\n")
    write_tokenizer(out_dir)
    config = transformers.AutoConfig.from_pretrained(out_dir)
    for c in (config, config.text_config, config.vision_config):
        c._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = transformers.Mistral3ForConditionalGeneration(config).to(torch.float32).eval()
    randomize(model, SEED)
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():  # the convolution's fan-in is 3 * 4 * 4, not randomize()'s last dimension
        w = model.model.vision_tower.patch_conv.weight
        w.copy_(torch.randn(w.shape, generator=g) * w[0].numel() ** -0.5)
    state = {hub_name(k): v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return model


def features(model, pixels):
    """get_image_features' pooler_output for each image alone, checked against one padded batch."""
    import torch
    with torch.no_grad():
        each = [model.model.get_image_features(pv[None], torch.tensor([list(pv.shape[1:])])).pooler_output[0]
                for pv in pixels]
        padded, sizes = batch(pixels)
        together = model.model.get_image_features(padded, sizes).pooler_output
    for a, b in zip(each, together):
        assert torch.allclose(a, b, atol=1e-5), "an image's features do not depend on the others in the call"
    return each


def main():
    ensure_venv(__file__)
    ensure_pillow()
    import torch
    import transformers
    from PIL import Image
    out_dir = OUT / NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build(out_dir)
    images = random_images()
    for k, img in enumerate(images):
        Image.fromarray(img, "RGB").save(out_dir / f"image{k}.png")
    pixels = preprocess(images)
    feats = features(model, pixels)
    tokens = processor_tokens(images, pixels)
    # Text ids avoid the image ids 10, 12, 13.
    cases = [run_case(model, pixels, tokens, [1, 5, 7], [1, 2], [[9, 11]], [3, 4]),
             run_case(model, pixels, tokens, [1, 30], [0], [], [20, 21, 22, 40])]
    chats = [run_chat(model, out_dir, pixels, tokens, system, parts) for system, parts in CHATS]
    reloaded = transformers.Mistral3ForConditionalGeneration.from_pretrained(out_dir, dtype=torch.float32).eval()
    for a, b in zip(feats, features(reloaded, pixels)):
        assert torch.allclose(a, b, atol=1e-5), f"the saved checkpoint reproduces the features: {(a - b).abs().max()}"
    expected = {
        "generator": f"scripts/make_pixtral_fixtures.py (transformers {transformers.__version__})",
        "patch_size": PATCH, "merge": MERGE, "image_token": IMAGE, "image_break": IMAGE_BREAK,
        "image_end": IMAGE_END, "longest_edge": LONGEST,
        "images": [{
            "source_hw": list(src), "image_sizes": list(pv.shape[1:]),
            "pixel_values": [rounded(ch.tolist(), 9) for ch in pv], "features": rounded(f.tolist()),
            "tokens": t,
        } for src, pv, f, t in zip(SOURCES, pixels, feats, tokens)],
        "cases": cases,
        "chats": chats,
    }
    (out_dir / "expected.json").write_text(json.dumps(expected) + "\n")
    print(f"wrote {out_dir}: images {[list(p.shape[1:]) for p in pixels]}, "
          f"tokens {[f.shape[0] for f in feats]}")


if __name__ == "__main__":
    main()
