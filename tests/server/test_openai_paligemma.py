"""PaliGemma through the real `openai` Python client: `brigade serve` on tests/fixtures/paligemma and
paligemma2 (tiny random PaliGemmaForConditionalGeneration checkpoints, Gemma and Gemma 2 language
models, written by scripts/make_paligemma_fixtures.py) with a chat template given by --chat-template
(PaliGemma ships none; this one writes `<image>` per image part and the text). The tokenizer station
lays the rendered text out as PaliGemmaProcessor does (the images' runs, <bos>, the text, "\\n"), so
the prompt's ids are the processor's and the greedy tokens transformers' (the prompt attending to all
of itself), whole and with steps of 64 tokens; a prompt longer than a step is a 400 naming
max_step_tokens. Run through ctest (scripts/python-env.sh run-pytest).
"""
import os

import openai
import pytest

from fixture_server import expected, fixtures, image_data_url, serve, stop

TEMPLATE = ("{% for message in messages %}{% if message['content'] is string %}{{ message['content'] }}"
            "{% else %}{% for item in message['content'] %}{% if item['type'] == 'image' %}<image>"
            "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}{% endfor %}")


@pytest.fixture(scope="module", params=["paligemma", "paligemma2"])
def served(request, tmp_path_factory):
    template = tmp_path_factory.mktemp("template") / "paligemma.jinja"
    template.write_text(TEMPLATE)
    model_dir = fixtures(request.param)
    proc, client = serve(model_dir, "--chat-template", str(template), "--max-num-batched-tokens", "64")
    yield model_dir, client
    stop(proc)


def user_turn(model_dir, case):
    """The case as one user turn: an image_url part per image, then its text without markers (the
    text-only case: a plain string)."""
    text = case["text"].replace("<image>", "")
    if not case["images"]:
        return [{"role": "user", "content": text}]
    parts = [{"type": "image_url", "image_url": {"url": image_data_url(model_dir, k)}} for k in case["images"]]
    return [{"role": "user", "content": parts + [{"type": "text", "text": text}]}]


def chat(client, model_dir, messages, n_tokens):
    return client.chat.completions.create(model=os.path.basename(model_dir), messages=messages, max_tokens=n_tokens,
                                          temperature=0, extra_body={"ignore_eos": True, "return_token_ids": True})


# The cases whose text puts the markers first or has none (the third has text before its marker,
# which image_url parts before the text cannot say).
@pytest.mark.parametrize("which", [0, 1, 3])
def test_prompt_ids_are_the_processors_and_tokens_transformers(served, which):
    model_dir, client = served
    case = expected(model_dir)["cases"][which]
    out = chat(client, model_dir, user_turn(model_dir, case), len(case["greedy"]))
    assert out.model_extra["prompt_token_ids"] == case["prompt"]
    assert out.usage.prompt_tokens == len(case["prompt"])
    assert out.choices[0].model_extra["token_ids"] == case["greedy"]
    assert out.choices[0].finish_reason == "length"


def test_a_prompt_longer_than_a_step_is_a_400(served):
    model_dir, client = served
    case = expected(model_dir)["cases"][1]
    messages = user_turn(model_dir, case)
    messages[0]["content"][-1]["text"] += " and" * 20
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, model_dir, messages, 1)
    assert "max_step_tokens" in str(e.value)
