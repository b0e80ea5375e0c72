"""Gemma 4's images through the real `openai` Python client: chat messages with image_url parts
(data: URLs) to `brigade serve` on tests/fixtures/gemma4_vision (a tiny random
Gemma4ForConditionalGeneration with its vision tower, use_bidirectional_attention "vision", a
byte-level tokenizer with Gemma 4's special tokens and google/gemma-4-31B-it's real chat
template), written by scripts/make_gemma4_vision_fixtures.py. Against transformers: the prompt's
ids equal the ones the real template and tokenizer make with each <|image|> expanded as
Gemma4Processor does (<|image> + the image's soft tokens + <image|>, their count from the
processor's aspect-preserving resize), and the greedy tokens and their logprobs equal
generate()'s, whole and with steps of 80 tokens (chunks end before an image they would cut: its
tokens attend to one another). Steps of 16 cannot hold an image: a 400 saying so.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary.
"""
import os

import openai
import pytest

from fixture_server import expected, fixtures, image_data_url, serve, stop

FIXTURE = fixtures("gemma4_vision")
MODEL = os.path.basename(FIXTURE)
EXPECTED = expected(FIXTURE)


@pytest.fixture(scope="module", params=[[], ["--max-num-batched-tokens", "80"]], ids=["whole", "steps_of_80"])
def client(request):
    proc, c = serve(FIXTURE, *request.param)
    yield c
    stop(proc)


def messages(chat):
    content = [{"type": "text", "text": p} if isinstance(p, str)
               else {"type": "image_url", "image_url": {"url": image_data_url(FIXTURE, p)}} for p in chat["parts"]]
    return [{"role": "user", "content": content}]


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
    got = [c.logprob for c in out.choices[0].logprobs.content]
    assert max(abs(a - b) for a, b in zip(got, chat["logprobs"])) < 1e-3, (got, chat["logprobs"])


def test_an_image_larger_than_a_step_is_a_400():
    proc, c = serve(FIXTURE, "--max-num-batched-tokens", "16")
    try:
        with pytest.raises(openai.BadRequestError, match="must run in one step"):
            ask(c, EXPECTED["chats"][0])
    finally:
        stop(proc)
