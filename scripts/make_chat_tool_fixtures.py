#!/usr/bin/env python3
"""Renders fixed tool-calling conversations with Hugging Face `transformers`' apply_chat_template
(tools=...) and the real Jinja chat templates of Qwen2.5-Instruct and Llama-3.1-Instruct, for
tests/models/chat_template_tools_test.cpp, which compares brigade's rendering byte for byte.

The templates are copied below as data from the models' tokenizer_config.json "chat_template"
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

QWEN25 = "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- messages[0]['content'] }}\n    {%- else %}\n        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\" and not message.tool_calls) %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- elif message.role == \"assistant\" %}\n        {{- '<|im_start|>' + message.role }}\n        {%- if message.content %}\n            {{- '\\n' + message.content }}\n        {%- endif %}\n        {%- for tool_call in message.tool_calls %}\n            {%- if tool_call.function is defined %}\n                {%- set tool_call = tool_call.function %}\n            {%- endif %}\n            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n            {{- tool_call.name }}\n            {{- '\", \"arguments\": ' }}\n            {{- tool_call.arguments | tojson }}\n            {{- '}\\n</tool_call>' }}\n        {%- endfor %}\n        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}\n        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n        {{- message.content }}\n        {{- '\\n</tool_response>' }}\n        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"

# Qwen/Qwen3-4B-Thinking-2507's template: with tools and no system message its system turn is
# the tools block alone, which is brigade's chatml rendering; its generation prompt opens a
# <think> block, so its cases render without one (and end with a user turn, where its reasoning
# handling does not apply).
QWEN3 = "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0].role == 'system' %}\n        {{- messages[0].content + '\\n\\n' }}\n    {%- endif %}\n    {{- \"# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0].role == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n{%- for message in messages[::-1] %}\n    {%- set index = (messages|length - 1) - loop.index0 %}\n    {%- if ns.multi_step_tool and message.role == \"user\" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}\n        {%- set ns.multi_step_tool = false %}\n        {%- set ns.last_query_index = index %}\n    {%- endif %}\n{%- endfor %}\n{%- for message in messages %}\n    {%- if message.content is string %}\n        {%- set content = message.content %}\n    {%- else %}\n        {%- set content = '' %}\n    {%- endif %}\n    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}\n    {%- elif message.role == \"assistant\" %}\n        {%- set reasoning_content = '' %}\n        {%- if message.reasoning_content is string %}\n            {%- set reasoning_content = message.reasoning_content %}\n        {%- else %}\n            {%- if '</think>' in content %}\n                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n            {%- endif %}\n        {%- endif %}\n        {%- if loop.index0 > ns.last_query_index %}\n            {%- if loop.last or (not loop.last and reasoning_content) %}\n                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}\n            {%- else %}\n                {{- '<|im_start|>' + message.role + '\\n' + content }}\n            {%- endif %}\n        {%- else %}\n            {{- '<|im_start|>' + message.role + '\\n' + content }}\n        {%- endif %}\n        {%- if message.tool_calls %}\n            {%- for tool_call in message.tool_calls %}\n                {%- if (loop.first and content) or (not loop.first) %}\n                    {{- '\\n' }}\n                {%- endif %}\n                {%- if tool_call.function %}\n                    {%- set tool_call = tool_call.function %}\n                {%- endif %}\n                {{- '<tool_call>\\n{\"name\": \"' }}\n                {{- tool_call.name }}\n                {{- '\", \"arguments\": ' }}\n                {%- if tool_call.arguments is string %}\n                    {{- tool_call.arguments }}\n                {%- else %}\n                    {{- tool_call.arguments | tojson }}\n                {%- endif %}\n                {{- '}\\n</tool_call>' }}\n            {%- endfor %}\n        {%- endif %}\n        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == \"tool\" %}\n        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n        {{- content }}\n        {{- '\\n</tool_response>' }}\n        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}"

LLAMA31 = "{{- bos_token }}\n{%- if custom_tools is defined %}\n    {%- set tools = custom_tools %}\n{%- endif %}\n{%- if not tools_in_user_message is defined %}\n    {%- set tools_in_user_message = true %}\n{%- endif %}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n\n{#- This block extracts the system message, so we can slot it into the right place. #}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n\n{#- System message + builtin tools #}\n{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{%- if builtin_tools is defined or tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n{%- endif %}\n{%- if builtin_tools is defined %}\n    {{- \"Tools: \" + builtin_tools | reject('equalto', 'code_interpreter') | join(\", \") + \"\\n\\n\"}}\n{%- endif %}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{%- if tools is not none and not tools_in_user_message %}\n    {{- \"You have access to the following functions. To call a function, please respond with JSON for a function call.\" }}\n    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n{%- endif %}\n{{- system_message }}\n{{- \"<|eot_id|>\" }}\n\n{#- Custom tools are passed in a user message with some extra guidance #}\n{%- if tools_in_user_message and not tools is none %}\n    {#- Extract the first user message so we can plug it in here #}\n    {%- if messages | length != 0 %}\n        {%- set first_user_message = messages[0]['content']|trim %}\n        {%- set messages = messages[1:] %}\n    {%- else %}\n        {{- raise_exception(\"Cannot put tools in the first user message when there's no first user message!\") }}\n{%- endif %}\n    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.' }}\n    {{- \"Do not use variables.\\n\\n\" }}\n    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n    {{- first_user_message + \"<|eot_id|>\"}}\n{%- endif %}\n\n{%- for message in messages %}\n    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n    {%- elif 'tool_calls' in message %}\n        {%- if not message.tool_calls|length == 1 %}\n            {{- raise_exception(\"This model only supports single tool-calls at once!\") }}\n        {%- endif %}\n        {%- set tool_call = message.tool_calls[0].function %}\n        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}\n            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n            {{- \"<|python_tag|>\" + tool_call.name + \".call(\" }}\n            {%- for arg_name, arg_val in tool_call.arguments | items %}\n                {{- arg_name + '=\"' + arg_val + '\"' }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n                {%- endif %}\n                {%- endfor %}\n            {{- \")\" }}\n        {%- else  %}\n            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n            {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n            {{- '\"parameters\": ' }}\n            {{- tool_call.arguments | tojson }}\n            {{- \"}\" }}\n        {%- endif %}\n        {%- if builtin_tools is defined %}\n            {#- This means we're in ipython mode #}\n            {{- \"<|eom_id|>\" }}\n        {%- else %}\n            {{- \"<|eot_id|>\" }}\n        {%- endif %}\n    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n        {%- if message.content is mapping or message.content is iterable %}\n            {{- message.content | tojson }}\n        {%- else %}\n            {{- message.content }}\n        {%- endif %}\n        {{- \"<|eot_id|>\" }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n"

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
