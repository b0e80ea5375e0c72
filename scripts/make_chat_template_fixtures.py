#!/usr/bin/env python3
"""Reference renderings for brigade's Jinja interpreter (models/jinja_template.h), made by the real
thing: Hugging Face `transformers`' apply_chat_template (jinja2 in transformers' own sandboxed
environment: trim_blocks, lstrip_blocks, loopcontrols, its tojson / raise_exception /
strftime_now) for tests/models/jinja_chat_test.cpp and tests/models/jinja_template_test.cpp,
which compare byte for byte.

Two parts, written to tests/fixtures/chat_templates/:
  models.json  real chat templates of popular models (copied below as data: there is no Hub
               access here) rendered for several conversations each: system or not, multi-turn,
               add_generation_prompt on and off, tools with tool calls and results where the
               template has them, unicode, and conversations a template refuses (raise_exception).
  unit.json    small templates, one construct each, rendered by the same compiled environment
               (transformers' _compile_jinja_template), or the error jinja2 raised.

Sources of the templates (tokenizer_config.json "chat_template" of each model, or llama.cpp's
models/templates/*.jinja copies of them):
  gemma-2       google/gemma-2-2b-it (same as gemma-7b-it)
  mistral-v0.3  mistralai/Mistral-7B-Instruct-v0.3
  mistral-small mistralai/Mistral-Small-3.1-24B-Instruct-2503 (llama.cpp models/templates copy)
  phi-4-mini    llama.cpp models/templates/llama-cpp-microsoft-Phi-4-mini-instruct.jinja
  smollm2       HuggingFaceTB/SmolLM2-*-Instruct
  deepseek-r1   deepseek-ai/DeepSeek-R1-Distill-Qwen-32B (llama.cpp models/templates copy)
  qwen2.5, qwen3, llama-3.1: from scripts/make_chat_tool_fixtures.py (sources named there)

strftime_now is pinned to 2024-07-26 (the C++ tests pass the same clock).
Messages are stored as an OpenAI client sends them (a tool call's `arguments` is a JSON string);
like vLLM, the arguments are parsed into an object before rendering.

Run: python3 scripts/make_chat_template_fixtures.py [--venv DIR] (makes a venv with transformers
and jinja2, default .brigade/chat-venv; PyPI only). The output is committed; CI never runs this.
"""
import copy
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "chat_templates"

_spec = importlib.util.spec_from_file_location("tool_fixtures", Path(__file__).parent / "make_chat_tool_fixtures.py")
_tools = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tools)
QWEN25, QWEN3, LLAMA31, TOOLS, WEATHER = _tools.QWEN25, _tools.QWEN3, _tools.LLAMA31, _tools.TOOLS, _tools.WEATHER

GEMMA2 = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"

MISTRAL_V03 = '{%- if messages[0]["role"] == "system" %}\n    {%- set system_message = messages[0]["content"] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}\n\n{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns = namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}\n        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}\n            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}\n        {%- endif %}\n        {%- set ns.index = ns.index + 1 %}\n    {%- endif %}\n{%- endfor %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if message["role"] == "user" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n            {{- "[AVAILABLE_TOOLS] [" }}\n            {%- for tool in tools %}\n                {%- set tool = tool.function %}\n                {{- \'{"type": "function", "function": {\' }}\n                {%- for key, val in tool.items() if key != "return" %}\n                    {%- if val is string %}\n                        {{- \'"\' + key + \'": "\' + val + \'"\' }}\n                    {%- else %}\n                        {{- \'"\' + key + \'": \' + val|tojson }}\n                    {%- endif %}\n                    {%- if not loop.last %}\n                        {{- ", " }}\n                    {%- endif %}\n                {%- endfor %}\n                {{- "}}" }}\n                {%- if not loop.last %}\n                    {{- ", " }}\n                {%- else %}\n                    {{- "]" }}\n                {%- endif %}\n            {%- endfor %}\n            {{- "[/AVAILABLE_TOOLS]" }}\n            {%- endif %}\n        {%- if loop.first and system_message is defined %}\n            {{- "[INST] " + system_message + "\\n\\n" + message["content"] + "[/INST]" }}\n        {%- else %}\n            {{- "[INST] " + message["content"] + "[/INST]" }}\n        {%- endif %}\n    {%- elif message.tool_calls is defined and message.tool_calls is not none %}\n        {{- "[TOOL_CALLS] [" }}\n        {%- for tool_call in message.tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n            {{- out[:-1] }}\n            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}\n            {%- endif %}\n            {{- \', "id": "\' + tool_call.id + \'"}\' }}\n            {%- if not loop.last %}\n                {{- ", " }}\n            {%- else %}\n                {{- "]" + eos_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message["role"] == "assistant" %}\n        {{- " " + message["content"]|trim + eos_token}}\n    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}\n        {%- if message.content is defined and message.content.content is defined %}\n            {%- set content = message.content.content %}\n        {%- else %}\n            {%- set content = message.content %}\n        {%- endif %}\n        {{- \'[TOOL_RESULTS] {"content": \' + content|string + ", " }}\n        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}\n            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}\n        {%- endif %}\n        {{- \'"call_id": "\' + message.tool_call_id + \'"}[/TOOL_RESULTS]\' }}\n    {%- else %}\n        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}\n    {%- endif %}\n{%- endfor %}\n'

