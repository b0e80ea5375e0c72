#!/usr/bin/env python3
"""Writes SentencePiece Unigram tokenizers as transformers converts them to tokenizer.json, and
their reference encodings, for tests/models/tokenizer_unigram_test.cpp.

The reference is Hugging Face's `tokenizers` library (Rust). The script trains two small
SentencePiece unigram models on a multilingual corpus made here (no download):

  xlmr/tokenizer.json   normalization_rule_name nmt_nfkc, so the real compiled NFKC rule set is
                        embedded as the Precompiled normalizer's precompiled_charsmap; converted by
                        transformers' XLMRobertaConverter (vocab <s> <pad> </s> <unk> ... <mask>,
                        unk_id 3, TemplateProcessing <s> $A </s> / <s> $A </s> </s> $B </s>), with
                        the normalizer, pre-tokenizer and decoder the XLM-RoBERTa checkpoints on the
                        Hub ship (BAAI/bge-m3, intfloat/multilingual-e5-*):
                        Sequence[Precompiled, Replace(Regex " {2,}", " ")], Metaspace(always, split).
  byte_fallback/tokenizer.json
                        byte_fallback true (a Llama-style model: <0xXX> pieces), converted by
                        transformers' LlamaConverter: Sequence[Prepend("▁"), Replace(" ", "▁")], no
                        pre-tokenizer, decoder Sequence[Replace("▁", " "), ByteFallback, Fuse,
                        Strip(" ", 1, 0)].

vectors.json holds, per variant, the overrides of the base file's normalizer / pre_tokenizer /
decoder that make it (the charsmap is ~320 KB, so the xlmr file is stored once), and for each text:
the normalizer's output, ids and tokens without special tokens, ids with them, and the decodes of
those with and without skip_special_tokens; then pairs with token type ids, and the Precompiled
normalizer alone.

Run from anywhere: python3 scripts/make_unigram_fixtures.py. It uses make_fixtures.py's virtual
environment (.brigade/fixtures-venv) with `sentencepiece` and `protobuf` added. The output is
committed; CI never runs this.
"""
import base64
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "tokenizers" / "unigram"

CORPUS_SEEDS = [
    "The quick brown fox jumps over the lazy dog. What is the capital of France? Paris is.",
    "Transformers encode sentences into embeddings; rerankers score a query and a passage.",
    "Café, naïve, résumé, façade, jalapeño, São Paulo, Ångström, œuvre, coöperate.",
    "Die Straße ist übermäßig groß; Größe und Maß sind heiß.",
    "Ça va très bien, merci ! Où est la bibliothèque ? À bientôt.",
    "日本語のテキストとカタカナ、ひらがな。東京は大きい都市です。",
    "你好，世界。我们今天去公园散步，天气很好。中文和English混合。",
    "ＡＢＣ１２３ full width ｈｅｌｌｏ and half width ｶﾀｶﾅ.",
    "Ligatures ﬁ ﬂ ﬃ, circled ① ② ③ ⑩, Roman Ⅻ ⅻ Ⅳ, ™ ℃ ½ ² ㎏.",
    "Odd spaces:\u00a0NBSP,\u3000ideographic,\u2002en,\u2009thin and tabs\tand\nnewlines.",
    "Emoji 🦙 llamas 👍🏽 and ❤️ hearts, 🇫🇷 flags.",
    "Привет, мир! Как дела? Всё хорошо.",
    "In 2024 the model had 8,192 context tokens and 3.14159 was still pi.",
    "email@example.com https://example.com/path?q=1 #hashtag @mention",
]
BYTE_FALLBACK_SEEDS = CORPUS_SEEDS[:5] + CORPUS_SEEDS[12:]

