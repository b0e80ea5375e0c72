#!/usr/bin/env python3
"""Writes a small Mistral tekken.json (mistral-common's Tekkenizer format) and the ids and decodes
mistral-common's own Tekkenizer gives for varied texts, for tests/models/tokenizer_tekken_test.cpp.

The vocabulary is make_tiktoken_fixtures.py's: byte-level BPE ranks learned with Hugging Face
`tokenizers` over its multilingual corpus (no download), a few long tokens swapped below their
parts. The file is written as Mistral's v7+ files are: config {pattern (the real tekken pattern),
num_vocab_tokens, default_vocab_size, default_num_special_tokens, version "v13"}, vocab
[{rank, token_bytes, token_str}], special_tokens [{rank, token_str, is_control}]. It names fewer
special tokens than default_num_special_tokens (Tekkenizer adds <SPECIAL_{id}> fillers), and
default_vocab_size keeps fewer ranks than the vocab holds (Tekkenizer cuts the rest).

  tests/fixtures/tokenizers/tekken_json/tekken.json
  tests/fixtures/tokenizers/tekken_json/vectors.json
      n_special, vocab_size, bos/eos ids, specials (a few names -> ids), and per text:
      ids (Tekkenizer.encode(text, bos=False, eos=False)), ids_bos (bos=True), decoded
      (decode(ids_bos), SpecialTokenPolicy.IGNORE, its default) and decoded_keep (KEEP).
      special_cases: texts holding special-token strings. Tekkenizer.encode takes those as plain
      text ("plain_ids"); "ids" are what brigade gives (the tokenizer.json transformers converts
      from a tekken.json does the same): the special tokens matched in the text, leftmost then
      longest, and mistral-common's encode of the text between.
      v3: the same file without special_tokens and with version "v3" (Mistral Nemo's layout):
      the special ids Tekkenizer gives then (its fixed list, then fillers).
      chats: conversations (role, content) and what mistral-common's MistralTokenizer gives for
      them (encode_chat_completion: the prompt's text and ids, control tokens inserted by id), and
      matched_ids: the text's special-token strings matched as brigade does (equal to ids unless
      a message types one, as the third chat's "[INST]").
  tests/fixtures/tokenizers/tekken_json/chat_template.jinja
      the template mistral-common writes for this file (convert_tokenizer_to_chat_template), as
      Mistral's repositories ship one beside tekken.json.
      real: when mistral-common ships tekken_240911.json (Pixtral / Mistral Nemo's v3 file), its
      size and the ids Tekkenizer gives for a few texts (the test reads the file from the fixtures
      virtual environment and skips when it is absent).

Run from anywhere: python3 scripts/make_tekken_fixtures.py. It uses make_fixtures.py's virtual
environment and installs mistral-common into it when missing. The output is committed; CI never
runs this.
"""
import base64
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, VENV, ensure_venv  # noqa: E402
import make_tiktoken_fixtures as tiktoken_fixtures  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "tokenizers" / "tekken_json"
N_RANKS = 1600        # ranks learned (the vocab's length, config.num_vocab_tokens)
N_SPECIAL = 300       # config.default_num_special_tokens
N_NAMED = 200         # entries of special_tokens; Tekkenizer names the other 100
N_KEEP = 1500         # ranks kept: default_vocab_size = N_SPECIAL + N_KEEP

# mistral-common's tekken pattern (every Mistral tekken.json's config.pattern; models/tokenizer_gguf.cpp's kTekkenPattern).
PATTERN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
           r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}|"
           r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Ids 0..19: Tekkenizer's fixed list (every tekken file starts so); later ones at the ranks
# Mistral's v11/v13 files give them (audio, tool-call arguments, reasoning).
SPECIAL_NAMES = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                 "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]",
                 "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]"]
LATER_SPECIALS = {24: "[AUDIO]", 25: "[BEGIN_AUDIO]", 32: "[ARGS]", 33: "[CALL_ID]", 34: "[THINK]", 35: "[/THINK]"}

