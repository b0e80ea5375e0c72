"""LLaVA's images through the real `openai` Python client: chat messages with image_url parts
(data: URLs, as the client sends them) to `brigade serve` on tests/fixtures/llava (a tiny random
LlavaForConditionalGeneration: CLIP tower read at hidden_states[-2], LlavaMultiModalProjector, a
Llama language model, a byte-level tokenizer with <image> and llava-1.5's chat template), written
by scripts/make_llava_fixtures.py. Against transformers: the prompt's ids equal the ones the
template and tokenizer make with each <image> expanded to the image's 49 tokens (LlavaProcessor),
and the greedy tokens and their logprobs equal generate()'s, whole and with steps of 8 tokens that
cut the images. Another image moves the answer; streaming; images the server cannot take are 400s.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary
(fixture_server.py).
"""
import base64
import os

import openai
import pytest

from fixture_server import expected, fixtures, image_data_url, whole_and_in_steps_client

FIXTURE = fixtures("llava")
MODEL = os.path.basename(FIXTURE)
EXPECTED = expected(FIXTURE)


client = whole_and_in_steps_client(FIXTURE)


def data_url(k):
    return image_data_url(FIXTURE, k)


def messages(parts):
    """OpenAI messages of one user turn: text parts and image_url parts (fixture images)."""
    content = [{"type": "text", "text": p} if isinstance(p, str) else {"type": "image_url", "image_url": {"url": data_url(p)}}
               for p in parts]
    return [{"role": "user", "content": content}]


def ask(client, parts, n_tokens, **kw):
    return client.chat.completions.create(model=MODEL, messages=messages(parts), max_tokens=n_tokens, temperature=0,
                                          logprobs=True, extra_body={"ignore_eos": True, "return_token_ids": True}, **kw)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    out = ask(client, chat["parts"], len(chat["greedy"]))
    assert out.model_extra["prompt_token_ids"] == chat["prompt"]
    assert out.usage.prompt_tokens == len(chat["prompt"])
    assert out.choices[0].model_extra["token_ids"] == chat["greedy"]
    assert out.choices[0].finish_reason == "length"
    got = [c.logprob for c in out.choices[0].logprobs.content]
    worst = max(abs(a - b) for a, b in zip(got, chat["logprobs"]))
    print(f"[ measured ] chat {which}: largest logprob difference from transformers {worst:.3g}")
    assert worst < 1e-3, (got, chat["logprobs"])


def test_another_image_moves_the_answer(client):
    chat = EXPECTED["chats"][0]
    parts = [2 if not isinstance(p, str) else p for p in chat["parts"]]
    out = ask(client, parts, len(chat["greedy"]))
    assert out.model_extra["prompt_token_ids"] == chat["prompt"]  # the same tokens: only the pixels differ
    got = [c.logprob for c in out.choices[0].logprobs.content]
    moved = max(abs(a - b) for a, b in zip(got, chat["logprobs"]))
    print(f"[ measured ] image 2 for image 0 moves the logprobs by {moved:.3g}")
    assert out.choices[0].model_extra["token_ids"] != chat["greedy"] or moved > 1e-2, (got, chat["logprobs"])


def test_streaming_with_an_image(client):
    chat = EXPECTED["chats"][1]
    chunks = list(ask(client, chat["parts"], len(chat["greedy"]), stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == len(chat["greedy"])
    assert [t for c in chunks if c.choices for t in c.choices[0].model_extra["token_ids"]] == chat["greedy"]


def test_bad_images_are_400s(client):
    chat = EXPECTED["chats"][0]
    bad = messages(chat["parts"])
    image_part = next(i for i, p in enumerate(chat["parts"]) if not isinstance(p, str))
    bad[0]["content"][image_part]["image_url"]["url"] = \
        "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n cut").decode()
    with pytest.raises(openai.BadRequestError, match="image 1 of the messages"):
        client.chat.completions.create(model=MODEL, messages=bad, max_tokens=1)
    with pytest.raises(openai.BadRequestError, match="fetches no URLs"):
        bad[0]["content"][image_part]["image_url"]["url"] = "https://example.com/cat.png"
        client.chat.completions.create(model=MODEL, messages=bad, max_tokens=1)
    assert ask(client, chat["parts"], 1).usage.prompt_tokens == len(chat["prompt"])
