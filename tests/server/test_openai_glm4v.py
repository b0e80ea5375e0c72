"""GLM-4.1V's images through the real `openai` Python client: chat messages with image_url parts
(data: URLs) to `brigade serve` on tests/fixtures/glm4v (a tiny random
Glm4vForConditionalGeneration: the GLM tower, GLM-4's layers with M-RoPE, a byte-level tokenizer
with GLM's special tokens and a chat template in GLM-4.1V's prompt format), written by
scripts/make_glm4v_fixtures.py. Against transformers: the prompt's ids equal the ones the
template and tokenizer make with each <|image|> expanded to the image's tokens
(Glm4vProcessor.replace_image_token), and the greedy tokens and their logprobs equal
transformers', whole and with steps of 8 tokens that cut the images. Another image moves them;
streaming; images the server cannot take and video parts are 400s.
Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary
(fixture_server.py).
"""
import pytest

from fixture_server import expected, fixtures, whole_and_in_steps_client
from vision_client import BROKEN_PNG, ask, assert_400, assert_streamed_answer, assert_transformers_answer, \
    logprob_difference, messages, with_image_url

FIXTURE = fixtures("glm4v")
EXPECTED = expected(FIXTURE)


client = whole_and_in_steps_client(FIXTURE)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    assert_transformers_answer(ask(client, FIXTURE, chat), chat)


def test_another_image_moves_the_logprobs(client):
    chat = EXPECTED["chats"][0]
    out = ask(client, FIXTURE, chat, images=[1])  # image 1 (16 tokens) where image 0 (20) was
    assert out.usage.prompt_tokens == len(chat["prompt"]) - 4
    assert out.choices[0].model_extra["token_ids"] != chat["greedy"] or logprob_difference(out, chat) > 1e-2


def test_streaming_with_an_image(client):
    chat = EXPECTED["chats"][0]
    assert_streamed_answer(client, FIXTURE, chat)


def test_bad_images_and_video_are_400s(client):
    chat = EXPECTED["chats"][0]
    assert_400(client, FIXTURE, with_image_url(messages(FIXTURE, chat), BROKEN_PNG), "image 1 of the messages")
    video = messages(FIXTURE, chat)
    video[1]["content"][1] = {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}}
    assert_400(client, FIXTURE, video, "video parts are not supported")
    assert ask(client, FIXTURE, chat).usage.prompt_tokens == len(chat["prompt"])
