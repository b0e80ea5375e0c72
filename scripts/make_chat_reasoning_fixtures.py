#!/usr/bin/env python3
"""Reference renderings of chat histories whose assistant turns carry their reasoning
(`reasoning_content`, or vLLM's newer `reasoning`), made by Hugging Face transformers'
apply_chat_template with the real chat templates that render past reasoning, for
tests/models/chat_reasoning_test.cpp, which compares brigade's Jinja rendering (and the built-in
harmony rendering) byte for byte.

The messages are stored as an OpenAI client sends them. Before rendering they are turned into
what vLLM hands the template (chat_utils' _parse_chat_message_content): an assistant message's
reasoning (`reasoning` when given, else `reasoning_content`) set as both `reasoning` and
`reasoning_content`, the call arguments parsed (_postprocess_messages). gpt-oss's template reads
the same text as `thinking`, which brigade sets too (vLLM renders gpt-oss through openai_harmony
instead of the template), so the rendered messages carry it as well.

Templates (byte for byte as the models ship them; tests/fixtures/chat_templates/templates/ or
models/chat_templates/, see make_chat_template_fixtures.py for the older ones):
  qwen3              Qwen/Qwen3-4B-Thinking-2507 (models/chat_templates/qwen3.jinja)
  glm-4.6            zai-org/GLM-4.6 (GLM-4.5's template renders reasoning_content the same way)
  deepseek-v3.2      llama.cpp models/templates/deepseek-ai-DeepSeek-V3.2.jinja, rendered with
                     thinking=True (without it the template drops all reasoning)
  kimi-k2-thinking   llama.cpp models/templates/Kimi-K2-Thinking.jinja (moonshotai/Kimi-K2-Thinking):
                     it renders reasoning only on call turns, whose list.append transformers'
                     sandbox refuses (so do brigade and vLLM, which renders through transformers)
  kimi-k3            llama.cpp models/templates/Kimi-K3.jinja
  minimax-m2         llama.cpp models/templates/MiniMax-M2.jinja (MiniMaxAI/MiniMax-M2)
  gpt-oss            openai/gpt-oss-120b (llama.cpp models/templates copy)
strftime_now is pinned to 2024-07-26 (the C++ test passes the same clock).

Writes tests/fixtures/chat_templates/reasoning.json. Run: python3
scripts/make_chat_reasoning_fixtures.py (re-runs itself in .brigade/fixtures-venv, which has
transformers). The output is committed; CI never runs this.
"""
import copy
import importlib.util
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "chat_templates" / "reasoning.json"

_spec = importlib.util.spec_from_file_location("tool_fixtures", Path(__file__).parent / "make_chat_tool_fixtures.py")
_tools = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tools)
WEATHER = _tools.WEATHER

# Template variables (vLLM's chat_template_kwargs) a template needs to render reasoning at all.
TEMPLATE_KWARGS = {"deepseek-v3.2": {"thinking": True}}

# name, bos_token, eos_token
TEMPLATES = [
    ("qwen3", "", "<|im_end|>"),
    ("glm-4.6", "", "<|endoftext|>"),
    ("deepseek-v3.2", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    ("kimi-k2-thinking", "", "<|im_end|>"),
    ("kimi-k3", "", "<|im_end|>"),
    ("minimax-m2", "]~!b[", "[e~["),
    ("gpt-oss", "<|startoftext|>", "<|return|>"),
]


def call(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


def conversations():
    """(name, messages, tools, add_generation_prompt)."""
    ask = {"role": "user", "content": "What is 2+2?"}
    answered = {"role": "assistant", "content": "4", "reasoning_content": "2 plus 2 is 4; say it plainly."}
    again = {"role": "user", "content": "And the weather in Zürich?"}
    calling = {"role": "assistant", "content": None, "reasoning_content": "I should call get_weather for «Zürich».\n",
               "tool_calls": [call("call_1", "get_weather", {"city": "Zürich"})]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.5}"}
    newer = dict(calling, reasoning="The newer field: get_weather it is.")
    del newer["reasoning_content"]
    both = dict(calling, reasoning="reasoning wins over reasoning_content")
    final = {"role": "assistant", "content": "It is 21.5 °C.", "reasoning_content": "  Round it? No: keep 21.5.  "}
    return [
        # Reasoning before the last user message: most templates drop it.
        ("earlier_answer", [ask, answered, again], None, True),
        # A turn after the last user message (calls then their result): rendered.
        ("call_after_last_user", [ask, answered, again, calling, result], [WEATHER], True),
        ("call_reasoning_field", [again, newer, result], [WEATHER], True),
        ("call_both_fields", [again, both, result], [WEATHER], True),
        # The final answer of a finished conversation, without the generation prompt.
        ("final_answer", [again, calling, result, final], [WEATHER], False),
        # Reasoning given as "" is still given: templates that test `is string` skip the <think>
        # split of the content.
        ("empty_reasoning", [ask, {"role": "assistant", "content": "<think>\nold\n</think>\n\n4",
                                   "reasoning_content": ""}], None, False),
    ]


def as_vllm_passes(messages):
    out = copy.deepcopy(messages)
    for m in out:
        if m["role"] != "assistant":
            continue
        reasoning = m.pop("reasoning", None)
        older = m.pop("reasoning_content", None)
        value = reasoning if reasoning is not None else older
        if value is not None:
            m["reasoning"] = m["reasoning_content"] = m["thinking"] = value
        for c in m.get("tool_calls", []):
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def main():
    ensure_venv(__file__)
    import jinja2
    import transformers
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast
    from transformers.utils import chat_template_utils

    class FixedDatetime(chat_template_utils.datetime):  # strftime_now renders 2024-07-26
        @classmethod
        def now(cls, tz=None):
            return cls(2024, 7, 26, 12, 0, 0)

    chat_template_utils.datetime = FixedDatetime
    templates, cases = {}, []
    for name, bos, eos in TEMPLATES:
        source = _tools.read_template(name)
        templates[name] = {"template": source, "bos_token": bos, "eos_token": eos}
        tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                      bos_token=bos or None, eos_token=eos)
        for conv, messages, tools, gen in conversations():
            kwargs = TEMPLATE_KWARGS.get(name, {})
            case = {"template": name, "conversation": conv, "messages": messages, "tools": tools,
                    "add_generation_prompt": gen}
            if kwargs:
                case["template_kwargs"] = kwargs
            try:
                case["expected"] = tok.apply_chat_template(as_vllm_passes(messages), tools=tools, chat_template=source,
                                                           tokenize=False, add_generation_prompt=gen, **kwargs)
            except Exception as e:  # the template refused (raise_exception)
                case["error"] = f"{type(e).__name__}: {e}"
            cases.append(case)
    data = {"generator": f"scripts/make_chat_reasoning_fixtures.py (transformers {transformers.__version__}, "
                         f"jinja2 {jinja2.__version__})", "templates": templates, "cases": cases}
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(cases)} cases, {OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
