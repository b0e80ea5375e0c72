"""InternVL's images through the real `openai` Python client: chat messages with image_url parts
(data: URLs) to `brigade serve` on tests/fixtures/internvl (a tiny random
InternVLForConditionalGeneration: InternViT, pixel shuffle, projector, a Qwen2 language model, a
byte-level tokenizer with <img>, </img>, <IMG_CONTEXT> and the -hf checkpoints' ChatML template),
written by scripts/make_internvl_fixtures.py. Against transformers: the prompt's ids equal
InternVLProcessor's (the template's <IMG_CONTEXT> per image expanded to <img> + 16 tokens per tile
+ </img>, the tiles GotOcr2's crop to patches with the thumbnail), and the greedy tokens and their
logprobs equal generate()'s, whole and with steps of 8 tokens that cut the images. Another image
moves the answer; a broken image is a 400. Run through ctest (scripts/python-env.sh run-pytest).
"""
import base64
import os

import openai
import pytest

from fixture_server import expected, fixtures, image_data_url, whole_and_in_steps_client

FIXTURE = fixtures("internvl")
MODEL = os.path.basename(FIXTURE)
EXPECTED = expected(FIXTURE)
TILE_TOKENS = EXPECTED["tile_tokens"]

client = whole_and_in_steps_client(FIXTURE)


def messages(parts):
    content = [{"type": "text", "text": p} if isinstance(p, str)
               else {"type": "image_url", "image_url": {"url": image_data_url(FIXTURE, p)}} for p in parts]
    return [{"role": "user", "content": content}]


def ask(client, parts, n_tokens, **kw):
    return client.chat.completions.create(model=MODEL, messages=messages(parts), max_tokens=n_tokens, temperature=0,
                                          logprobs=True, extra_body={"ignore_eos": True, "return_token_ids": True}, **kw)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    out = ask(client, chat["parts"], len(chat["greedy"]))
    prompt = out.model_extra["prompt_token_ids"]
    assert prompt == chat["prompt"]
    tiles = sum(EXPECTED["images"][p]["n_tiles"] for p in chat["parts"] if not isinstance(p, str))
    assert prompt.count(EXPECTED["image_token"]) == TILE_TOKENS * tiles
    assert out.choices[0].model_extra["token_ids"] == chat["greedy"]
    got = [c.logprob for c in out.choices[0].logprobs.content]
    worst = max(abs(a - b) for a, b in zip(got, chat["logprobs"]))
    print(f"[ measured ] chat {which}: largest logprob difference from transformers {worst:.3g}")
    assert worst < 1e-3, (got, chat["logprobs"])


def test_another_image_moves_the_answer(client):
    chat = EXPECTED["chats"][0]  # image 0 (3 tiles); image 2 has 3 tiles too, so the prompt is the same
    out = ask(client, [2 if not isinstance(p, str) else p for p in chat["parts"]], len(chat["greedy"]))
    assert out.model_extra["prompt_token_ids"] == chat["prompt"]
    got = [c.logprob for c in out.choices[0].logprobs.content]
    moved = max(abs(a - b) for a, b in zip(got, chat["logprobs"]))
    print(f"[ measured ] image 2 for image 0 moves the logprobs by {moved:.3g}")
    assert out.choices[0].model_extra["token_ids"] != chat["greedy"] or moved > 1e-2


def test_a_broken_image_is_a_400(client):
    chat = EXPECTED["chats"][0]
    bad = messages(chat["parts"])
    image_part = next(i for i, p in enumerate(chat["parts"]) if not isinstance(p, str))
    bad[0]["content"][image_part]["image_url"]["url"] = \
        "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n cut").decode()
    with pytest.raises(openai.BadRequestError, match="image 1 of the messages"):
        client.chat.completions.create(model=MODEL, messages=bad, max_tokens=1)
