"""Mistral 3's images through the real `openai` Python client: chat messages with image_url parts
(data: URLs, as the client sends them) to `brigade serve` on tests/fixtures/mistral3_vision (a tiny
random Mistral3ForConditionalGeneration: Pixtral tower, Mistral language model, a byte-level
tokenizer with Mistral's special tokens and Mistral Small 3.2's real chat template), written by
scripts/make_pixtral_fixtures.py. Against transformers: the prompt's ids equal the ones the real
template and tokenizer make with each [IMG] expanded to the image's layout (rows of [IMG], each
then [IMG_BREAK], the last [IMG_END]), and the greedy tokens and their logprobs equal generate()'s, whole and with
steps of 8 tokens that cut the images inside rows (the prefix cache then shares the system
prompt between requests). Then streaming, and images the server cannot take are 400s.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary
(fixture_server.py).
"""
import base64
import os

import openai
import pytest

from fixture_server import expected, fixtures, image_data_url, whole_and_in_steps_client

FIXTURE = fixtures("mistral3_vision")
MODEL = os.path.basename(FIXTURE)
EXPECTED = expected(FIXTURE)


client = whole_and_in_steps_client(FIXTURE)


def data_url(k):
    return image_data_url(FIXTURE, k)


def messages(chat):
    """The chat of expected.json as OpenAI messages: text parts and image_url parts."""
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image_url", "image_url": {"url": data_url(p)}}
               for p in chat["parts"]]
    return [{"role": "system", "content": chat["system"]}, {"role": "user", "content": content}]


def ask(client, chat, **kw):
    return client.chat.completions.create(model=MODEL, messages=messages(chat), max_tokens=len(chat["greedy"]),
                                          temperature=0, logprobs=True,
                                          extra_body={"ignore_eos": True, "return_token_ids": True}, **kw)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    out = ask(client, chat)
    assert out.model_extra["prompt_token_ids"] == chat["prompt"]
    assert out.usage.prompt_tokens == len(chat["prompt"])
    assert out.choices[0].model_extra["token_ids"] == chat["greedy"]
    assert out.choices[0].finish_reason == "length"
    # Each token's logprob as transformers' (fp32 both sides; an image flipped left to right moves
    # them by more than 1e-2).
    got = [c.logprob for c in out.choices[0].logprobs.content]
    assert max(abs(a - b) for a, b in zip(got, chat["logprobs"])) < 1e-3, (got, chat["logprobs"])


def test_streaming_with_an_image(client):
    chat = EXPECTED["chats"][0]
    chunks = list(ask(client, chat, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == len(chat["greedy"])
    assert [t for c in chunks if c.choices for t in c.choices[0].model_extra["token_ids"]] == chat["greedy"]


def test_bad_images_are_400s(client):
    chat = EXPECTED["chats"][0]
    bad = messages(chat)
    bad[1]["content"][1]["image_url"]["url"] = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n cut").decode()
    with pytest.raises(openai.BadRequestError, match="image 1 of the messages"):
        client.chat.completions.create(model=MODEL, messages=bad, max_tokens=1)
    with pytest.raises(openai.BadRequestError, match="fetches no URLs"):
        bad[1]["content"][1]["image_url"]["url"] = "https://example.com/cat.png"
        client.chat.completions.create(model=MODEL, messages=bad, max_tokens=1)
    assert ask(client, chat).usage.prompt_tokens == len(chat["prompt"])
