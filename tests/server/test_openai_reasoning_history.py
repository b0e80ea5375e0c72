"""The reasoning of earlier assistant turns, sent back by the real `openai` client, reaches the chat
template: `brigade serve` with Qwen3's real template (models/chat_templates/qwen3.jinja), whose
prompt for a call turn after the last user message holds the turn's reasoning in <think>. The
prompt's token count must be that of transformers' rendering of the same history
(tests/fixtures/chat_templates/reasoning.json, scripts/make_chat_reasoning_fixtures.py) as the
server's own /tokenize counts it; without the reasoning it is shorter.

Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary
(fixture_server.py).
"""
import json
import os

import openai
import pytest

from fixture_server import ROOT, at_root, post, serve, stop
from test_openai import make_tiny_model

with open(os.path.join(ROOT, "tests", "fixtures", "chat_templates", "reasoning.json"), encoding="utf-8") as f:
    FIXTURES = json.load(f)


def case(template, conversation):
    return next(c for c in FIXTURES["cases"] if c["template"] == template and c["conversation"] == conversation)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    model = str(tmp_path_factory.mktemp("reasoning_history") / "tiny")
    make_tiny_model(model, max_position=4096)  # the tiny vocabulary spends about a token a byte
    proc, client = serve(model, "--chat-template", os.path.join(ROOT, "models", "chat_templates", "qwen3.jinja"))
    client.model = os.path.basename(model)
    yield client
    stop(proc)


def token_count(client, text):
    return post(at_root(client), "/tokenize", {"prompt": text, "add_special_tokens": False})["count"]


def prompt_tokens(client, messages, tools):
    extra = {"tools": tools} if tools else {}
    r = client.chat.completions.create(model=client.model, messages=messages, max_tokens=1, temperature=0, **extra)
    return r.usage.prompt_tokens


@pytest.mark.parametrize("conversation", ["call_after_last_user", "call_reasoning_field", "call_both_fields"])
def test_prompt_is_transformers_rendering_with_the_reasoning(client, conversation):
    c = case("qwen3", conversation)
    assert "<think>\n" in c["expected"]
    n = prompt_tokens(client, c["messages"], c["tools"])
    assert n == token_count(client, c["expected"])
    # Without the reasoning the prompt is shorter (Qwen3 renders an empty turn's think block not at all).
    bare = [{k: v for k, v in m.items() if k not in ("reasoning", "reasoning_content")} for m in c["messages"]]
    assert prompt_tokens(client, bare, c["tools"]) < n


def test_earlier_answers_reasoning_is_dropped_as_the_template_does(client):
    c = case("qwen3", "earlier_answer")
    assert prompt_tokens(client, c["messages"], c["tools"]) == token_count(client, c["expected"])


def test_responses_reasoning_item_reaches_the_template(client):
    """A Responses reasoning item is the reasoning of the call turn after it: the prompt is the chat
    prompt of the same history with reasoning_content on that turn (no tools given, as the Responses
    API's flat tools come back with their keys in another order)."""
    c = case("qwen3", "call_after_last_user")
    ask, answered, again, call, result = c["messages"]
    items = [ask, {"role": "assistant", "content": answered["content"]}, again,
             {"type": "reasoning", "id": "rs_1", "summary": [],
              "content": [{"type": "reasoning_text", "text": call["reasoning_content"]}]},
             {"type": "function_call", "call_id": "call_1", "name": "get_weather",
              "arguments": call["tool_calls"][0]["function"]["arguments"]},
             {"type": "function_call_output", "call_id": "call_1", "output": result["content"]}]
    r = client.responses.create(model=client.model, input=items, max_output_tokens=1, temperature=0)
    assert r.usage.input_tokens == prompt_tokens(client, c["messages"], None)
    without = client.responses.create(model=client.model, input=items[:3] + items[4:], max_output_tokens=1, temperature=0)
    assert without.usage.input_tokens < r.usage.input_tokens


def test_bad_reasoning_is_400(client):
    for bad in ({"role": "assistant", "content": "4", "reasoning_content": 5},
                {"role": "assistant", "content": "4", "reasoning": {"text": "x"}}):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=client.model, max_tokens=1,
                                           messages=[{"role": "user", "content": "hi"}, bad,
                                                     {"role": "user", "content": "again"}])
        assert "messages[1].reasoning" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=client.model, max_tokens=1,
                                       messages=[{"role": "user", "content": "hi", "reasoning_content": "x"}])
    assert "only valid on assistant messages" in str(e.value)
