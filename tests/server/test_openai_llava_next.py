"""LLaVA-NeXT's images through the real `openai` Python client: chat messages with image_url parts
(data: URLs, as the client sends them) to `brigade serve` on tests/fixtures/llava_next (a tiny
random LlavaNextForConditionalGeneration: CLIP tower, anyres tiles by llava-v1.6's pinpoints scaled
to 28-pixel tiles, image_newline, a Llama language model, a byte-level tokenizer with <image> and
llava-1.5's chat template), written by scripts/make_llava_next_fixtures.py. Against transformers:
the prompt's ids equal the ones LlavaNextProcessor makes (each <image> expanded to as many tokens
as its image's size gives), and the greedy tokens and their logprobs equal generate()'s, whole and
with steps of 8 tokens that cut the images. An image of another size changes the prompt's length
as the processor's count says; streaming; images the server cannot take are 400s.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary
(fixture_server.py).
"""
import pytest

from fixture_server import expected, fixtures, whole_and_in_steps_client
from vision_client import BROKEN_PNG, ask, assert_400, assert_streamed_answer, assert_transformers_answer, image_indices, \
    messages, with_image_url

FIXTURE = fixtures("llava_next")
EXPECTED = expected(FIXTURE)


client = whole_and_in_steps_client(FIXTURE)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    worst = assert_transformers_answer(ask(client, FIXTURE, chat), chat)
    print(f"[ measured ] chat {which}: largest logprob difference from transformers {worst:.3g}")


def test_an_image_of_another_size_takes_its_own_tokens(client):
    chat = EXPECTED["chats"][0]  # image 0: 40 x 60 pixels
    tokens = [im["n_image_tokens"] for im in EXPECTED["images"]]
    assert len(image_indices(chat)) == 1 and tokens[0] != tokens[3]
    out = ask(client, FIXTURE, chat, images=[3])  # 90 x 25 pixels
    assert out.usage.prompt_tokens == len(chat["prompt"]) - tokens[0] + tokens[3]
    assert out.model_extra["prompt_token_ids"].count(EXPECTED["image_token"]) == tokens[3]


def test_streaming_with_images(client):
    chat = EXPECTED["chats"][1]
    assert_streamed_answer(client, FIXTURE, chat)


def test_bad_images_are_400s(client):
    chat = EXPECTED["chats"][0]
    bad = with_image_url(messages(FIXTURE, chat), BROKEN_PNG)
    assert_400(client, FIXTURE, bad, "image 1 of the messages")
    assert ask(client, FIXTURE, chat, n_tokens=1).usage.prompt_tokens == len(chat["prompt"])
