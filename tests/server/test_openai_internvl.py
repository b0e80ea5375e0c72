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
import pytest

from fixture_server import expected, fixtures, whole_and_in_steps_client
from vision_client import BROKEN_PNG, ask, assert_400, assert_transformers_answer, image_indices, logprob_difference, \
    messages, with_image_url

FIXTURE = fixtures("internvl")
EXPECTED = expected(FIXTURE)
TILE_TOKENS = EXPECTED["tile_tokens"]

client = whole_and_in_steps_client(FIXTURE)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    out = ask(client, FIXTURE, chat)
    worst = assert_transformers_answer(out, chat)
    tiles = sum(EXPECTED["images"][p]["n_tiles"] for p in image_indices(chat))
    assert out.model_extra["prompt_token_ids"].count(EXPECTED["image_token"]) == TILE_TOKENS * tiles
    print(f"[ measured ] chat {which}: largest logprob difference from transformers {worst:.3g}")


def test_another_image_moves_the_answer(client):
    chat = EXPECTED["chats"][0]  # image 0 (3 tiles); image 2 has 3 tiles too, so the prompt is the same
    out = ask(client, FIXTURE, chat, images=[2 for _ in image_indices(chat)])
    assert out.model_extra["prompt_token_ids"] == chat["prompt"]
    moved = logprob_difference(out, chat)
    print(f"[ measured ] image 2 for image 0 moves the logprobs by {moved:.3g}")
    assert out.choices[0].model_extra["token_ids"] != chat["greedy"] or moved > 1e-2


def test_a_broken_image_is_a_400(client):
    assert_400(client, FIXTURE, with_image_url(messages(FIXTURE, EXPECTED["chats"][0]), BROKEN_PNG),
               "image 1 of the messages")