EXTRA_TEXTS = [
    "Mistral Small 3.2 is a 24B model; Devstral writes code and Magistral reasons.",
    "Bonjour, je m'appelle Claude. Où est la gare ? Très bien, merci !",
    "path/to/file.txt and a/b/c//d and http://x.y/z/",
    "x = [1, 2, 3]\ny = {\"k\": (4, 5)}\n\nprint(x / y)  # /comment\n",
    "Numbers 1234567 and 3.14 and 1e-5 are split one digit at a time.",
    "ÀÉÎÕÜ àéîõü ÇçÑñ ÆæØøÅå ẞß",
    "CamelCaseWord HTTPServer getHTTPResponseCode iPhone eBay",
    "a/\nb//\r\nc///\n",
    "INST", "[/INST ]", "<s >", "SPECIAL_250",
]


def special_tokens():
    names = list(SPECIAL_NAMES) + [f"<SPECIAL_{i}>" for i in range(len(SPECIAL_NAMES), N_NAMED)]
    for rank, name in LATER_SPECIALS.items():
        names[rank] = name
    return [{"rank": i, "token_str": n, "is_control": True} for i, n in enumerate(names)]


def tekken_json(ordered, specials, version):
    vocab = []
    for token, rank in ordered:
        try:
            token_str = token.decode("utf-8")
        except UnicodeDecodeError:
            token_str = None  # as Mistral's files write a token that is not whole UTF-8
        vocab.append({"rank": rank, "token_bytes": base64.b64encode(token).decode(), "token_str": token_str})
    out = {"config": {"pattern": PATTERN, "num_vocab_tokens": len(vocab), "default_vocab_size": N_SPECIAL + N_KEEP,
                      "default_num_special_tokens": N_SPECIAL, "version": version},
           "vocab": vocab}
    if specials is not None:
        out["special_tokens"] = specials
    return out


def split_specials(text, names):
    """`text` cut at special-token strings, leftmost then longest: [(segment, special id or None)]."""
    by_length = sorted(names.items(), key=lambda kv: -len(kv[0]))
    out, start, i = [], 0, 0
    while i < len(text):
        hit = next(((n, r) for n, r in by_length if text.startswith(n, i)), None)
        if hit is None:
            i += 1
            continue
        if i > start:
            out.append((text[start:i], None))
        out.append((hit[0], hit[1]))
        i = start = i + len(hit[0])
    if start < len(text):
        out.append((text[start:], None))
    return out


def case(tok, text):
    from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy
    ids = tok.encode(text, bos=False, eos=False)
    ids_bos = tok.encode(text, bos=True, eos=False)
    return {"text": text, "ids": ids, "ids_bos": ids_bos, "decoded": tok.decode(ids_bos),
            "decoded_keep": tok.decode(ids_bos, special_token_policy=SpecialTokenPolicy.KEEP)}


def special_case(tok, names, text):
    ids = []
    for segment, rank in split_specials(text, names):
        ids += [rank] if rank is not None else tok.encode(segment, bos=False, eos=False)
    return {"text": text, "ids": ids, "plain_ids": tok.encode(text, bos=False, eos=False)}


def special_texts():
    return ["[INST]hello[/INST]", "<s>[INST] What is 2+2?[/INST]4</s>", "[SYSTEM_PROMPT]be brief[/SYSTEM_PROMPT]",
            "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", "[THINK]hmm[/THINK]answer", "[IMG][IMG_BREAK][IMG_END]",
            "a<SPECIAL_150>b<SPECIAL_250>c", "[INST [INST]] [/INST", "中文[INST]English[/INST]\n", "[INST]", "<s>",
            "<SPECIAL_250>"]


CHATS = [
    [("user", "Hello!")],
    [("system", "Be brief."), ("user", "What is 2+2?")],
    [("system", "Réponds en français."), ("user", "Bonjour"), ("assistant", "Salut !"), ("user", "中文 [INST] ok?")],
    [("user", "a\n\nb  c"), ("assistant", "d"), ("user", "e")],
]


