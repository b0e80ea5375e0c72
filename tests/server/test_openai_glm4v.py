"""GLM-4.1V's images through the real `openai` Python client: chat messages with image_url parts
(data: URLs) to `brigade serve` on tests/fixtures/glm4v (a tiny random
Glm4vForConditionalGeneration: the GLM tower, GLM-4's layers with M-RoPE, a byte-level tokenizer
with GLM's special tokens and a chat template in GLM-4.1V's prompt format), written by
scripts/make_glm4v_fixtures.py. Against transformers: the prompt's ids equal the ones the
template and tokenizer make with each <|image|> expanded to the image's tokens
(Glm4vProcessor.replace_image_token), and the greedy tokens and their logprobs equal
transformers', whole and with steps of 8 tokens that cut the images. Another image moves them;
streaming; images the server cannot take and video parts are 400s.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary
(fixture_server.py).
"""
import base64
import os

import openai
import pytest

from fixture_server import expected, fixtures, image_data_url, whole_and_in_steps_client

FIXTURE = fixtures("glm4v")
MODEL = os.path.basename(FIXTURE)
EXPECTED = expected(FIXTURE)


client = whole_and_in_steps_client(FIXTURE)


def data_url(k):
    return image_data_url(FIXTURE, k)


def messages(chat, images=None):
    """The chat of expected.json as OpenAI messages; `images` replaces its image indices."""
    images = iter(images) if images is not None else None
    content = [{"type": "text", "text": p} if isinstance(p, str)
               else {"type": "image_url", "image_url": {"url": data_url(next(images) if images else p)}}
               for p in chat["parts"]]
    return [{"role": "system", "content": chat["system"]}, {"role": "user", "content": content}]


def ask(client, chat, images=None, **kw):
    return client.chat.completions.create(model=MODEL, messages=messages(chat, images),
                                          max_tokens=len(chat["greedy"]), temperature=0, logprobs=True,
                                          extra_body={"ignore_eos": True, "return_token_ids": True}, **kw)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    out = ask(client, chat)
    assert out.model_extra["prompt_token_ids"] == chat["prompt"]
    assert out.usage.prompt_tokens == len(chat["prompt"])
    assert out.choices[0].model_extra["token_ids"] == chat["greedy"]
    assert out.choices[0].finish_reason == "length"
    got = [c.logprob for c in out.choices[0].logprobs.content]
    assert max(abs(a - b) for a, b in zip(got, chat["logprobs"])) < 1e-3, (got, chat["logprobs"])


def test_another_image_moves_the_logprobs(client):
    chat = EXPECTED["chats"][0]
    out = ask(client, chat, images=[1])  # image 1 (16 tokens) where image 0 (20) was
    assert out.usage.prompt_tokens == len(chat["prompt"]) - 4
    got = [c.logprob for c in out.choices[0].logprobs.content]
    assert out.choices[0].model_extra["token_ids"] != chat["greedy"] or \
        max(abs(a - b) for a, b in zip(got, chat["logprobs"])) > 1e-2


def test_streaming_with_an_image(client):
    chat = EXPECTED["chats"][0]
    chunks = list(ask(client, chat, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == len(chat["greedy"])
    assert [t for c in chunks if c.choices for t in c.choices[0].model_extra["token_ids"]] == chat["greedy"]


def test_bad_images_and_video_are_400s(client):
    chat = EXPECTED["chats"][0]
    bad = messages(chat)
    bad[1]["content"][1]["image_url"]["url"] = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n cut").decode()
    with pytest.raises(openai.BadRequestError, match="image 1 of the messages"):
        client.chat.completions.create(model=MODEL, messages=bad, max_tokens=1)
    video = messages(chat)
    video[1]["content"][1] = {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}}
    with pytest.raises(openai.BadRequestError, match="video parts are not supported"):
        client.chat.completions.create(model=MODEL, messages=video, max_tokens=1)
    assert ask(client, chat).usage.prompt_tokens == len(chat["prompt"])