TEXTS = [
    "", " ", "   ", "\t", "\n", "Hello world", " Hello world", "Hello  world", "Hello   world  ",
    "hello\tworld\nagain", "a\r\nb", "a\rb\n\nc", "Café naïve résumé", "e\u0301 a\u0308 o\u0302 c\u0327",
    "straße Straße STRASSE", "Ça va? Très bien, merci.", "日本語のテキスト",
    "你好世界。我们", "中文English混合123", "ＡＢＣ１２３ ｈｅｌｌｏ", "ｶﾞｷﾞｸﾞ ｶﾀｶﾅ", "ﬁnance ﬂow ﬃ",
    "① ② ⑩ Ⅻ ⅻ", "™ ℃ ½ ² ㎏ ㍿", "Å Ω K", "a\u00a0b\u3000c\u2002d\u2009e", "zero\u200bwidth\u200djoiner\ufeffbom",
    "soft\u00adhyphen", "ctrl\x00\x01\x07\x1b\x7fend", "Emoji 🦙 and 👍🏽 and 👨‍👩‍👧", "❤️ hearts", "1\ufe0f\u20e3 #\ufe0f",
    "🇫🇷🇩🇪", "한국어 텍스트", "العربية", "हिन्दी", "supercalifragilisticexpialidocious",
    "xyzzy qwxz", "unknown ✈ ⌘ ☃ chars", "<s>", "</s>", "<mask>", "Hello <mask> world", "a</s>b", "<s> x </s> y",
    "<unk> <pad>", "   leading and trailing   ", "What is the capital of France?",
    "3.14159 1,000,000 2024-11-30", "email@example.com https://example.com/a?b=1", "\u0130stanbul",
    "x\u0301\u0323 \u1e9b\u0323", "\u2581already\u2581marked", "a\u0300\u0300\u0300b",
]
# The texts of the variants other than xlmr (every other one, and those naming special tokens): the
# xlmr file's charsmap leaves room for ~60 KB of vectors.
VARIANT_TEXTS = [t for i, t in enumerate(TEXTS) if i % 2 == 0 or "<" in t]
PAIRS = [
    ("What is the capital of France?", "Paris is the capital of France."),
    ("", "only the second"),
    ("only the first", ""),
    ("Café <mask> naïve", "你好 🦙 </s>"),
]

# Settings that other SentencePiece conversions write, applied to the xlmr file.
METASPACE = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
VARIANTS = {
    "xlmr": {},
    # transformers 5's SpmConverter / XLMRobertaConverter normalizer and a T5-style pre-tokenizer.
    "spm_converter": {
        "normalizer": {"type": "Sequence", "normalizers": [
            "PRECOMPILED", {"type": "Strip", "strip_left": False, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, METASPACE]},
    },
    # The pre-prepend_scheme spelling of older files.
    "add_prefix_space": {
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
    },
    "first_nosplit": {
        "pre_tokenizer": dict(METASPACE, prepend_scheme="first", split=False),
        "decoder": dict(METASPACE, prepend_scheme="first", split=False),
    },
    "never": {
        "pre_tokenizer": dict(METASPACE, prepend_scheme="never"),
        "decoder": dict(METASPACE, prepend_scheme="never"),
    },
    # Llama's legacy spelling (Prepend + Replace, no pre-tokenizer) with Lowercase and Strip.
    "lowercase_prepend": {
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Lowercase"}, "PRECOMPILED", {"type": "Strip", "strip_left": True, "strip_right": True},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}, {"type": "Prepend", "prepend": "\u2581"}]},
        "pre_tokenizer": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    },
}


def corpus(seeds):
    rng = random.Random(11)
    lines = list(seeds)
    for _ in range(600):
        a, b = rng.sample(seeds, 2)
        lines.append(a[:rng.randrange(len(a))] + " " + b[rng.randrange(len(b)):])
    return lines


def train(path, seeds, vocab_size, **extra):
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus(seeds)), model_prefix=str(path), vocab_size=vocab_size,
                                   model_type="unigram", hard_vocab_limit=False, minloglevel=2, **extra)
    return str(path) + ".model"


def converted(converter, vocab_file, specials):
    """transformers' converter run on a SentencePiece model, with the slow tokenizer's attributes
    it reads (the ids of the special tokens the post-processor names)."""
    original = SimpleNamespace(vocab_file=vocab_file, add_prefix_space=True, legacy=True,
                               convert_tokens_to_ids=lambda t: specials[t], convert_ids_to_tokens=lambda i: list(specials)[i])
    return converter(original).converted()


def with_variant(base_json, variant):
    j = json.loads(base_json)
    precompiled = j["normalizer"]["normalizers"][0]
    for key, value in VARIANTS[variant].items():
        if isinstance(value, dict) and value.get("type") == "Sequence" and "normalizers" in value:
            value = dict(value, normalizers=[precompiled if n == "PRECOMPILED" else n for n in value["normalizers"]])
        j[key] = value
    return json.dumps(j)


def reference(tok, texts):
    cases = []
    for text in texts:
        plain, special = tok.encode(text, add_special_tokens=False), tok.encode(text, add_special_tokens=True)
        cases.append({"text": text, "normalized": tok.normalizer.normalize_str(text) if tok.normalizer else text,
                      "ids": plain.ids, "tokens": plain.tokens, "special": special.ids,
                      "decoded": tok.decode(special.ids, skip_special_tokens=False),
                      "decoded_skip": tok.decode(special.ids, skip_special_tokens=True)})
    pairs = []
    for a, b in PAIRS:
        e = tok.encode(a, b, add_special_tokens=True)
        pairs.append({"a": a, "b": b, "ids": e.ids, "type_ids": e.type_ids})
    return {"cases": cases, "pairs": pairs}


