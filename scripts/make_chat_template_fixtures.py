#!/usr/bin/env python3
"""Reference renderings for brigade's Jinja interpreter (models/jinja_template.h), made by the real
thing: Hugging Face `transformers`' apply_chat_template (jinja2 in transformers' own sandboxed
environment: trim_blocks, lstrip_blocks, loopcontrols, its tojson / raise_exception /
strftime_now) for tests/models/jinja_chat_test.cpp and tests/models/jinja_template_test.cpp,
which compare byte for byte.

Two parts, written to tests/fixtures/chat_templates/:
  models.json  real chat templates of popular models (models/chat_templates/*.jinja, the ones
               `brigade make-model` writes, and tests/fixtures/chat_templates/templates/*.jinja:
               copies of the files, as there is no Hub access here) rendered for several
               conversations each: system or not, multi-turn, add_generation_prompt on and off,
               tools with tool calls and results where the template has them, unicode, and
               conversations a template refuses (raise_exception); and conversations ending in
               an assistant reply rendered with continue_final_message (cut after its text).
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
  qwen2.5, qwen3, llama-3.1: sources named in scripts/make_chat_tool_fixtures.py
  llama-2       meta-llama/Llama-2-13b-chat-hf (the same for 7b/70b)
  llama-3.2     meta-llama/Llama-3.2-3B-Instruct (llama.cpp models/templates copy; its date
                header comes from strftime_now)
  deepseek-v3.1 deepseek-ai/DeepSeek-V3.1 (llama.cpp models/templates copy)
  glm-4.6       zai-org/GLM-4.6 (llama.cpp models/templates copy)
  kimi-k2       moonshotai/Kimi-K2-Instruct (llama.cpp models/templates copy)
  command-r7b   CohereForAI/c4ai-command-r7b-12-2024, its tool_use template (llama.cpp copy)
  gpt-oss       openai/gpt-oss-120b (the same as gpt-oss-20b; llama.cpp models/templates copy):
                harmony, rendered with its default reasoning_effort (medium)

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
TOOLS, WEATHER = _tools.TOOLS, _tools.WEATHER

# name, template, bos_token, eos_token, whether it renders tools
TEMPLATES = [(name, _tools.read_template(name), bos, eos, tools) for name, bos, eos, tools in [
    ("gemma-2", "<bos>", "<eos>", False),
    ("mistral-v0.3", "<s>", "</s>", True),
    ("mistral-small-3.1", "<s>", "</s>", True),
    ("phi-4-mini", "<|endoftext|>", "<|endoftext|>", True),
    ("smollm2", "<|im_start|>", "<|im_end|>", False),
    ("deepseek-r1-distill", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", False),
    ("qwen2.5", "", "<|im_end|>", True),
    ("qwen3", "", "<|im_end|>", True),
    ("llama-2", "<s>", "</s>", False),
    ("llama-3.1", "<|begin_of_text|>", "<|eot_id|>", True),
    ("llama-3.2", "<|begin_of_text|>", "<|eot_id|>", True),
    ("deepseek-v3.1", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", False),
    ("glm-4.6", "", "<|endoftext|>", True),
    ("kimi-k2", "", "<|im_end|>", True),
    ("command-r7b", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>", True),
    ("gpt-oss", "<|startoftext|>", "<|return|>", True),
]]


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
        # Parallel calls with text before them, their results in order (ids of Mistral's 9 characters).
        two = {"role": "assistant", "content": "Checking both.",
               "tool_calls": [call("abcDEF123", "get_weather", {"city": "Zürich", "unit": "celsius"}),
                              call("XyZ987wvu", "search_docs", {"query": "föhn", "score": 0.75, "filters": {}})]}
        result2 = {"role": "tool", "tool_call_id": "XyZ987wvu", "content": "no \"föhn\" today\n"}
        out += [
            ("tools_first_turn", [system, ask], TOOLS),
            ("tools_call_and_result", [system, ask, calls, result], [WEATHER]),
            ("tools_full_exchange", [ask, calls, result, answer, {"role": "user", "content": "Thanks"}], [WEATHER]),
            ("tools_parallel_calls", [ask, two, result, result2, answer, {"role": "user", "content": "Thanks"}], TOOLS),
        ]
    return out


# Template variables a request may pass (vLLM's chat_template_kwargs), per template: each is
# rendered over every conversation with the generation prompt, beside the plain cases.
TEMPLATE_KWARGS = {
    "glm-4.6": [{"enable_thinking": False}],
    "deepseek-v3.1": [{"thinking": True}],
    "llama-3.1": [{"tools_in_user_message": False}, {"date_string": "04 Jul 2025"}],
    "gpt-oss": [{"reasoning_effort": "high"}, {"model_identity": "You are a test model."}],
    # vLLM's `documents` request field reaches the template as transformers' documents argument.
    "command-r7b": [{"documents": [{"title": "Tall penguins", "text": "Emperor penguins are the tallest."},
                                   {"title": "Penguin «habitats»", "text": "Emperor penguins only live in Antarctica.\n"}]}],
}


def render_models(apply):
    cases = []
    for name, template, bos, eos, with_tools in TEMPLATES:
        for conv_name, messages, tools in conversations(with_tools):
            for gen, kwargs in [(True, {}), (False, {})] + [(True, k) for k in TEMPLATE_KWARGS.get(name, [])]:
                rendered_messages = copy.deepcopy(messages)
                for m in rendered_messages:  # vLLM's _postprocess_messages
                    for c in m.get("tool_calls", []):
                        c["function"]["arguments"] = json.loads(c["function"]["arguments"])
                case = {"template": name, "conversation": conv_name, "messages": messages, "tools": tools,
                        "add_generation_prompt": gen}
                if kwargs:
                    case["template_kwargs"] = kwargs
                try:
                    case["expected"] = apply(template, rendered_messages, tools, gen, bos, eos, kwargs)
                except Exception as e:  # the template refused (raise_exception) or failed
                    case["error"] = f"{type(e).__name__}: {e}"
                cases.append(case)
    # continue_final_message (vLLM's chat field): rendered without the generation prompt and cut
    # after the final message's text; a reply kept as is, one with trailing whitespace (templates
    # that trim it), one with leading whitespace.
    for name, template, bos, eos, _ in TEMPLATES:
        for conv_name, messages in continued_conversations():
            case = {"template": name, "conversation": conv_name, "messages": messages, "tools": None,
                    "add_generation_prompt": False, "continue_final_message": True}
            try:
                case["expected"] = apply(template, copy.deepcopy(messages), None, False, bos, eos, {}, True)
            except Exception as e:
                case["error"] = f"{type(e).__name__}: {e}"
            cases.append(case)
    templates = {name: {"template": t, "bos_token": bos, "eos_token": eos} for name, t, bos, eos, _ in TEMPLATES}
    return {"templates": templates, "cases": cases}


def continued_conversations():
    hi = {"role": "user", "content": "  Hello there!  "}
    return [
        ("continue_reply", [hi, {"role": "assistant", "content": "Sure, the answer is"}]),
        ("continue_trailing_space", [{"role": "system", "content": "Be brief."}, hi,
                                     {"role": "assistant", "content": "Let me think. "}]),
        ("continue_leading_space", [hi, {"role": "assistant", "content": "  Well,\nfirst"}]),
    ]


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


def main():
    if os.environ.get("BRIGADE_CHAT_FIXTURES_IN_VENV") != "1":
        venv = Path(sys.argv[sys.argv.index("--venv") + 1]) if "--venv" in sys.argv else ROOT / ".brigade" / "chat-venv"
        python = _tools.ensure_venv(venv)
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

    def apply(template, messages, tools, gen, bos, eos, kwargs=None, continue_final=False):
        tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                      bos_token=bos or None, eos_token=eos)
        return tok.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False,
                                       add_generation_prompt=gen, continue_final_message=continue_final,
                                       **(kwargs or {}))

    generator = f"scripts/make_chat_template_fixtures.py (transformers {transformers.__version__}, jinja2 {jinja2.__version__})"
    OUT.mkdir(parents=True, exist_ok=True)
    models_data = {"generator": generator, **render_models(apply)}
    (OUT / "models.json").write_text(json.dumps(models_data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    unit = {"generator": generator, "cases": render_unit(_compile_jinja_template)}
    (OUT / "unit.json").write_text(json.dumps(unit, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(models_data['cases'])} model cases, {len(unit['cases'])} unit cases)")


if __name__ == "__main__":
    main()
