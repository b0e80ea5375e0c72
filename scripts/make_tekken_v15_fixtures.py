#!/usr/bin/env python3
"""Writes what mistral-common gives for a v15 tekken tokenizer (Mistral Small 4's generation: model
settings, [THINK] reasoning), for tests/models/tokenizer_tekken_v15_test.cpp.

The tokenizer is make_tekken_fixtures.py's tekken.json (tests/fixtures/tokenizers/tekken_json) with
the changes in vectors.json's "patch": config.version "v15", two more named special tokens
([MODEL_SETTINGS] and [/MODEL_SETTINGS] at the ranks given) and a model_settings_builder that takes
reasoning_effort "none" (the default) or "high". The test applies the same patch (so the 130 KB file
is not stored twice).

  tests/fixtures/tokenizers/tekken_v15/chat_template.jinja
      the template mistral-common writes for that file (convert_tokenizer_to_chat_template), as
      Mistral ships one beside tekken.json: it renders [MODEL_SETTINGS]{"reasoning_effort": ...}
      [/MODEL_SETTINGS] and refuses efforts the builder does not list.
  tests/fixtures/tokenizers/tekken_v15/vectors.json
      patch; chats: messages, reasoning_effort (null: unset), and MistralTokenizer.
      encode_chat_completion's text and ids (vLLM's tokenizer_mode mistral encodes so), or
      refused: true where mistral-common raises (an effort the model does not take);
      reasoning_chats: histories whose assistant turns carry their reasoning as a client sends it
      back (reasoning_content, or vLLM's newer reasoning), and mistral-common's text and ids for
      the same turns given as AssistantMessage(content=[ThinkChunk, TextChunk]) ([THINK]..[/THINK]
      before the answer), which the template's reasoning handling must reproduce.

Run from anywhere: python3 scripts/make_tekken_v15_fixtures.py (it re-runs itself in
.brigade/fixtures-venv; make_tekken_fixtures.py installs mistral-common there). The output is
committed; CI never runs this.
"""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402

BASE = ROOT / "tests" / "fixtures" / "tokenizers" / "tekken_json" / "tekken.json"
OUT = ROOT / "tests" / "fixtures" / "tokenizers" / "tekken_v15"

PATCH = {
    "version": "v15",
    "names": {"36": "[MODEL_SETTINGS]", "37": "[/MODEL_SETTINGS]"},
    "model_settings_builder": {"reasoning_effort": {"type": "enum", "accepts_none": True, "default": "none",
                                                    "values": ["none", "high"]}},
}

CHATS = [
    ([("user", "Hello!")], None),
    ([("user", "Hello!")], "none"),
    ([("user", "Hello!")], "high"),
    ([("system", "Be brief."), ("user", "What is 2+2?")], "high"),
    ([("system", "Réponds en français."), ("user", "Bonjour"), ("assistant", "Salut !"), ("user", "Et 2+2 ?")], None),
    ([("user", "a\n\nb  c"), ("assistant", "d"), ("user", "e")], "high"),
    ([("user", "Hello!")], "medium"),
    ([("user", "Hello!")], "low"),
]

# (messages as a client sends them, reasoning_effort): an assistant turn's reasoning in
# reasoning_content or reasoning.
REASONING_CHATS = [
    ([{"role": "user", "content": "What is 2+2?"},
      {"role": "assistant", "content": "4", "reasoning_content": "Two plus two: four."},
      {"role": "user", "content": "And 3+3?"}], "high"),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Bonjour"},
      {"role": "assistant", "content": "Salut !", "reasoning": "Réponds «poliment».\n"},
      {"role": "user", "content": "Et 2+2 ?"}], None),
]


def patched(base):
    j = json.loads(base.read_text())
    j["config"]["version"] = PATCH["version"]
    for s in j["special_tokens"]:
        if str(s["rank"]) in PATCH["names"]:
            s["token_str"] = PATCH["names"][str(s["rank"])]
    j["model_settings_builder"] = PATCH["model_settings_builder"]
    return j


def main():
    ensure_venv(__file__)
    from mistral_common.exceptions import InvalidRequestException
    from mistral_common.integrations.chat_templates.chat_templates import convert_tokenizer_to_chat_template
    from mistral_common.protocol.instruct.chunk import TextChunk, ThinkChunk
    from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    kinds = {"system": SystemMessage, "user": UserMessage, "assistant": AssistantMessage}
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "tekken.json"
        path.write_text(json.dumps(patched(BASE), ensure_ascii=False))
        tok = MistralTokenizer.from_file(str(path))
        (OUT / "chat_template.jinja").write_text(convert_tokenizer_to_chat_template(str(path)))
        chats = []
        for messages, effort in CHATS:
            case = {"messages": [{"role": r, "content": c} for r, c in messages], "reasoning_effort": effort}
            try:
                r = tok.encode_chat_completion(ChatCompletionRequest(
                    messages=[kinds[role](content=c) for role, c in messages], reasoning_effort=effort))
                case.update({"text": r.text, "ids": r.tokens})
            except InvalidRequestException as e:
                case.update({"refused": True, "error": str(e)})
            chats.append(case)
        reasoning_chats = []
        for messages, effort in REASONING_CHATS:
            turns = []
            for m in messages:
                reasoning = m.get("reasoning", m.get("reasoning_content"))
                if m["role"] == "assistant" and reasoning is not None:
                    turns.append(AssistantMessage(content=[ThinkChunk(thinking=reasoning), TextChunk(text=m["content"])]))
                else:
                    turns.append(kinds[m["role"]](content=m["content"]))
            r = tok.encode_chat_completion(ChatCompletionRequest(messages=turns, reasoning_effort=effort))
            reasoning_chats.append({"messages": messages, "reasoning_effort": effort, "text": r.text, "ids": r.tokens})
    vectors = {"generator": "mistral-common " + __import__("mistral_common").__version__ +
               " MistralTokenizer, scripts/make_tekken_v15_fixtures.py", "patch": PATCH, "chats": chats,
               "reasoning_chats": reasoning_chats}
    (OUT / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, indent=1) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT} ({len(chats)} chats, {total} bytes)")


if __name__ == "__main__":
    main()
