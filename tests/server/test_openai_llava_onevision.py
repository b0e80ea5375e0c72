"""LLaVA-OneVision's images through the real `openai` Python client: chat messages with image_url
parts (data: URLs, as the client sends them) to `brigade serve` on tests/fixtures/llava_onevision
(a tiny random LlavaOnevisionForConditionalGeneration: SigLIP tower, anyres tiles by
llava-onevision's 36 pinpoints scaled to 28-pixel tiles, resized by anyres_max_9, image_newline, a
Qwen2 language model, a byte-level tokenizer with <image> and llava-1.5's chat template), written
by scripts/make_llava_onevision_fixtures.py. Against transformers: the prompt's ids equal the ones
LlavaOnevisionProcessor makes (a lone <image> expanded to as many tokens as its image's size and
anyres_max_9 give; each of two images to its base tile's 49 and a newline), and the greedy tokens
and their logprobs equal generate()'s, whole and with steps of 8 tokens that cut the images. A
lone image of another size changes the prompt's length as the processor's count says; an image
sent with another is base only; streaming; images the server cannot take are 400s.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary
(fixture_server.py).
"""
import pytest

from fixture_server import expected, fixtures, whole_and_in_steps_client
from vision_client import BROKEN_PNG, ask, assert_400, assert_streamed_answer, assert_transformers_answer, image_indices, \
    messages, with_image_url

FIXTURE = fixtures("llava_onevision")
EXPECTED = expected(FIXTURE)
BASE_ONLY = 7 * 7 + 1  # an image of a prompt with several: its base tile's features and one newline


client = whole_and_in_steps_client(FIXTURE)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    worst = assert_transformers_answer(ask(client, FIXTURE, chat), chat)
    print(f"[ measured ] chat {which}: largest logprob difference from transformers {worst:.3g}")


def test_a_lone_image_takes_its_sizes_tokens_and_several_take_base_only(client):
    alone, pair = EXPECTED["chats"]
    tokens = [im["n_image_tokens"] for im in EXPECTED["images"]]
    assert len(image_indices(alone)) == 1 and image_indices(alone) == [2] and tokens[2] != tokens[5]
    out = ask(client, FIXTURE, alone, images=[5])  # 100 x 140 pixels, resized by anyres_max_9
    assert out.usage.prompt_tokens == len(alone["prompt"]) - tokens[2] + tokens[5]
    assert out.model_extra["prompt_token_ids"].count(EXPECTED["image_token"]) == tokens[5]
    assert len(image_indices(pair)) == 2
    out = ask(client, FIXTURE, pair, images=[2, 5], n_tokens=1)  # whatever their sizes: base only
    assert out.model_extra["prompt_token_ids"].count(EXPECTED["image_token"]) == 2 * BASE_ONLY
    assert out.usage.prompt_tokens == len(pair["prompt"])


def test_streaming_with_images(client):
    chat = EXPECTED["chats"][1]
    assert_streamed_answer(client, FIXTURE, chat)


def test_bad_images_are_400s(client):
    chat = EXPECTED["chats"][1]
    bad = with_image_url(messages(FIXTURE, chat), BROKEN_PNG)
    assert_400(client, FIXTURE, bad, "image 1 of the messages")
    assert ask(client, FIXTURE, chat, n_tokens=1).usage.prompt_tokens == len(chat["prompt"])
