#!/usr/bin/env python3
"""Renders fixed tool-calling conversations with Hugging Face `transformers`' apply_chat_template
(tools=...) and the real Jinja chat templates of Qwen2.5-Instruct and Llama-3.1-Instruct, for
tests/models/chat_template_tools_test.cpp, which compares brigade's rendering byte for byte.

The templates are read from models/chat_templates/*.jinja, copies of the models' tokenizer_config.json "chat_template"
(Qwen/Qwen2.5-0.5B-Instruct at 7ae557604adf67be50417f59c2c2f167def9a775,
Qwen/Qwen3-4B-Thinking-2507 and meta-llama/Llama-3.1-8B-Instruct); there is no network to the
Hub here. Messages are given as an
OpenAI client sends them (a call's `arguments` is a JSON string); like vLLM, the script parses each
call's arguments into an object before rendering, and passes the tools as the client sent them.

The Qwen2.5 cases all have a system message: brigade's chatml family adds no default system text
(Qwen2.5 adds "You are Qwen, ..."), and with a system message both agree. The cases without one
are rendered with Qwen3's template, which adds none either.

Run: python3 scripts/make_chat_tool_fixtures.py [--venv DIR]. It makes a virtual environment with
transformers and jinja2 (default .brigade/chat-venv; PyPI only) and writes
tests/fixtures/chat_tools/cases.json. The output is committed; CI never runs this.
"""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "chat_tools" / "cases.json"
# Real chat templates, one file each, byte for byte as the model ships it: the ones `brigade
# make-model` writes (compiled in) under models/, the others under tests/fixtures/.
TEMPLATE_DIRS = [ROOT / "models" / "chat_templates", ROOT / "tests" / "fixtures" / "chat_templates" / "templates"]


def read_template(name):
    for d in TEMPLATE_DIRS:
        if (d / f"{name}.jinja").exists():
            return (d / f"{name}.jinja").read_text(encoding="utf-8")
    raise FileNotFoundError(f"{name}.jinja in none of {TEMPLATE_DIRS}")


QWEN25 = read_template("qwen2.5")

# Qwen/Qwen3-4B-Thinking-2507's template: with tools and no system message its system turn is
# the tools block alone, which is brigade's chatml rendering; its generation prompt opens a
# <think> block, so its cases render without one (and end with a user turn, where its reasoning
# handling does not apply).
QWEN3 = read_template("qwen3")

LLAMA31 = read_template("llama-3.1")

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city — «quoted», tab\there, \"escaped\" and a\nnewline",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich or 東京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 1},
            },
            "required": ["city"],
        },
    },
}
# Keys deliberately out of alphabetical order, floats in Python's repr forms, empty containers.
SEARCH = {
    "function": {
        "parameters": {
            "properties": {
                "query": {"type": "string", "minLength": 1},
                "score": {"type": "number", "minimum": 0.5, "maximum": 1e-05, "multipleOf": 2.5e16},
                "filters": {"type": "object", "properties": {}},
                "tags": {"type": "array", "items": {"type": "string"}, "default": []},
                "exact": {"type": ["boolean", "null"], "default": None},
            },
            "type": "object",
            "required": ["query"],
        },
        "name": "search_docs",
        "description": "Search the documentation",
        "strict": True,
    },
    "type": "function",
}
TOOLS = [WEATHER, SEARCH]


def call(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def cases():
    ask = {"role": "user", "content": "What's the weather in Zürich?  "}
    system = {"role": "system", "content": " You are a weather bot. "}
    two_calls = {"role": "assistant", "content": "Let me check both.",
                 "tool_calls": [call("call_1", "get_weather", {"city": "Zürich", "unit": "celsius"}),
                                call("call_2", "search_docs", {"query": "föhn", "score": 0.75, "filters": {}})]}
    one_call = {"role": "assistant", "content": None,
                "tool_calls": [call("call_1", "get_weather", {"city": "Zürich", "days": 2})]}
    result1 = {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5, \"sky\": \"sunny ☀\"}"}
    result2 = {"role": "tool", "tool_call_id": "call_2", "content": "no \"föhn\" today\n"}
    answer = {"role": "assistant", "content": "It is 21.5 °C and sunny."}
    follow = {"role": "user", "content": "And tomorrow?"}
    return [
        ("chatml_first_turn", "chatml", QWEN25, [system, ask], TOOLS, True),
        ("chatml_two_calls_and_results", "chatml", QWEN25,
         [system, ask, two_calls, result1, result2, answer, follow], TOOLS, True),
        ("chatml_call_without_content", "chatml", QWEN25, [system, ask, one_call, result1], TOOLS, True),
        ("chatml_history_without_tools", "chatml", QWEN25, [system, ask, two_calls, result1, result2], None, False),
        ("chatml_qwen3_no_system", "chatml", QWEN3, [ask], TOOLS, False),
        ("chatml_qwen3_no_system_history", "chatml", QWEN3, [ask, two_calls, result1, result2, answer, follow], TOOLS,
         False),
        ("llama3_first_turn", "llama-3", LLAMA31, [system, ask], TOOLS, True),
        ("llama3_no_system", "llama-3", LLAMA31, [ask, one_call, result1, answer, follow], TOOLS, True),
        ("llama3_call_and_result", "llama-3", LLAMA31, [system, ask, one_call, result2], [SEARCH], True),
        ("llama3_history_without_tools", "llama-3", LLAMA31, [system, ask, one_call, result1], None, False),
    ]


def ensure_venv(venv):
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import transformers, jinja2"], capture_output=True) \
        if python.exists() else None
    if probe is None or probe.returncode != 0:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "transformers", "jinja2"], check=True)
    return python


def render_all():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                  bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")
    out = []
    for name, family, template, messages, tools, gen in cases():
        rendered_messages = copy.deepcopy(messages)
        for m in rendered_messages:  # vLLM's _postprocess_messages: arguments strings become objects
            for c in m.get("tool_calls", []):
                c["function"]["arguments"] = json.loads(c["function"]["arguments"])
        text = tok.apply_chat_template(rendered_messages, tools=tools, chat_template=template, tokenize=False,
                                       add_generation_prompt=gen)
        out.append({"name": name, "family": family, "messages": messages, "tools": tools or [],
                    "add_generation_prompt": gen, "expected": text})
    return out


def main():
    if os.environ.get("BRIGADE_CHAT_FIXTURES_IN_VENV") != "1":
        venv = Path(sys.argv[sys.argv.index("--venv") + 1]) if "--venv" in sys.argv else ROOT / ".brigade" / "chat-venv"
        python = ensure_venv(venv)
        env = dict(os.environ, BRIGADE_CHAT_FIXTURES_IN_VENV="1")
        sys.exit(subprocess.run([str(python), __file__], env=env).returncode)
    import transformers
    data = {"generator": f"scripts/make_chat_tool_fixtures.py (transformers {transformers.__version__})",
            "cases": render_all()}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(data['cases'])} cases)")


if __name__ == "__main__":
    main()