MISTRAL_SMALL = "{%- set today = strftime_now(\"%Y-%m-%d\") %}\n{%- set default_system_message = \"You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI, a French startup headquartered in Paris.\\\nYour knowledge base was last updated on 2023-10-01. The current date is \" + today + \".\\\n\\\nWhen you're not sure about some information, you say that you don't have the information and don't make up anything.\\\nIf the user's question is not clear, ambiguous, or does not provide enough context for you to accurately answer the question, you do not try to answer it right away and you rather ask the user to clarify their request (e.g. \\\"What are some good restaurants around me?\\\" => \\\"Where are you?\\\" or \\\"When is the next flight to Tokyo\\\" => \\\"Where do you travel from?\\\")\" %}\n\n{{- bos_token }}\n\n{%- if messages[0]['role'] == 'system' %}\n    {%- if messages[0]['content'] is string %}\n        {%- set system_message = messages[0]['content'] %}\n        {%- set loop_messages = messages[1:] %}\n    {%- else %}\n        {%- set system_message = messages[0]['content'][0]['text'] %}\n        {%- set loop_messages = messages[1:] %}\n    {%- endif %}\n{%- else %}\n    {%- set system_message = default_system_message %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- elif tools is not none %}\n    {%- set parallel_tool_prompt = \"You are a helpful assistant that can call tools. If you call one or more tools, format them in a single JSON array or objects, where each object is a tool call, not as separate objects outside of an array or multiple arrays. Use the format [{\\\"name\\\": tool call name, \\\"arguments\\\": tool call arguments}, additional tool calls] if you call more than one tool. If you call tools, do not attempt to interpret them or otherwise provide a response until you receive a tool call result that you can interpret for the user.\" %}\n    {%- if system_message is defined %}\n        {%- set system_message = parallel_tool_prompt + \"\\\n\\\n\" + system_message %}\n    {%- else %}\n        {%- set system_message = parallel_tool_prompt %}\n    {%- endif %}\n{%- endif %}\n{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}\n\n{%- set user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{%- set filtered_messages = [] %}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] not in [\"tool\", \"tool_results\"] and not message.get(\"tool_calls\") %}\n        {%- set filtered_messages = filtered_messages + [message] %}\n    {%- endif %}\n{%- endfor %}\n\n{%- for message in filtered_messages %}\n    {%- if (message[\"role\"] == \"user\") != (loop.index0 % 2 == 0) %}\n        {{- raise_exception(\"After the optional system message, conversation roles must alternate user/assistant/user/assistant/...\") }}\n    {%- endif %}\n{%- endfor %}\n\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS] [\" }}\n            {%- for tool in tools %}\n                {%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", \"function\": {' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n                    {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '\"' }}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + val|tojson }}\n                    {%- endif %}\n                    {%- if not loop.last %}\n                        {{- \", \" }}\n                    {%- endif %}\n                {%- endfor %}\n                {{- \"}}\" }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n                {%- else %}\n                    {{- \"]\" }}\n                {%- endif %}\n            {%- endfor %}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n        {%- endif %}\n        {%- if message['content'] is string %}\n        {{- '[INST]' + message['content'] + '[/INST]' }}\n        {%- else %}\n                {{- '[INST]' }}\n                {%- for block in message['content'] %}\n                        {%- if block['type'] == 'text' %}\n                                {{- block['text'] }}\n                        {%- elif block['type'] == 'image' or block['type'] == 'image_url' %}\n                                {{- '[IMG]' }}\n                            {%- else %}\n                                {{- raise_exception('Only text and image blocks are supported in message content!') }}\n                            {%- endif %}\n                    {%- endfor %}\n                {{- '[/INST]' }}\n            {%- endif %}\n    {%- elif message[\"role\"] == \"tool_calls\" or message.tool_calls is defined %}\n        {%- if message.tool_calls is defined %}\n            {%- set tool_calls = message.tool_calls %}\n        {%- else %}\n            {%- set tool_calls = message.content %}\n        {%- endif %}\n        {{- \"[TOOL_CALLS] [\" }}\n        {%- for tool_call in tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n            {{- out[:-1] }}\n            {%- if not tool_call.id is defined or tool_call.id|length < 9 %}\n                {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length >= 9! (1)\" + tool_call.id) }}\n            {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id[-9:] + '\"}' }}\n            {%- if not loop.last %}\n                {{- \", \" }}\n            {%- else %}\n                {{- \"]\" + eos_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message['role'] == 'assistant' %}\n        {%- if message['content'] is string %}\n            {{- message['content'] + eos_token }}\n        {%- else %}\n            {{- message['content'][0]['text'] + eos_token }}\n        {%- endif %}\n    {%- elif message[\"role\"] == \"tool_results\" or message[\"role\"] == \"tool\" %}\n        {%- if message.content is defined and message.content.content is defined %}\n            {%- set content = message.content.content %}\n        {%- else %}\n            {%- set content = message.content %}\n        {%- endif %}\n        {{- '[TOOL_RESULTS] {\"content\": ' + content|string + \", \" }}\n        {%- if not message.tool_call_id is defined or message.tool_call_id|length < 9 %}\n            {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length >= 9! (2)\" + message.tool_call_id) }}\n        {%- endif %}\n        {{- '\"call_id\": \"' + message.tool_call_id[-9:] + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n        {{- raise_exception(\"Only user and assistant roles are supported, with the exception of an initial optional system message!\") }}\n    {%- endif %}\n{%- endfor %}\n"