def chat_cases(path, tekken, names):
    from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    kinds = {"system": SystemMessage, "user": UserMessage, "assistant": AssistantMessage}
    tok = MistralTokenizer.from_file(path)
    out = []
    for chat in CHATS:
        r = tok.encode_chat_completion(ChatCompletionRequest(messages=[kinds[role](content=c) for role, c in chat]))
        matched = special_case(tekken, names, r.text)["ids"]
        typed = any(n in c for _, c in chat for n in names)
        assert typed or matched == r.tokens, (chat, matched, r.tokens)
        out.append({"messages": [{"role": role, "content": c} for role, c in chat], "text": r.text, "ids": r.tokens,
                    "matched_ids": matched})
    return out


def load(path):
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    return Tekkenizer.from_file(path)


def real_cases():
    import mistral_common
    path = Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    if not path.exists():
        return None
    tok = load(path)
    texts = ["Hello, world!", "The quick brown fox jumps over the lazy dog.", "人工智能正在改变世界。",
             "def f(x):\n    return x**2\n", "Привет, мир! Café naïve 🦙"]
    return {"file": "mistral_common/data/tekken_240911.json", "bytes": path.stat().st_size,
            "vocab_size": tok.n_words, "cases": [{"text": t, "ids_bos": tok.encode(t, bos=True, eos=False)} for t in texts]}


def main():
    ensure_venv(__file__)
    try:
        import mistral_common  # noqa: F401
    except ImportError:
        subprocess.check_call([str(VENV / "bin" / "python"), "-m", "pip", "install", "mistral-common"])
    tiktoken_fixtures.VOCAB_SIZE = N_RANKS
    ranks = tiktoken_fixtures.learn_ranks()
    tiktoken_fixtures.invert(ranks)
    assert len(ranks) >= N_KEEP + 50, len(ranks)
    # Tekkenizer wants ranks 0..255 to be the bytes in order; the merges keep their order after.
    merged = [t for t in sorted(ranks, key=ranks.get) if len(t) > 1]
    ordered = [(t, r) for r, t in enumerate([bytes([b]) for b in range(256)] + merged)]
    specials = special_tokens()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "tekken.json"
    path.write_text(json.dumps(tekken_json(ordered, specials, "v13"), ensure_ascii=False, separators=(",", ":")) + "\n")
    tok = load(path)
    names = {tok.id_to_piece(i): i for i in range(N_SPECIAL)}
    texts = tiktoken_fixtures.texts([]) + EXTRA_TEXTS
    vectors = {
        "generator": "mistral-common Tekkenizer, scripts/make_tekken_fixtures.py",
        "n_special": tok.num_special_tokens, "vocab_size": tok.n_words, "bos": tok.bos_id, "eos": tok.eos_id,
        "specials": {n: names[n] for n in ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[IMG]",
                                           "[THINK]", "[/THINK]", "[ARGS]", "<SPECIAL_199>", "<SPECIAL_200>",
                                           "<SPECIAL_299>"]},
        "cases": [case(tok, t) for t in texts],
        "special_cases": [special_case(tok, names, t) for t in special_texts()],
    }
    from mistral_common.integrations.chat_templates.chat_templates import convert_tokenizer_to_chat_template
    (OUT / "chat_template.jinja").write_text(convert_tokenizer_to_chat_template(path))
    vectors["chats"] = chat_cases(path, tok, names)
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "tekken.json"
        old.write_text(json.dumps(tekken_json(ordered, None, "v3")))
        v3 = load(old)
        vectors["v3"] = {"specials": {v3.id_to_piece(i): i for i in [0, 1, 2, 3, 9, 10, 19, 20, 299]},
                         "bos": v3.bos_id, "eos": v3.eos_id}
    real = real_cases()
    if real:
        vectors["real"] = real
    (OUT / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, separators=(",", ":")) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT} ({len(ranks)} ranks, {len(texts)} texts, {total} bytes)")


if __name__ == "__main__":
    main()
