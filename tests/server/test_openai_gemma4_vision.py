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
import openai
import pytest

from fixture_server import expected, fixtures, serve, stop
from vision_client import ask, assert_transformers_answer

FIXTURE = fixtures("gemma4_vision")
EXPECTED = expected(FIXTURE)


@pytest.fixture(scope="module", params=[[], ["--max-num-batched-tokens", "80"]], ids=["whole", "steps_of_80"])
def client(request):
    proc, c = serve(FIXTURE, *request.param)
    yield c
    stop(proc)


@pytest.mark.parametrize("which", range(len(EXPECTED["chats"])))
def test_prompt_and_greedy_tokens_are_transformers(client, which):
    chat = EXPECTED["chats"][which]
    assert_transformers_answer(ask(client, FIXTURE, chat), chat)


def test_an_image_larger_than_a_step_is_a_400():
    proc, c = serve(FIXTURE, "--max-num-batched-tokens", "16")
    try:
        with pytest.raises(openai.BadRequestError, match="must run in one step"):
            ask(c, FIXTURE, EXPECTED["chats"][0])
    finally:
        stop(proc)