PHI4_MINI = "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"] %}\n{% elif tools is defined -%}\n    {%- set system_message = \"\" -%}\n{%- endif %}\n\n{%- if system_message is defined -%}\n    {{- '<|system|>' + system_message -}}\n    {%- if tools is defined -%}\n        {% for tool in tools %}\n            {{- '<|tool|>' + (tool['function'] | tojson) + '<|/tool|>' -}}\n        {% endfor %}\n        {%- if '<|tool_call|>' not in system_message -%}\n            {{- 'You are a helpful assistant with some tools.\\nTo use a tool, respond in this format: <|tool_call|>{\"name\": \"foo\", \"arguments\": {\"a\": 1}}<|/tool_call|>' -}}\n        {%- endif -%}\n    {%- endif -%}\n    {{- '<|end|>' -}}\n{%- endif -%}\n{%- for message in messages -%}\n    {%- if message['role'] == 'tool' -%}\n        {{- '<|tool_response|>' + (message['content'] | tojson) + '<|end|>' -}}\n    {%- elif message['role'] != 'system' -%}\n        {{- '<|' + message['role'] + '|>' -}}\n        {%- if message.content -%}\n            {{- message['content'] -}}\n        {%- endif -%}  \n        {%- for tool_call in message.tool_calls -%}\n            {{- '<|tool_call|>' + (tool_call['function'] | tojson) + '<|/tool_call|>' -}}\n        {%- endfor -%}\n        {{- '<|end|>' -}}\n    {%- endif -%}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n   {{- '<|assistant|>' -}}\n{%- else -%}\n   {{- eos_token -}}\n{%- endif -%}"

SMOLLM2 = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

DEEPSEEK_R1 = "{% if not add_generation_prompt is defined -%}\n  {%- set add_generation_prompt = false -%}\n{%- endif -%}\n{%- set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='') -%}\n{%- for message in messages -%}\n  {%- if message['role'] == 'system' -%}\n    {%- set ns.system_prompt = message['content'] -%}\n  {%- endif -%}\n{%- endfor -%}{{bos_token}}{{ns.system_prompt}}\n{%- for message in messages -%}\n  {%- if message['role'] == 'user' -%}\n    {%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}\n  {%- endif -%}\n  {%- if message['role'] == 'assistant' and message['tool_calls'] -%}\n    {%- set ns.is_tool = false -%}\n    {%- for tool in message['tool_calls']-%}\n      {%- if not ns.is_first -%}\n        {{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}\n        {%- set ns.is_first = true -%}\n      {%- else -%}\n        {{'\\n' + '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' + '<｜tool▁call▁end｜>'}}\n      {%- endif -%}\n    {%- endfor -%}\n    {{'<｜tool▁calls▁end｜><｜end▁of▁sentence｜>'}}\n  {%- endif -%}\n  {%- if message['role'] == 'assistant' and message['content'] is not none -%}\n    {%- if ns.is_tool -%}{{'<｜tool▁outputs▁end｜>' + message['content'] + '<｜end▁of▁sentence｜>'}}\n      {%- set ns.is_tool = false -%}\n    {%- else -%}\n      {%- set content = message['content'] -%}\n      {%- if '</think>' in content -%}\n        {%- set content = content.split('</think>')[-1] -%}\n      {%- endif -%}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}\n    {%- endif -%}\n  {%- endif -%}\n  {%- if message['role'] == 'tool' -%}\n    {%- set ns.is_tool = true -%}\n    {%- if ns.is_output_first -%}{{'<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}\n      {%- set ns.is_output_first = false -%}\n      {%- else -%}{{'\\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>'}}\n    {%- endif -%}\n  {%- endif -%}\n{%- endfor -%}\n{%- if ns.is_tool -%}{{'<｜tool▁outputs▁end｜>'}}\n{%- endif -%}\n{%- if add_generation_prompt and not ns.is_tool -%}{{'<｜Assistant｜><think>\\n'}}\n{%- endif %}"

# name, template, bos_token, eos_token, whether it renders tools
TEMPLATES = [
    ("gemma-2", GEMMA2, "<bos>", "<eos>", False),
    ("mistral-v0.3", MISTRAL_V03, "<s>", "</s>", True),
    ("mistral-small-3.1", MISTRAL_SMALL, "<s>", "</s>", True),
    ("phi-4-mini", PHI4_MINI, "<|endoftext|>", "<|endoftext|>", True),
    ("smollm2", SMOLLM2, "<|im_start|>", "<|im_end|>", False),
    ("deepseek-r1-distill", DEEPSEEK_R1, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", False),
    ("qwen2.5", QWEN25, "", "<|im_end|>", True),
    ("qwen3", QWEN3, "", "<|im_end|>", True),
    ("llama-3.1", LLAMA31, "<|begin_of_text|>", "<|eot_id|>", True),
]


def call(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


def conversations(with_tools):
    system = {"role": "system", "content": "You are terse.\nAnswer in one line. "}
    hi = {"role": "user", "content": "  Hello there!  "}
    reply = {"role": "assistant", "content": "Hi! How can I help? "}
    again = {"role": "user", "content": "Say «grüß Gott» in 日本語 🚀, and \"quote\" \\ me."}
    think = {"role": "assistant", "content": "<think>\nplanning\n</think>\n\nこんにちは"}
    out = [
        ("one_user", [hi], None),
        ("system_multi_turn", [system, hi, reply, again], None),
        ("no_system_multi_turn", [hi, reply, again], None),
        ("reasoning_history", [hi, think, again], None),
        ("ends_with_assistant", [system, hi, reply], None),
        ("not_alternating", [hi, again], None),
    ]
    if with_tools:
        ask = {"role": "user", "content": "What's the weather in Zürich?"}
        calls = {"role": "assistant", "content": None,
                 "tool_calls": [call("abcDEF123", "get_weather", {"city": "Zürich", "days": 2})]}
        result = {"role": "tool", "tool_call_id": "abcDEF123", "content": "{\"temp\": 21.5, \"sky\": \"sunny ☀\"}"}
        answer = {"role": "assistant", "content": "It is 21.5 °C and sunny."}
        out += [
            ("tools_first_turn", [system, ask], TOOLS),
            ("tools_call_and_result", [system, ask, calls, result], [WEATHER]),
            ("tools_full_exchange", [ask, calls, result, answer, {"role": "user", "content": "Thanks"}], [WEATHER]),
        ]
    return out


def render_models(apply):
    cases = []
    for name, template, bos, eos, with_tools in TEMPLATES:
        for conv_name, messages, tools in conversations(with_tools):
            for gen in (True, False):
                rendered_messages = copy.deepcopy(messages)
                for m in rendered_messages:  # vLLM's _postprocess_messages
                    for c in m.get("tool_calls", []):
                        c["function"]["arguments"] = json.loads(c["function"]["arguments"])
                case = {"template": name, "conversation": conv_name, "messages": messages, "tools": tools,
                        "add_generation_prompt": gen}
                try:
                    case["expected"] = apply(template, rendered_messages, tools, gen, bos, eos)
                except Exception as e:  # the template refused (raise_exception) or failed
                    case["error"] = f"{type(e).__name__}: {e}"
                cases.append(case)
    templates = {name: {"template": t, "bos_token": bos, "eos_token": eos} for name, t, bos, eos, _ in TEMPLATES}
    return {"templates": templates, "cases": cases}


# Unit cases: (name, template, context). Expected output comes from the same environment.
UNIT = [
    ("text_only", "plain text\n", {}),
    ("print_values", "{{ 1 }}|{{ 1.5 }}|{{ 'a' }}|{{ true }}|{{ none }}|{{ [1, 'x', none, 2.0] }}|{{ {'a': 1, 'b': [true]} }}|{{ (1, 2) | list }}", {}),
    ("string_escapes", r"""{{ 'a\'b' }}{{ "c\"d" }}{{ '\n\t\\' }}{{ '\u00e9\x41' }}{{ 'x' 'y' }}""", {}),
    ("repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'tab\\t'] }}", {}),
    ("arithmetic", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1e-5 }} {{ 3 - 1.5 }}", {}),
    ("concat_and_tilde", "{{ 'a' + 'b' }} {{ 'n' ~ 1 ~ none ~ true }} {{ [1] + [2, 3] }} {{ 'ab' * 3 }} {{ x ~ 'y' }}", {}),
    ("comparisons", "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] == [1, 2] }} {{ {'a': 1} == {'a': 1} }} {{ 1 != 2 }} {{ 2 >= 3 }}", {}),
    ("logic", "{{ 1 and 'x' }} {{ 0 or 'y' }} {{ not 0 }} {{ none or [] }} {{ 'a' if false }}|{{ 'a' if 0 else 'b' }} {{ not x is defined }}", {}),
    ("membership", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 'q' in undefined_thing }}", {}),
    ("tests", "{{ x is defined }} {{ y is undefined }} {{ n is none }} {{ 's' is string }} {{ 1 is number }} {{ true is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ {} is mapping }} {{ 's' is iterable }} {{ [] is sequence }} {{ true is boolean }} {{ true is true }} {{ 0 is false }} {{ 3 is odd }} {{ 4 is divisibleby 2 }} {{ 'a' is equalto 'a' }} {{ 1 is eq 1 }} {{ 'ab' is lower }} {{ x is not none }} {{ 2 is in [1, 2] }}", {"x": 1, "n": None}),
    ("subscripts_and_slices", "{{ s[0] }}{{ s[-1] }}{{ s[1:] }}{{ s[:-1] }}{{ s[::-1] }}{{ s[::2] }}|{{ l[1:3] }}{{ l[-2:] }}{{ l[::-1] }}{{ l[5:] }}|{{ d['k'] }}{{ d.k }}{{ l.0 }}{{ u[1:3] }}{{ u | length }}{{ u[-1] }}", {"s": "hello", "l": [1, 2, 3, 4], "d": {"k": "v"}, "u": "añb日本"}),
    ("attribute_fallbacks", "[{{ d.missing }}][{{ d['missing'] }}][{{ n.attr }}][{{ d.k.nope }}][{{ l[10] }}]{{ d.get('k') }}{{ d.get('z', 'dflt') }}{{ d.get('z') }}", {"d": {"k": "v"}, "n": None, "l": [1]}),
    ("string_methods", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ s.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b c'.split(' ', 1) }}|{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'ab'.upper() }}{{ 'AB'.lower() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'abc'.find('c') }}|{{ '-'.join(['a', 'b']) }}|{{ 'l1\nl2'.splitlines() }}", {"s": "  \u3000padded text\n "}),
    ("dict_methods", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.keys() | list }}{{ d.values() | list }}{% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "a": 2, "m": 3}}),
    ("loop_variables", "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o', 'e') }};{% endfor %}", {}),
    ("for_filter_else", "{% for x in range(10) if x is odd %}{{ x }}{% else %}none{% endfor %}|{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}", {}),
    ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("scoping", "{% set x = 1 %}{% for i in range(2) %}{% set x = 5 %}{{ x }}{% endfor %}{{ x }}{% if true %}{% set y = 2 %}{% endif %}{{ y }}{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", {}),
    ("set_forms", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (3, 4) %}{{ t[1] }}{% set block %}in {{ a }} block {% endset %}[{{ block }}]{% set up | upper %}shout{% endset %}{{ up }}", {}),
    ("macros_and_call", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', punct='?') }} {{ greet(name='Cy') }}{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}", {}),
    ("caller_sees_loop_scope", "{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% for x in ['a', 'b'] %}{% set y = x ~ x %}{% call wrap() %}{{ x }}{{ y }}{{ loop.index }}{% endcall %}{% endfor %}", {}),
    ("macro_in_loop_and_varargs", "{% for x in [1, 2] %}{% macro show(a) %}{{ a }}{{ x }}{{ varargs }}{% endmacro %}{{ show(0, 9) }};{% endfor %}", {}),
    ("filter_block_and_raw", "{% filter upper %}shout {{ 'this' }}{% endfilter %}{% raw %}{{ not rendered }}{% endraw %}", {}),
    ("filters_text", "{{ '  x  ' | trim }}|{{ 'xxyxx' | trim('x') }}|{{ 'ab' | upper }}{{ 'AB' | lower }}|{{ 'hi there' | title }}|{{ 'hI' | capitalize }}|{{ 'aXa' | replace('a', 'b') }}|{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ 'x' | center(5) }}|{{ 'one two  three' | wordcount }}|{{ '<&>' | e }}", {}),
    ("filters_values", "{{ [1, 2, 3] | length }}{{ 'abc' | count }}{{ u | length }}|{{ u | default('d') }}{{ '' | default('e', true) }}{{ none | default('f') }}|{{ 5 | string }}{{ '42' | int + 1 }}{{ 'x' | int }}{{ '2.5' | float }}{{ 3.9 | int }}|{{ [1, 2] | join(', ') }}{{ [{'n': 'a'}, {'n': 'b'}] | join('-', attribute='n') }}|{{ [3, 1] | first }}{{ [3, 1] | last }}{{ 'ab' | list }}|{{ [-1.5] | map('abs') | list }}{{ 2.567 | round(2) }}{{ [1, 2] | sum }}{{ [3, 1, 2] | max }}{{ [3, 1, 2] | min }}", {}),
    ("filters_collections", "{{ users | map(attribute='name') | list }}|{{ users | selectattr('admin') | map(attribute='name') | join }}|{{ users | rejectattr('admin') | map(attribute='name') | join }}|{{ users | selectattr('name', 'equalto', 'b') | list | length }}|{{ [1, 2, 3, 4] | select('even') | list }}{{ [1, 2, 3, 4] | reject('odd') | list }}|{{ ['b', 'A', 'a', 'B'] | unique | list }}|{{ ['b', 'C', 'a'] | sort }}{{ [3, 1, 2] | sort(reverse=true) }}|{{ users | sort(attribute='name', reverse=true) | map(attribute='name') | join }}|{{ {'b': 1, 'a': 2} | dictsort }}|{{ {'x': 1} | items | list }}|{{ [1, 2] | reverse | list }}{{ 'abc' | reverse }}", {"users": [{"name": "a", "admin": True}, {"name": "c", "admin": False}, {"name": "b"}]}),
    ("tojson", "{{ v | tojson }}|{{ v | tojson(indent=2) }}|{{ {'b': 1, 'a': [1.0, 'é\"\n']} | tojson(sort_keys=true) }}|{{ 'text' | tojson }}|{{ none | tojson }}", {"v": {"z": [1, 2.5, None, True], "é": "ü\u0001", "e": {}, "l": []}}),
    ("whitespace_control", "a  {{- ' b ' -}}  c\n  {%- if true %}\n  d\n  {%- endif %}\n{# comment #}\ne {#- c2 -#} f", {}),
    ("trim_and_lstrip_blocks", "<ul>\n    {% for x in [1, 2] %}\n    <li>{{ x }}</li>\n    {% endfor %}\n</ul>\n  {%+ if true %}kept indent{% endif %}\n", {}),
    ("trailing_newline_dropped", "line\n\n", {}),
    ("globals", "{{ range(3) | list }}{{ range(1, 7, 2) | list }}{{ range(5, 0, -2) | list }}{{ dict(a=1, b='x') }}{% set ns = namespace(a=1) %}{{ ns.a }}", {}),
    ("undefined_printing", "[{{ missing }}][{{ missing | length }}][{{ missing | default('d') }}][{% for x in missing %}{{ x }}{% endfor %}][{{ missing is defined }}][{{ 'x' if missing else 'y' }}]", {}),
    ("generation_block", "{% for m in messages %}{% generation %}{{ m }}{% endgeneration %}{% endfor %}", {"messages": ["a", "b"]}),
    ("content_parts", "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p.type }}:{{ p.text }}{% endfor %}{% endif %}{% endfor %}", {"messages": [{"content": "s"}, {"content": [{"type": "text", "text": "t"}]}]}),
    # errors: jinja2 raises; the C++ test checks the message it gives
    ("error_raise_exception", "{{ raise_exception('Roles must alternate') }}", {}),
    ("error_undefined_attribute", "{{ missing.attr }}", {}),
    ("error_add_types", "{{ 'a' + 1 }}", {}),
    ("error_unknown_filter", "{{ 1 | nosuchfilter }}", {}),
    ("error_missing_endfor", "{% for x in y %}no end", {}),
    ("error_unterminated_string", "{{ 'abc }}", {}),
    ("error_unknown_statement", "{% frobnicate %}", {}),
    ("error_call_undefined", "{{ [1].append(2) }}", {}),
    ("error_namespace_assignment", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("error_division_by_zero", "{{ 1 // 0 }}", {}),
]


def render_unit(compile_template):
    out = []
    for name, template, context in UNIT:
        case = {"name": name, "template": template, "context": context}
        try:
            case["expected"] = compile_template(template).render(**context)
        except Exception as e:
            case["error"] = f"{type(e).__name__}: {e}"
        out.append(case)
    return out


def ensure_venv(venv):
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import transformers, jinja2"], capture_output=True) \
        if python.exists() else None
    if probe is None or probe.returncode != 0:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "transformers", "jinja2"], check=True)
    return python


