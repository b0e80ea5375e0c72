"""Gemma 4 chat through the real `openai` client: `brigade serve --tool-call-parser gemma4
--reasoning-parser gemma4` with Gemma 4's real chat template (llama.cpp's copy of
google/gemma-4-31B-it's, tests/fixtures/chat_templates/templates/gemma-4.jinja) on a tiny model
whose vocabulary has Gemma 4's `<|channel>` and `<channel|>` as special tokens. The output is
forced (guided_choice) to the thought channel and Gemma 4's call syntax: the client reads
reasoning_content and tool_calls, whole and streamed, and sends the call and its result back; the
prompt is then transformers' rendering of that history (tests/fixtures/chat_gemma4/cases.json,
scripts/make_chat_gemma4_fixtures.py), counted by the server's /tokenize.

Run through ctest (scripts/python-env.sh run-pytest); BRIGADE_BIN names the brigade binary
(fixture_server.py).
"""
import json
import os

import pytest

from fixture_server import ROOT, at_root, post, serve, stop
from test_openai import add_tokens, make_tiny_model

TEMPLATE = os.path.join(ROOT, "tests", "fixtures", "chat_templates", "templates", "gemma-4.jinja")
with open(os.path.join(ROOT, "tests", "fixtures", "chat_gemma4", "cases.json"), encoding="utf-8") as f:
    FIXTURES = json.load(f)

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string"}, "days": {"type": "integer"}}}}}
Q = '<|"|>'
THOUGHT = "<|channel>thought\nOslo: ask get_weather.<channel|>"
CALLS = (f"Checking.<|tool_call>call:get_weather{{city:{Q}Oslo{Q},days:2}}<tool_call|>"
         f"<|tool_call>call:get_weather{{city:{Q}Zürich, «CH»{Q},days:1}}<tool_call|>")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    model = str(tmp_path_factory.mktemp("gemma4") / "tiny")
    make_tiny_model(model, max_position=4096)  # the tiny vocabulary spends about a token a byte
    add_tokens(model, ["<|channel>", "<channel|>"], special=True)  # as in Gemma 4's tokenizer
    proc, client = serve(model, "--chat-template", TEMPLATE, "--tool-call-parser", "gemma4",
                         "--reasoning-parser", "gemma4")
    client.model = os.path.basename(model)
    yield client
    stop(proc)


def ask(client, output, **kw):
    return client.chat.completions.create(
        model=client.model, messages=[{"role": "user", "content": "Weather in Oslo and Zürich?"}], tools=[WEATHER],
        max_tokens=300, temperature=0,
        extra_body={"guided_choice": [output], "chat_template_kwargs": {"enable_thinking": False}}, **kw)


def test_reasoning_and_calls(client):
    r = ask(client, THOUGHT + CALLS)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking."
    assert choice.message.reasoning_content == "Oslo: ask get_weather."
    calls = choice.message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_weather"]
    assert [json.loads(c.function.arguments) for c in calls] == [{"city": "Oslo", "days": 2},
                                                                 {"city": "Zürich, «CH»", "days": 1}]
    assert all(c.id.startswith("call_") and c.type == "function" for c in calls)

    # Streamed: the same reasoning, content and calls, no markup in any delta.
    reasoning, content, streamed, finish = "", "", {}, None
    for chunk in ask(client, THOUGHT + CALLS, stream=True):
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        reasoning += getattr(d, "reasoning_content", None) or ""
        content += d.content or ""
        for t in d.tool_calls or []:
            entry = streamed.setdefault(t.index, {"name": "", "arguments": ""})
            entry["name"] += t.function.name or ""
            entry["arguments"] += t.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    assert (reasoning, content) == ("Oslo: ask get_weather.", "Checking.")
    assert [(e["name"], json.loads(e["arguments"])) for e in streamed.values()] == \
        [(c.function.name, json.loads(c.function.arguments)) for c in calls]


def test_cut_off_call_is_content(client):
    cut = f"<|tool_call>call:get_weather{{city:{Q}Os"
    r = ask(client, cut)
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].message.content == cut


def test_call_and_result_go_back_through_the_template(client):
    """The fixtures' one_call_and_result history, sent as the client sends it: the prompt is transformers'."""
    c = next(c for c in FIXTURES["cases"] if c["template"] == "gemma-4" and c["conversation"] == "one_call_and_result"
             and "template_kwargs" not in c)
    expected = c["expected"]
    assert expected.startswith("<bos>")
    # The tiny tokenizer's bos_token is <s>; its count of the reference rendering.
    count = post(at_root(client), "/tokenize", {"prompt": "<s>" + expected[len("<bos>"):], "add_special_tokens": False})
    r = client.chat.completions.create(model=client.model, messages=c["messages"], tools=c["tools"], max_tokens=1,
                                       temperature=0)
    assert r.usage.prompt_tokens == count["count"]
