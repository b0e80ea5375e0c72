#!/usr/bin/env python3
"""Reference renderings and tool-call texts for Gemma 4's chat templates, made by Hugging Face
transformers' apply_chat_template (jinja2 in transformers' sandbox), for
tests/models/chat_gemma4_test.cpp, which compares brigade's Jinja rendering byte for byte and
parses the call texts with brigade's gemma4 tool-call parser.

Templates (byte for byte; copies in tests/fixtures/chat_templates/templates/):
  gemma-4              llama.cpp models/templates/google-gemma-4-31B-it.jinja (google/gemma-4-31B-it)
  gemma-4-interleaved  llama.cpp models/templates/google-gemma-4-31B-it-interleaved.jinja (the
                       variant that keeps reasoning between tool calls)

Messages are stored as an OpenAI client sends them; before rendering they become what vLLM hands
the template (as make_chat_reasoning_fixtures.py: call arguments parsed, an assistant's reasoning
set as reasoning / reasoning_content / thinking). Each conversation is rendered with the template
variable enable_thinking unset, and some also with it true and false (vLLM's chat_template_kwargs).

"calls": for each assistant tool-call turn below, the text the template writes for its calls
(between the model's turn opening and the <|tool_response> it ends with), i.e. what the model is
trained to generate, and the OpenAI arguments vLLM's gemma4 parser gives back for it: the same
values with every object's keys sorted (the template writes them through dictsort).

Writes tests/fixtures/chat_gemma4/cases.json. Run: python3 scripts/make_chat_gemma4_fixtures.py
(re-runs itself in .brigade/fixtures-venv). The output is committed; CI never runs this.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_chat_reasoning_fixtures import as_vllm_passes, call  # noqa: E402
from make_fixtures import ROOT, ensure_venv  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "chat_gemma4" / "cases.json"
TEMPLATE_DIR = ROOT / "tests" / "fixtures" / "chat_templates" / "templates"
TEMPLATES = ["gemma-4", "gemma-4-interleaved"]
BOS, EOS = "<bos>", "<eos>"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city — «quoted», \"escaped\"",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich or 東京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"},
                "days": {"type": "integer", "description": "How many days"},
            },
            "required": ["city"],
        },
    },
}
# Nested schemas: an array of objects with their own required keys, a nested object, a nullable
# number, a boolean, an array of strings, keys out of order.
BOOK = {
    "type": "function",
    "function": {
        "name": "book_trip",
        "description": "Book a trip",
        "parameters": {
            "type": "object",
            "required": ["travellers", "route"],
            "properties": {
                "travellers": {
                    "type": "array",
                    "description": "Who travels",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "description": "Full name"},
                            "age": {"type": "integer"},
                            "seat": {"type": "string", "enum": ["window", "aisle"]},
                        },
                        "required": ["name"],
                    },
                },
                "route": {
                    "type": "object",
                    "description": "From and to",
                    "properties": {
                        "from": {"type": "string"},
                        "to": {"type": "string"},
                        "stops": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["from", "to"],
                },
                "budget": {"type": "number", "nullable": True, "description": "Upper bound"},
                "refundable": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": ["string", "null"]}},
            },
        },
    },
}
# No parameters at all, and parameters without properties.
PING = {"type": "function", "function": {"name": "ping", "description": "Check the service"}}
NOW = {"type": "function", "function": {"name": "now", "description": "Time", "parameters": {"type": "object"}}}
TOOLS = [WEATHER, BOOK, PING, NOW]


WEATHER_ARGS = {"city": "Zürich, «CH»: {a}", "unit": "celsius", "days": 3}
BOOK_ARGS = {"travellers": [{"name": "Ada", "age": 36, "seat": "window"}, {"name": "李雷", "age": None}],
             "route": {"to": "Paris", "from": "Zürich", "stops": ["Basel", ""]},
             "budget": 1250.75, "refundable": False, "tags": ["a,b", "x:y}", "line\nbreak"]}
NEGATIVE_ARGS = {"travellers": [], "route": {"from": "A", "to": "B", "stops": []}, "budget": -0.25,
                 "refundable": True, "tags": []}
BIG_ARGS = {"travellers": [{"name": "N", "age": 120}], "route": {"from": "x", "to": "y"}, "budget": 1.5e+20}


def conversations():
    """(name, messages, tools, add_generation_prompt)."""
    system = {"role": "system", "content": "  You are terse.\nAnswer in one line.  "}
    hi = {"role": "user", "content": "  Hello there!  "}
    reply = {"role": "assistant", "content": "Hi! How can I help?"}
    again = {"role": "user", "content": "Say «grüß Gott» in 日本語 🚀."}
    thought_reply = {"role": "assistant",
                     "content": "<|channel>thought\nold plan<channel|>Sure: こんにちは"}
    ask = {"role": "user", "content": "Weather in Zürich, and book Ada to Paris?"}
    one = {"role": "assistant", "content": None, "tool_calls": [call("call_1", "get_weather", WEATHER_ARGS)]}
    result1 = {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5, \"sky\": \"sunny ☀\"}"}
    two = {"role": "assistant", "content": "Checking both.",
           "tool_calls": [call("call_1", "get_weather", WEATHER_ARGS), call("call_2", "book_trip", BOOK_ARGS)]}
    result2 = {"role": "tool", "tool_call_id": "call_2", "content": "booked"}
    answer = {"role": "assistant", "content": "It is 21.5 °C; Ada is booked."}
    thanks = {"role": "user", "content": "Thanks"}
    reasoned = {"role": "assistant", "content": None, "reasoning_content": "I need the weather first.\n",
                "tool_calls": [call("call_1", "get_weather", WEATHER_ARGS)]}
    empty_args = {"role": "assistant", "content": None,
                  "tool_calls": [call("call_9", "ping", {}), call("call_8", "book_trip", NEGATIVE_ARGS)]}
    result9 = {"role": "tool", "tool_call_id": "call_9", "content": "pong"}
    result8 = {"role": "tool", "tool_call_id": "call_8", "content": ""}
    return [
        ("one_user", [hi], None, True),
        ("system_multi_turn", [system, hi, reply, again], None, True),
        ("multi_turn_no_generation_prompt", [hi, reply, again, thought_reply], None, False),
        ("tools_first_turn", [system, ask], TOOLS, True),
        ("tools_no_system", [ask], [BOOK, PING], True),
        ("one_call_and_result", [ask, one, result1], TOOLS, True),
        ("two_calls_results_answer", [system, ask, two, result1, result2, answer, thanks], TOOLS, True),
        ("call_with_reasoning", [ask, reasoned, result1], [WEATHER], True),
        ("call_pending", [ask, one], [WEATHER], False),
        ("empty_and_negative_args", [ask, empty_args, result9, result8], TOOLS, True),
        ("history_after_answer", [ask, two, result1, result2, answer], TOOLS, False),
    ]


# Conversations also rendered with enable_thinking true and false.
THINKING_VARIANTS = {"one_user", "tools_first_turn", "two_calls_results_answer", "call_with_reasoning", "call_pending"}


# Assistant turns whose call text the parser must read back: (name, assistant message).
CALL_TURNS = [
    ("one_string_number", [WEATHER_ARGS], ["get_weather"]),
    ("nested_objects_arrays", [BOOK_ARGS], ["book_trip"]),
    ("empty_and_negative", [{}, NEGATIVE_ARGS], ["ping", "book_trip"]),
    ("parallel_three", [WEATHER_ARGS, BIG_ARGS, {}], ["get_weather", "book_trip", "now"]),
]


def main():
    ensure_venv(__file__)
    import jinja2
    import transformers
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                  bos_token=BOS, eos_token=EOS)
    templates, cases, calls = {}, [], []
    for name in TEMPLATES:
        source = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")
        templates[name] = {"bos_token": BOS, "eos_token": EOS}  # the source: TEMPLATE_DIR/<name>.jinja
        for conv, messages, tools, gen in conversations():
            variants = [None, {"enable_thinking": True}, {"enable_thinking": False}] if conv in THINKING_VARIANTS else [None]
            for kwargs in variants:
                case = {"template": name, "conversation": conv, "messages": messages, "tools": tools or [],
                        "add_generation_prompt": gen}
                if kwargs:
                    case["template_kwargs"] = kwargs
                case["expected"] = tok.apply_chat_template(as_vllm_passes(messages), tools=tools, chat_template=source,
                                                           tokenize=False, add_generation_prompt=gen, **(kwargs or {}))
                cases.append(case)
    source = (TEMPLATE_DIR / "gemma-4.jinja").read_text(encoding="utf-8")
    for conv, arg_list, names in CALL_TURNS:
        turn = {"role": "assistant", "content": None,
                "tool_calls": [call(f"call_{i}", n, a) for i, (n, a) in enumerate(zip(names, arg_list))]}
        text = tok.apply_chat_template(as_vllm_passes([{"role": "user", "content": "go"}, turn]), tools=TOOLS,
                                       chat_template=source, tokenize=False, add_generation_prompt=False)
        opening = "<|turn>model\n"
        body = text[text.index(opening) + len(opening):]
        assert body.endswith("<|tool_response>"), body
        body = body[: -len("<|tool_response>")]
        calls.append({"name": conv, "output": body,
                      "calls": [{"name": n, "arguments": json.dumps(a, ensure_ascii=False, sort_keys=True)}
                                for n, a in zip(names, arg_list)]})
    data = {"generator": f"scripts/make_chat_gemma4_fixtures.py (transformers {transformers.__version__}, "
                         f"jinja2 {jinja2.__version__})",
            "templates": templates, "cases": cases, "calls": calls}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(cases)} renderings, {len(calls)} call texts)")


if __name__ == "__main__":
    main()