def main():
    ensure_venv(__file__)
    try:
        import google.protobuf  # noqa: F401  (the converters read the model file with it)
        import sentencepiece  # noqa: F401
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "sentencepiece", "protobuf"])
    import tokenizers
    from transformers.convert_slow_tokenizer import LlamaConverter, XLMRobertaConverter
    from tokenizers import Regex, Tokenizer, normalizers
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "xlmr").mkdir(exist_ok=True)
    (OUT / "byte_fallback").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        xlmr_model = train(Path(tmp) / "sentencepiece.bpe", CORPUS_SEEDS, 700, normalization_rule_name="nmt_nfkc",
                           character_coverage=0.995)
        xlmr = converted(XLMRobertaConverter, xlmr_model, {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3})
        bf_model = train(Path(tmp) / "llama", BYTE_FALLBACK_SEEDS, 420, byte_fallback=True, character_coverage=0.98)
        byte_fallback = converted(LlamaConverter, bf_model, {"<unk>": 0, "<s>": 1, "</s>": 2})
    # The Hub's XLM-RoBERTa normalizer: the charsmap, then runs of spaces made one.
    precompiled = json.loads(xlmr.to_str())["normalizer"]["normalizers"][0]
    assert precompiled["type"] == "Precompiled", precompiled
    xlmr.normalizer = normalizers.Sequence([normalizers.Precompiled(base64.b64decode(precompiled["precompiled_charsmap"])),
                                            normalizers.Replace(Regex(" {2,}"), " ")])
    # The special tokens as XLMRobertaTokenizerFast saves them (<mask> takes the space before it).
    from tokenizers import AddedToken
    xlmr.add_special_tokens([AddedToken(t, special=True, normalized=False, lstrip=t == "<mask>")
                             for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")])
    xlmr_json = json.loads(xlmr.to_str())
    xlmr_json["pre_tokenizer"] = METASPACE
    xlmr_json["decoder"] = METASPACE
    base = json.dumps(xlmr_json, ensure_ascii=False)
    (OUT / "xlmr" / "tokenizer.json").write_text(base, encoding="utf-8")
    from tokenizers import processors
    byte_fallback.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B:1",
                                                                 special_tokens=[("<s>", 1)])
    (OUT / "byte_fallback" / "tokenizer.json").write_text(byte_fallback.to_str(), encoding="utf-8")

    vectors = {"generator": f"tokenizers {tokenizers.__version__} (HF), scripts/make_unigram_fixtures.py", "variants": {}}
    for variant in VARIANTS:
        tok = Tokenizer.from_str(with_variant(base, variant))
        entry = reference(tok, TEXTS if variant == "xlmr" else VARIANT_TEXTS)
        if variant != "xlmr":  # the overrides, and fewer fields to keep the fixture small
            entry["overrides"] = {k: v for k, v in json.loads(with_variant(base, variant)).items() if k in VARIANTS[variant]}
            if "normalizer" in entry["overrides"]:
                entry["overrides"]["normalizer"]["normalizers"] = [
                    "PRECOMPILED" if n.get("type") == "Precompiled" else n for n in entry["overrides"]["normalizer"]["normalizers"]]
            for c in entry["cases"]:  # the xlmr case has them all
                del c["tokens"], c["special"]
                if "normalizer" not in VARIANTS[variant]:
                    del c["normalized"]
                if "decoder" not in VARIANTS[variant]:
                    del c["decoded"], c["decoded_skip"]
        vectors["variants"][variant] = entry
    vectors["byte_fallback"] = reference(Tokenizer.from_file(str(OUT / "byte_fallback" / "tokenizer.json")), VARIANT_TEXTS)
    only = Tokenizer.from_str(base)
    only.normalizer = normalizers.Precompiled(base64.b64decode(precompiled["precompiled_charsmap"]))
    for c in vectors["byte_fallback"]["cases"]:  # the normalizer is lowercase_prepend's; ids give tokens
        del c["normalized"], c["tokens"]
    vectors["precompiled"] = [only.normalizer.normalize_str(t) for t in TEXTS]  # of variants.xlmr's texts
    (OUT / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, separators=(",", ":")) + "\n",
                                      encoding="utf-8")
    size = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"unigram: vocab {xlmr.get_vocab_size()} (byte_fallback {byte_fallback.get_vocab_size()}), {len(TEXTS)} texts, "
          f"{size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
