#!/usr/bin/env python3
"""Writes tokenizers whose added tokens overlap, and the ids Hugging Face's `tokenizers` library
(its AddedVocabulary: Aho-Corasick, leftmost-longest) gives for texts full of them, for
tests/models/tokenizer_added_tokens_test.cpp.

Both start from the committed Qwen2-pattern byte-level BPE (tests/fixtures/tokenizers/qwen2,
written by make_tokenizer_fixtures.py) and add tokens that are prefixes of one another
(<a> / <a><b>, <SPECIAL_1> .. <SPECIAL_150> with <SPECIAL_1 unclosed, <|fim / <|fim_prefix|>),
inside one another (<tool> / tool / x<tool>y), straddling one another (ab / bcd, xyz / yz!), one
that fails late (abcde beside abc), special and not, with lstrip and rstrip:

  tests/fixtures/tokenizers/added_tokens/plain.json      no normalizer, every token normalized false
  tests/fixtures/tokenizers/added_tokens/lowercase.json  a Lowercase normalizer, and tokens with
      normalized true (matched by their lower-cased content in the lower-cased text between the
      others) overlapping tokens with normalized false (matched first, in the raw text)
  tests/fixtures/tokenizers/added_tokens/wordpiece.json  the uncased BERT WordPiece of
      tests/fixtures/tokenizers/wordpiece with the first tokenizer's added tokens (its BertNormalizer
      lower-cases the text between them, not them)
  tests/fixtures/tokenizers/added_tokens/single_word.json  the first tokenizer's tokens and tokens
      with single_word true (matched only with no Rust regex \\w character beside them: letters of
      any script, marks, Nd digits, _ and the joiners, but not No digits like ²), some also lstrip /
      rstrip (with every kind of Unicode White_Space) or normalized
  tests/fixtures/tokenizers/added_tokens/wordpiece_normalized.json, unigram_normalized.added_tokens.json
      the WordPiece and XLM-R's Unigram (tests/fixtures/tokenizers/unigram/xlmr: its Precompiled
      nmt_nfkc normalizer) with normalized tokens, matched in their normalized text (for the Unigram
      only its added_tokens are written; the test puts them into XLM-R's tokenizer.json)
  tests/fixtures/tokenizers/added_tokens/vectors.json    per tokenizer, each text's ids
      (encode(text, add_special_tokens=False)) and decode(ids, skip_special_tokens=False)

Run from anywhere: python3 scripts/make_added_token_fixtures.py (it re-runs itself in
.brigade/fixtures-venv). The output is committed; CI never runs this.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402

BASE = ROOT / "tests" / "fixtures" / "tokenizers" / "qwen2" / "tokenizer.json"
WORDPIECE = ROOT / "tests" / "fixtures" / "tokenizers" / "wordpiece" / "uncased.json"
UNIGRAM = ROOT / "tests" / "fixtures" / "tokenizers" / "unigram" / "xlmr" / "tokenizer.json"
OUT = ROOT / "tests" / "fixtures" / "tokenizers" / "added_tokens"

# (content, special, lstrip, rstrip, normalized); normalized true only in the "lowercase" tokenizer.
PLAIN = [
    ("<a>", True, False, False, False), ("<a><b>", True, False, False, False),
    ("<|fim", False, False, False, False), ("<|fim_prefix|>", True, False, False, False),
    ("<tool>", True, False, False, False), ("tool", False, False, False, False),
    ("x<tool>y", False, False, False, False),
    ("ab", False, False, False, False), ("bcd", False, False, False, False),
    ("xyz", True, False, False, False), ("yz!", True, False, False, False),
    ("abc", False, False, False, False), ("abcde", False, False, False, False),
    ("<mask>", True, True, False, False), ("[R]", True, False, True, False), ("[R][R]", True, True, True, False),
    ("<SPECIAL_1", True, False, False, False),
] + [(f"<SPECIAL_{i}>", True, False, False, False) for i in range(150)]

LOWERCASE = [
    ("<Tool>", True, False, False, True), ("TOOLBOX", False, False, False, True),
    ("Hello World", False, False, False, True), ("o W", True, False, False, False),
    ("<A>", True, False, False, True),
]

# (content, special, lstrip, rstrip, normalized, single_word)
SINGLE_WORD = [
    ("cat", False, False, False, False, True), ("<w>", True, False, False, False, True),
    ("dog", False, True, True, False, True), ("ab", False, False, False, False, True),
    ("ol", False, False, False, False, True), ("Wort", False, False, False, True, True),
    ("<m>", True, True, True, False, False), ("x_", False, False, False, False, True),
]
SINGLE_WORD_TEXTS = [
    "cat", "a cat.", "cats", "concat", "cat_", "_cat", "cat1", "1cat", "cat\u00fc", "\u00fccat", "cat\u0301",
    "cat\u00e9", "cat-dog", "hotdog dog", "dog  dog\t", "  dog  ", "<w>x", "x<w>", "a <w> b", "<w><w>", "ab abc abx ab",
    "dogcat cat", "ol ol", "olol ol", "\u00f6ol ol\u00e9 ol", "\u65e5\u672ccat", "cat\u65e5\u672c", "\u0663cat", "\u216bcat",
    "\u00b2cat", "cat\u00b2", "\u24d0cat", "cat\u200d", "cat\u200b", "\u203fcat", "Wort wort WORT Worte",
    "x_ x_y ax_ x_.", "cat<m>cat", "a\u00a0<m>\u00a0b", "a\u000b<m>\u000cb", "a\u0085<m>\u2028b",
    "a\u3000<m>\u2029b", "a\u200b<m>\u200bb", "\u180e<m>\u180e", "a\u1680\u2000<m>\u205f\u202fb",
]
NORMALIZED = [
    ("Hello World", False, False, False, True), ("<Tool>", True, False, False, True), ("TOOLBOX", False, False, False, True),
    ("o W", True, False, False, False), ("\uff26\uff55\uff4c\uff4c", False, False, False, True),
    ("Caf\u00e9", False, False, False, True), ("[Wk]", False, False, False, False, True),
]
NORMALIZED_TEXTS = [
    "Hello World", "hello world", "HELLO WORLD!", "<Tool> <tool> <TOOL>", "TOOLBOX toolbox ToolBox tool",
    "Hello Wo World", "\uff26\uff55\uff4c\uff4c full FULL", "Caf\u00e9 cafe\u0301 CAF\u00c9 cafe",
    "x[Wk] [Wk] [wk]", "a\u00a0Hello\u3000World", "",
]

TEXTS = [
    "", "<a>", "<a><b>", "<a><b", "<a><a><b><b>", "x<a><b>y<a>z",
    "<|fim", "<|fim_prefix|>", "<|fim_prefix|", "<|fim_middle|> <|fim_prefix|><|fim",
    "<tool>", "tool", "x<tool>y", "x<tool>z", "a<tool>y", "toolbox <tool> tools x<tool>yx<tool>y",
    "ab", "abcd", "bcd", "abcde", "abcdX", "abcdef", "aabcdee", "xabcabcde",
    "xyz!", "xyyz!", "yz!xyz", "wxyz!!",
    "a <mask> b", "a  \t <mask>", "<mask>", "\n<mask>\n", "x<mask>", "[R]  next", "[R]\n\n[R][R]  x",
    " [R][R] [R] [R][R][R] ",
    "<SPECIAL_1>", "<SPECIAL_12>", "<SPECIAL_120>", "<SPECIAL_1200>", "<SPECIAL_149><SPECIAL_150>",
    "<SPECIAL_1<SPECIAL_1>>", "<SPECIAL_", "<SPECIAL_99", "<SPECIAL_1x", "a<SPECIAL_7>b<SPECIAL_77>c",
    "<|endoftext|><|im_start|>user\nhi<|im_end|>", "<|im_start|<|im_end|>",
    "Hello World", "hello world", "HELLO WORLD!", "<Tool> <tool> <TOOL>", "<A><a><b>", "Hello Wo World",
    "TOOLBOX toolbox ToolBox tool", "中文<tool>日本語<a><b>한국어",
]


def add_tokens(tok, specs):
    from tokenizers import AddedToken
    for content, special, lstrip, rstrip, normalized, *single_word in specs:
        t = AddedToken(content, single_word=bool(single_word and single_word[0]), lstrip=lstrip, rstrip=rstrip,
                       normalized=normalized, special=special)
        if special:
            tok.add_special_tokens([t])
        else:
            tok.add_tokens([t])


def main():
    ensure_venv(__file__)
    from tokenizers import Tokenizer, normalizers
    OUT.mkdir(parents=True, exist_ok=True)
    vectors = {}
    for name, base, specs, normalizer, texts in [
            ("plain", BASE, PLAIN, None, TEXTS),
            ("lowercase", BASE, PLAIN + LOWERCASE, normalizers.Lowercase(), TEXTS),
            ("wordpiece", WORDPIECE, PLAIN, None, TEXTS),
            ("single_word", BASE, PLAIN + SINGLE_WORD, None, TEXTS + SINGLE_WORD_TEXTS),
            ("wordpiece_normalized", WORDPIECE, NORMALIZED, None, NORMALIZED_TEXTS + SINGLE_WORD_TEXTS[:12]),
            ("unigram_normalized", UNIGRAM, NORMALIZED + SINGLE_WORD, None, NORMALIZED_TEXTS + SINGLE_WORD_TEXTS)]:
        tok = Tokenizer.from_file(str(base))
        if normalizer is not None:
            tok.normalizer = normalizer
        add_tokens(tok, specs)
        if base == UNIGRAM:  # XLM-R's file is 330 KB: only the added tokens, the test puts them into it
            added = json.loads(tok.to_str())["added_tokens"]
            (OUT / f"{name}.added_tokens.json").write_text(json.dumps(added, ensure_ascii=False, indent=1) + "\n")
        else:
            (OUT / f"{name}.json").write_text(tok.to_str() + "\n")
        cases = []
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            cases.append({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
        vectors[name] = cases
    (OUT / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, indent=1) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()
