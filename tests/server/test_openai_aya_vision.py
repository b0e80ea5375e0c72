"""Aya Vision's images through the real `openai` Python client: chat messages with image_url parts
(data: URLs) to `brigade serve` on tests/fixtures/aya_vision (a tiny random
AyaVisionForConditionalGeneration: a SigLIP tower read at hidden_states[-2], the pixel shuffle by 2,
LayerNorm and SwiGLU, a Cohere2 language model, a byte-level tokenizer with Aya's image tokens and a
chat template in the form of Aya Vision's), written by scripts/make_aya_vision_fixtures.py. Against
transformers: the prompt's ids equal AyaVisionProcessor's (each <image> of the template expanded to
<|START_OF_IMG|>, TILE_k / TILE_GLOBAL before each of GotOcr2's tiles' run of <|IMG_PATCH|>,
<|END_OF_IMG|>), and the greedy tokens and their logprobs equal generate()'s, whole and with steps of
8 tokens that cut the tiles; a broken image is a 400. Run through ctest (scripts/python-env.sh
run-pytest).
"""
import pytest

from fixture_server import expected, fixtures, whole_and_in_steps_client
from vision_client import BROKEN_PNG, ask, assert_400, assert_transformers_answer, image_indices, messages, \
    with_image_url

FIXTURE = fixtures("aya_vision")
EXPECTED = expected(FIXTURE)

client = whole_and_in_steps_client(FIXTURE)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    out = ask(client, FIXTURE, chat)
    worst = assert_transformers_answer(out, chat)
    tiles = sum(EXPECTED["images"][k]["n_tiles"] for k in image_indices(chat))
    assert out.model_extra["prompt_token_ids"].count(EXPECTED["image_token"]) == EXPECTED["tile_tokens"] * tiles
    print(f"[ measured ] chat {which}: largest logprob difference from transformers {worst:.3g}")


def test_a_broken_image_is_a_400(client):
    chat = EXPECTED["chats"][0]
    assert_400(client, FIXTURE, with_image_url(messages(FIXTURE, chat), BROKEN_PNG), "image 1 of the messages")
    assert ask(client, FIXTURE, chat, n_tokens=1).usage.prompt_tokens == len(chat["prompt"])
