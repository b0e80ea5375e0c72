"""Idefics3's and SmolVLM's images through the real `openai` Python client: chat messages with
image_url parts (data: URLs) to `brigade serve` on tests/fixtures/idefics3 (a tiny random
Idefics3ForConditionalGeneration: a SigLIP-style tower over 32-pixel tiles, the pixel shuffle by 2,
a Llama language model, a byte-level tokenizer with Idefics3's special tokens and SmolVLM's chat
template; Idefics3ImageProcessor cuts each image into up to 3 x 3 tiles and the global tile) and
tests/fixtures/smolvlm (SmolVLMForConditionalGeneration, pixel shuffle by 4, images unsplit),
written by scripts/make_idefics3_fixtures.py. Against transformers: the prompt's ids equal
Idefics3Processor's (each <image> of the template expanded to its tiles' text: per tile
<fake_token_around_image><row_R_col_C> and its run of <image>, a newline after each row, then the
global tile between <fake_token_around_image><global-img> and <fake_token_around_image>), and the
greedy tokens and their logprobs equal generate()'s, whole and with steps of 8 tokens that cut the
tiles. Another image of another shape changes the prompt as the processor's tiles say; a broken
image is a 400. Run through ctest (scripts/python-env.sh run-pytest).
"""
import pytest

from fixture_server import expected, fixtures, serve, stop, whole_and_in_steps_client
from vision_client import BROKEN_PNG, ask, assert_400, assert_transformers_answer, image_indices, messages, \
    with_image_url

FIXTURE = fixtures("idefics3")
EXPECTED = expected(FIXTURE)
SMOLVLM = fixtures("smolvlm")
SMOLVLM_EXPECTED = expected(SMOLVLM)
IMAGE = EXPECTED["image_token"]

client = whole_and_in_steps_client(FIXTURE)


@pytest.fixture(scope="module")
def smolvlm_client():
    proc, c = serve(SMOLVLM)
    yield c
    stop(proc)


def tiles(expected, k):
    return expected["images"][k]["n_tiles"]


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    out = ask(client, FIXTURE, chat)
    worst = assert_transformers_answer(out, chat)
    n_tiles = sum(tiles(EXPECTED, k) for k in image_indices(chat))
    assert out.model_extra["prompt_token_ids"].count(IMAGE) == EXPECTED["tile_tokens"] * n_tiles
    print(f"[ measured ] chat {which}: largest logprob difference from transformers {worst:.3g}")


@pytest.mark.parametrize("which", range(len(SMOLVLM_EXPECTED["chats"])))
def test_smolvlm_unsplit_images_are_transformers(smolvlm_client, which):
    chat = SMOLVLM_EXPECTED["chats"][which]
    worst = assert_transformers_answer(ask(smolvlm_client, SMOLVLM, chat), chat)
    print(f"[ measured ] smolvlm chat {which}: largest logprob difference from transformers {worst:.3g}")


def test_an_image_of_another_shape_takes_its_tiles(client):
    chat = EXPECTED["chats"][0]  # image 0: 2 x 3 tiles and the global one
    assert image_indices(chat) == [0] and tiles(EXPECTED, 1) == 10 and tiles(EXPECTED, 0) == 7
    out = ask(client, FIXTURE, chat, images=[1], n_tokens=1)  # 3 x 3 tiles and the global one
    ids = out.model_extra["prompt_token_ids"]
    assert ids.count(IMAGE) == 10 * EXPECTED["tile_tokens"]
    assert out.usage.prompt_tokens == len(chat["prompt"]) + 3 * (EXPECTED["tile_tokens"] + 2) + 1  # 3 tiles, 1 newline


def test_a_broken_image_is_a_400(client):
    chat = EXPECTED["chats"][0]
    assert_400(client, FIXTURE, with_image_url(messages(FIXTURE, chat), BROKEN_PNG), "image 1 of the messages")
    assert ask(client, FIXTURE, chat, n_tokens=1).usage.prompt_tokens == len(chat["prompt"])
