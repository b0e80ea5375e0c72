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
import pytest

from fixture_server import expected, fixtures, whole_and_in_steps_client
from vision_client import BROKEN_PNG, ask, assert_400, assert_streamed_answer, assert_transformers_answer, messages, \
    with_image_url

FIXTURE = fixtures("mistral3_vision")
EXPECTED = expected(FIXTURE)


client = whole_and_in_steps_client(FIXTURE)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    # Each token's logprob as transformers' (fp32 both sides; an image flipped left to right moves
    # them by more than 1e-2).
    assert_transformers_answer(ask(client, FIXTURE, chat), chat)


def test_streaming_with_an_image(client):
    chat = EXPECTED["chats"][0]
    assert_streamed_answer(client, FIXTURE, chat)


def test_bad_images_are_400s(client):
    chat = EXPECTED["chats"][0]
    bad = with_image_url(messages(FIXTURE, chat), BROKEN_PNG)
    assert_400(client, FIXTURE, bad, "image 1 of the messages")
    assert_400(client, FIXTURE, with_image_url(bad, "https://example.com/cat.png"), "fetches no URLs")
    assert ask(client, FIXTURE, chat).usage.prompt_tokens == len(chat["prompt"])
