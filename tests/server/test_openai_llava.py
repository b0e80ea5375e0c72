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
import pytest

from fixture_server import expected, fixtures, whole_and_in_steps_client
from vision_client import BROKEN_PNG, ask, assert_400, assert_streamed_answer, assert_transformers_answer, image_indices, \
    logprob_difference, messages, with_image_url

FIXTURE = fixtures("llava")
EXPECTED = expected(FIXTURE)


client = whole_and_in_steps_client(FIXTURE)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    worst = assert_transformers_answer(ask(client, FIXTURE, chat), chat)
    print(f"[ measured ] chat {which}: largest logprob difference from transformers {worst:.3g}")


def test_another_image_moves_the_answer(client):
    chat = EXPECTED["chats"][0]
    out = ask(client, FIXTURE, chat, images=[2 for _ in image_indices(chat)])
    assert out.model_extra["prompt_token_ids"] == chat["prompt"]  # the same tokens: only the pixels differ
    moved = logprob_difference(out, chat)
    print(f"[ measured ] image 2 for image 0 moves the logprobs by {moved:.3g}")
    assert out.choices[0].model_extra["token_ids"] != chat["greedy"] or moved > 1e-2, moved


def test_streaming_with_an_image(client):
    chat = EXPECTED["chats"][1]
    assert_streamed_answer(client, FIXTURE, chat)


def test_bad_images_are_400s(client):
    chat = EXPECTED["chats"][0]
    bad = with_image_url(messages(FIXTURE, chat), BROKEN_PNG)
    assert_400(client, FIXTURE, bad, "image 1 of the messages")
    assert_400(client, FIXTURE, with_image_url(bad, "https://example.com/cat.png"), "fetches no URLs")
    assert ask(client, FIXTURE, chat, n_tokens=1).usage.prompt_tokens == len(chat["prompt"])
