"""Images through the real `openai` Python client: chat messages with image_url parts (data: URLs,
as the client sends them) to `brigade serve` running a tiny Qwen2.5-VL (tests/fixtures/qwen2_5_vl),
then a tiny Qwen3.5 (tests/fixtures/qwen3_5_vl: a Gated DeltaNet hybrid with Qwen3-VL's tower), each
with a synthetic byte-level tokenizer whose added tokens are Qwen's vision and chat markers and
Qwen2-VL's real chat template. The image reaches the model: the prompt counts its tokens as
Qwen2VLImageProcessor's smart_resize and the <|image_pad|> expansion make them, streaming works,
and an image the server cannot take is a 400 the client raises as BadRequestError.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary.
"""
import base64
import json
import os
import shutil
import subprocess
import tempfile

import openai
import pytest

from fixture_server import BIN, ROOT, serve, stop
from vision_client import BROKEN_PNG, image_part

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
MODEL = "qwen-vl"


def make_model(tmp, fixture):
    """The fixture's checkpoint and processor beside make-model's synthetic tokenizer of 300 ids,
    with Qwen's markers added as special tokens 300..305 and the chat template; in a folder named
    MODEL (serve() serves it under that name)."""
    scratch = os.path.join(tmp, "scratch")
    subprocess.run([BIN, "make-model", "--arch", "qwen2", "--hidden", "64", "--layers", "1", "--heads", "4",
                    "--kv-heads", "2", "--intermediate", "96", "--vocab", "300", "--max-position", "4096",
                    "--dtype", "f32", "--out", scratch], check=True, stdout=subprocess.DEVNULL)
    model = os.path.join(tmp, fixture, MODEL)
    os.makedirs(model)
    for f in ("config.json", "model.safetensors", "preprocessor_config.json"):
        shutil.copy(os.path.join(FIXTURES, fixture, f), model)
    with open(os.path.join(scratch, "tokenizer.json")) as f:
        tok = json.load(f)
    for i, t in enumerate(["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<|im_start|>",
                           "<|im_end|>"]):
        tok["added_tokens"].append({"id": 300 + i, "content": t, "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": True})
    with open(os.path.join(model, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    with open(os.path.join(scratch, "tokenizer_config.json")) as f:
        config = json.load(f)
    with open(os.path.join(FIXTURES, "qwen2_5_vl", "chat_template.jinja")) as f:
        config["chat_template"] = f.read()  # Qwen2-VL-7B-Instruct's, as the Hub ships it
    with open(os.path.join(model, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)
    return model


@pytest.fixture(scope="module", params=["qwen2_5_vl", "qwen3_5_vl"])
def client(request):
    with tempfile.TemporaryDirectory() as tmp:
        proc, c = serve(make_model(tmp, request.param))
        yield c
        stop(proc)


def data_url(path, mime="image/png"):
    with open(os.path.join(FIXTURES, path), "rb") as f:
        return f"data:{mime};base64," + base64.b64encode(f.read()).decode()


def ask(client, *parts, **kw):
    content = [{"type": "text", "text": "What is it?"}]
    content += [image_part(url) for url in parts]
    return client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                          max_tokens=2, temperature=0, **kw)


def test_an_image_adds_its_grids_tokens(client):
    text_only = ask(client).usage.prompt_tokens
    # 48x32 pixels: kept by smart_resize, 12x8 patches of 4 pixels, 6x4 = 24 tokens, between
    # <|vision_start|> and <|vision_end|>.
    one = ask(client, data_url("qwen2_5_vl/image0.png"))
    assert one.usage.prompt_tokens == text_only + 24 + 2
    assert one.choices[0].finish_reason in ("length", "stop")
    # 160x120 is over max_pixels (16384): resized to 144x104, 18x13 merged blocks = 234 tokens.
    both = ask(client, data_url("qwen2_5_vl/image0.png"), data_url("images/large_160x120.png"))
    assert both.usage.prompt_tokens == text_only + 24 + 2 + 234 + 2
    # A 37x23 JPEG: smart_resize rounds it to 40x24, 5x3 merged blocks = 15 tokens.
    jpeg = ask(client, data_url("images/baseline_37x23.jpg", "image/jpeg"))
    assert jpeg.usage.prompt_tokens == text_only + 15 + 2


def test_streaming_with_an_image(client):
    stream = ask(client, data_url("qwen2_5_vl/image0.png"), stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 2
    assert any(c.choices and c.choices[0].finish_reason for c in chunks)


def test_bad_images_are_400s(client):
    with pytest.raises(openai.BadRequestError, match="fetches no URLs"):
        ask(client, "https://example.com/cat.png")
    with pytest.raises(openai.BadRequestError, match="image 1 of the messages"):
        ask(client, BROKEN_PNG)
    assert ask(client, data_url("qwen2_5_vl/image0.png")).usage.prompt_tokens > 0