def main():
    if os.environ.get("BRIGADE_CHAT_FIXTURES_IN_VENV") != "1":
        venv = Path(sys.argv[sys.argv.index("--venv") + 1]) if "--venv" in sys.argv else ROOT / ".brigade" / "chat-venv"
        python = ensure_venv(venv)
        env = dict(os.environ, BRIGADE_CHAT_FIXTURES_IN_VENV="1")
        sys.exit(subprocess.run([str(python), __file__], env=env).returncode)
    import jinja2
    import transformers
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    from transformers.utils import chat_template_utils
    from transformers.utils.chat_template_utils import _compile_jinja_template

    class FixedDatetime(chat_template_utils.datetime):  # strftime_now renders 26 Jul 2024, as the C++ test's clock
        @classmethod
        def now(cls, tz=None):
            return cls(2024, 7, 26, 12, 0, 0)

    chat_template_utils.datetime = FixedDatetime

    def apply(template, messages, tools, gen, bos, eos):
        tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                      bos_token=bos or None, eos_token=eos)
        return tok.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False,
                                       add_generation_prompt=gen)

    generator = f"scripts/make_chat_template_fixtures.py (transformers {transformers.__version__}, jinja2 {jinja2.__version__})"
    OUT.mkdir(parents=True, exist_ok=True)
    models_data = {"generator": generator, **render_models(apply)}
    (OUT / "models.json").write_text(json.dumps(models_data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    unit = {"generator": generator, "cases": render_unit(_compile_jinja_template)}
    (OUT / "unit.json").write_text(json.dumps(unit, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(models_data['cases'])} model cases, {len(unit['cases'])} unit cases)")


if __name__ == "__main__":
    main()
