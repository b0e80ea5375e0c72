#!/usr/bin/env python3
"""Writes small tiktoken vocabularies laid out as Kimi K2's and Hunyuan-A13B's model directories,
and the ids OpenAI's `tiktoken` library gives for varied texts, for
tests/models/tokenizer_tiktoken_test.cpp.

A tiktoken vocabulary is a ranks file (each line `base64(token bytes) rank`) plus a split pattern
and special tokens that the model's own Python (tokenization_kimi.py's TikTokenTokenizer,
tokenization_hy.py's HYTokenizer, Qwen's tokenization_qwen.py's QWenTokenizer) passes to
tiktoken.Encoding. The script learns byte-level BPE ranks (the 256 single bytes, then merges in
order; about 1,700 on this corpus) over a multilingual corpus made here (no download) with
Hugging Face `tokenizers`' trainer, then swaps a few ranks so that some tokens rank below the tokens they are made of (tiktoken
still produces them; a converter that replays BPE only up to a token's own rank cannot reach them),
and writes:

  tests/fixtures/tokenizers/tiktoken/kimi/     tiktoken.model, tokenizer_config.json (Kimi K2's
                                               class, auto_map, [BOS]/[EOS], some of its
                                               added_tokens_decoder, a chat template)
  tests/fixtures/tokenizers/tiktoken/hunyuan/  hy.tiktoken (the same tokens, one line repeated
                                               and the rank column numbering lines, which
                                               HYTokenizer ignores: it ranks unique tokens in file
                                               order), tokenizer_config.json (HYTokenizer)
  tests/fixtures/tokenizers/tiktoken/vectors.json
      per family ("kimi", "hunyuan", and "qwen" for Qwen (v1)'s QWenTokenizer over the Kimi ranks
      file named qwen.tiktoken): the number of ranks, the special tokens (content -> id) and, per
      text, tiktoken's ids (encode with allowed_special="all", after NFC for Hunyuan and Qwen, as
      their tokenize() does) and decode; "inverted": the tokens whose rank was swapped below
      their parts'.

`glm4` adds tests/fixtures/tokenizers/tiktoken/glm4/ (the Kimi ranks as GLM-4's tokenizer.model, its
tokenizer_config.json) and vectors.json's "glm4" entry (write_glm4), leaving the rest as it is.

Run from anywhere: python3 scripts/make_tiktoken_fixtures.py [glm4 | long]. It uses make_fixtures.py's virtual
environment (.brigade/fixtures-venv, which installs tiktoken too). The output is committed; CI never
runs this.
"""
import base64
import json
import random
import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402
from make_tokenizer_fixtures import bytes_to_unicode  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "tokenizers" / "tiktoken"
VOCAB_SIZE = 2300

# tokenization_kimi.py's pat_str (Rust regex syntax: && is class intersection).
KIMI_PATTERN = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
# tokenization_hy.py's and tokenization_qwen.py's PAT_STR.
QWEN_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

# Kimi K2's tokenizer_config.json names some of its 258 special ids (offsets from the number of
# ranks); TikTokenTokenizer names the rest <|reserved_token_{id}|>.
KIMI_NAMED = {0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>",
              6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
              11: "<|tool_calls_section_begin|>", 12: "<|tool_calls_section_end|>", 13: "<|tool_call_begin|>",
              14: "<|tool_call_argument_begin|>", 15: "<|tool_call_end|>", 17: "<|im_middle|>",
              254: "[UNK]", 255: "[PAD]"}
KIMI_N_SPECIAL = 258
HY_SPECIAL = ["<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>"] + [f"<|extra_{i}|>" for i in range(205)]
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]

KIMI_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}<|im_system|>system<|im_middle|>"
    "{%- elif message['role'] == 'user' -%}<|im_user|>user<|im_middle|>"
    "{%- else -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}"
    "{{ message['content'] }}<|im_end|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}")
HY_TEMPLATE = (
    "{{ bos_token }}{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}{{ message['content'] }}<|extra_0|>"
    "{%- else -%}{{ message['content'] }}<|eos|>{%- endif -%}"
    "{%- endfor -%}")

CORPUS_SEEDS = [
    "The quick brown fox jumps over the lazy dog. It's what they'll say; we've heard THEY'RE done.",
    "Kimi K2 is a mixture-of-experts model with 32 billion activated parameters and 1 trillion in total.",
    "人工智能正在改变世界。我们今天讨论大型语言模型的分词器，以及中文、日文和韩文的处理方式。",
    "自然语言处理（NLP）是计算机科学的一个分支，研究人与计算机之间用自然语言进行有效通信的理论和方法。",
    "東京は日本の首都です。ひらがなとカタカナ、そして漢字々を使います。今日は良い天気ですね。",
    "한국어 텍스트도 조금 있습니다. 서울은 대한민국의 수도입니다.",
    "Привет, мир! Как дела? Всё хорошо. Ελληνικά γράμματα και λέξεις.",
    "Café, naïve, résumé, façade, jalapeño, São Paulo, Ångström, Tiếng Việt có nhiều dấu.",
    "हिन्दी पाठ भी है। العربية نص قصير هنا.",
    "In 2024 we had 131072 tokens, 3.14159 and 1,000,000 dollars; call 555-0123 at 09:30.",
    "Emoji: 🦙 llamas 🐪 camels 👍🏽 and ❤️ hearts 👨‍👩‍👧 families 🇫🇷 flags.",
    "Tabs\tand spaces   and\n\nnewlines\r\nmixed    together.\n\n\n",
    "def forward(self, x):\n    return self.proj(x) ** 2  # square it\n\nfor i in range(10):\n    print(i)\n",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;",
    "<html><body><p class=\"note\">Hello &amp; welcome</p></body></html>",
    "Language models read text as tokens: byte pairs merged by rank, learned from a large corpus of "
    "books, articles, source code, conversations, documentation and mathematics; tokenizers differ in "
    "how they split words, numbers, whitespace, punctuation and scripts before merging.",
    "深度学习模型需要大量的数据和计算资源。训练过程包括前向传播、反向传播和参数更新。"
    "模型的性能取决于数据质量、网络结构以及优化算法。北京、上海、广州和深圳是中国的大城市。",
    "Der schnelle braune Fuchs springt über den faulen Hund. Le renard brun rapide saute par-dessus le chien "
    "paresseux. El rápido zorro marrón salta sobre el perro perezoso.",
    "return {\"id\": 42, \"name\": \"brigade\", \"tags\": [\"llm\", \"inference\"], \"ok\": true}",
]


def corpus():
    """The seeds, lower-cased, and seeded shuffles of their words with numbers between."""
    rng = random.Random(7)
    words = [w for s in CORPUS_SEEDS for w in s.split(" ")]
    out = []
    for i in range(400):
        out.append(CORPUS_SEEDS[i % len(CORPUS_SEEDS)] if i % 3 else CORPUS_SEEDS[i % len(CORPUS_SEEDS)].lower())
        out.append(" ".join(rng.sample(words, 12)) + f" {rng.randint(0, 99999)}")
    return out


def learn_ranks():
    """Byte-level BPE ranks: token bytes -> rank, single bytes first, then each merge in order."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    back = {c: b for b, c in enumerate(bytes_to_unicode())}
    vocab = json.loads(tok.to_str())["model"]["vocab"]
    ranks = {bytes(back[c] for c in s): i for s, i in vocab.items()}
    assert len(ranks) == len(vocab) and sorted(ranks.values()) == list(range(len(ranks)))
    assert all(bytes([b]) in ranks for b in range(256))
    return ranks


def invert(ranks):
    """Swaps a few long tokens' ranks with early merges' (made of two single bytes), so those long
    tokens rank below their own parts. Returns the long tokens."""
    by_rank = sorted(ranks, key=ranks.get)
    early = [t for t in by_rank if len(t) == 2][5:]
    long_ = [t for t in by_rank if len(t) >= 5 and t.strip() == t and t.isascii() and t.isalpha()]
    chosen = long_[-40::8][:5]
    for a, b in zip(chosen, early):
        ranks[a], ranks[b] = ranks[b], ranks[a]
    return chosen


def texts(inverted):
    out = [
        "", " ", "hello", "Hello world", "Hello, world!", "  leading and trailing  ", "a\nb\r\nc\n\n\nd",
        "\t\ttabs\tinside\t", "multiple     spaces   here", "line one\n    indented\n\tmore\n",
        "It's I'm you're we've they'll he'd IT'S WE'LL She'D", "don't can't won't", "'s 'S 'll 'LL",
        "1 12 123 1234 12345 1234567890", "3.14159 2,718 -42 +7 1e10 0x1F", "٣٤٥ ١٢٣ १२३४ ５６７",
        "人工智能正在改变世界。", "我们今天讨论分词器，以及中文、日文和韩文。", "（括号）「引号」《书名》",
        "中文English混合text测试123数字", "東京は日本の首都です。", "漢字々〆〇ヶ月", "ひらがなカタカナ漢字",
        "한국어 텍스트 서울", "Привет, мир! Всё хорошо.", "Ελληνικά γράμματα", "Tiếng Việt có nhiều dấu",
        "Cafe\u0301 nai\u0308ve re\u0301sume\u0301", "Café naïve résumé", "\u1100\u1161\u11a8 (jamo)",
        "हिन्दी पाठ भी है", "العربية نص قصير", "🦙🐪👍🏽❤️", "👨‍👩‍👧 family 🇫🇷🇯🇵",
        "def f(x):\n    return x**2  # square\n", "if (a >= b && c != d) { return; }", "SELECT * FROM t;",
        "<html><p>&amp;</p></html>", "https://example.com/path?q=1&r=2", "user@example.com",
        "!!!??? ... --- ***", "\u00a0non-breaking\u2003em\u3000ideographic space", "zero\u200bwidth",
        "ǅungla ǈ ǋ title case", "ŉ ſ ﬁ ligatures", "MixedCaseCamelCaseWords andXMLHttpRequest",
        "The quick brown fox jumps over the lazy dog.", "Kimi K2 has 32 billion activated parameters.",
        "end with newline\n", "\n\n", "   ", "a" * 40, "ab" * 30, "1" * 25, "中" * 12,
        "The model said: \"42\".", "tab\there", "x\u0301\u0302\u0303 stacked marks",
    ]
    out += [" ".join(t.decode() for t in inverted), "x".join(t.decode() for t in inverted)]
    out += ["pre" + t.decode() + "post" for t in inverted]
    return out


def special_texts(names):
    """Texts with special tokens inside, for a family whose specials are `names` (content list)."""
    a, b, c = names[0], names[1], names[-1]
    return [f"{a}", f"{a}hello{b}", f"text {c} more", f"{a}{b}{c}", f"half {a[:-1]} not special",
            f"中文{b}English", f"  {a}  ", f"{a}\n{b}\n"]


def family_cases(enc, items, nfc):
    cases = []
    for t in items:
        text = unicodedata.normalize("NFC", t) if nfc else t
        ids = enc.encode(text, allowed_special="all")
        cases.append({"text": t, "ids": ids, "decoded": enc.decode(ids)})
    return cases


def write_ranks(path, lines):
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in lines))


# TikTokenTokenizer.encode (tokenization_kimi.py) cuts the text before tiktoken sees it: chunks of
# TIKTOKEN_MAX_ENCODE_CHARS characters, each cut where a run of whitespace (str.isspace) or of
# non-whitespace characters would grow past MAX_NO_WHITESPACES_CHARS; each piece is encoded alone
# (special tokens matched inside it). `long` writes kimi_long.json: a text of about 470,000
# characters given as segments (pattern, characters: the pattern repeated and cut to that many),
# which the C++ test rebuilds the same way, the pieces' lengths in characters, and tiktoken's ids
# over those pieces, run-length coded ([[ids of a block], repeats], ...).
CHUNK_CHARS = 400_000
RUN_CHARS = 25_000
LONG_SEGMENTS = [
    ("Kimi K2 reads a long prompt. ", 29), ("a", 25_000), (" ", 1), ("the", 25_001), ("\n", 1),
    ("the", 50_003), (" ", 30_000), ("x", 7), ("\t\u3000\u00a0 \x1c", 25_002), ("y", 2),
    ("x", 24_995), ("<|im_end|>", 10), ("y", 10), (" <|im_end|> ", 12), ("[EOS]", 5),
    ("中文the", 25_004), ("\u200b", 3), ("1", 60_001), (" \n", 2),
    ("Hello, world! ", 2_000), ("the", 230_000), ("。", 3),
]


def long_text():
    return "".join((p * (n // len(p) + 1))[:n] for p, n in LONG_SEGMENTS)


def split_runs(s, max_run):
    """The pieces of s, cut before a character that would make a run of whitespace or of
    non-whitespace characters longer than max_run (TikTokenTokenizer's _split_whitespaces_or_nonwhitespaces)."""
    pieces, start, run, space = [], 0, 0, (s[0].isspace() if s else False)
    for i, ch in enumerate(s):
        now = ch.isspace()
        if now != space:
            run, space = 1, now
            continue
        run += 1
        if run > max_run:
            pieces.append(s[start:i])
            start, run = i, 1
    pieces.append(s[start:])
    return pieces


def kimi_pieces(text, chunk=CHUNK_CHARS):
    return [p for i in range(0, len(text), chunk) for p in split_runs(text[i:i + chunk], RUN_CHARS)]


def write_long(enc):
    text = long_text()
    pieces = kimi_pieces(text)
    ids = [i for p in pieces for i in enc.encode(p, allowed_special="all")]
    # The cut must matter, and the chunking too: without either the ids differ.
    assert ids != enc.encode(text, allowed_special="all")
    assert ids != [i for p in kimi_pieces(text, len(text)) for i in enc.encode(p, allowed_special="all")]
    rle, i = [], 0
    while i < len(ids):  # the period (1..8 ids) whose repeats from i cover the most
        best = (1, 1)
        for period in range(1, 9):
            block, reps = ids[i:i + period], 1
            while ids[i + reps * period:i + (reps + 1) * period] == block:
                reps += 1
            if reps > 1 and reps * period > best[0] * best[1]:
                best = (period, reps)
        rle.append([ids[i:i + best[0]], best[1]])
        i += best[0] * best[1]
    out = {"chunk_chars": CHUNK_CHARS, "run_chars": RUN_CHARS, "segments": [list(s) for s in LONG_SEGMENTS],
           "characters": len(text), "pieces": [len(p) for p in pieces], "n_ids": len(ids), "ids_rle": rle}
    path = OUT / "kimi_long.json"
    path.write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"wrote {path} ({len(text)} characters, {len(pieces)} pieces, {len(ids)} ids, {len(rle)} runs, "
          f"{path.stat().st_size} bytes)")


def kimi_encoding(tiktoken, ranks):
    n = len(ranks)
    special = {KIMI_NAMED.get(k, f"<|reserved_token_{n + k}|>"): n + k for k in range(KIMI_N_SPECIAL)}
    return tiktoken.Encoding("kimi", pat_str=KIMI_PATTERN, mergeable_ranks=ranks, special_tokens=special)


# ChatGLM4Tokenizer (glm-4-9b-chat's tokenization_chatglm.py): cl100k's pat_str, then its fixed list of
# special tokens after the ranks; build_inputs_with_special_tokens puts [gMASK] <sop> first.
GLM4_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
GLM4_SPECIAL = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
                "<|assistant|>", "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>",
                "<|end_of_video|>"]
GLM4_TEMPLATE = (
    "[gMASK]<sop>{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def write_glm4(tiktoken):
    """`glm4`: over the committed Kimi ranks (not rewritten), glm4/ as glm-4-9b-chat lays out its
    tokenizer (the ranks as tokenizer.model, tokenizer_config.json with ChatGLM4Tokenizer's auto_map,
    added_tokens_decoder and eos, a chat template in its form) and vectors.json's "glm4" entry:
    tiktoken's ids for the texts (allowed_special="all": transformers splits the added tokens out
    first, as tiktoken matches them) and the prefix add_special_tokens puts first."""
    ranks_text = (OUT / "kimi" / "tiktoken.model").read_text()
    ranks = {}
    for line in ranks_text.splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    n = len(ranks)
    special = {s: n + i for i, s in enumerate(GLM4_SPECIAL)}
    d = OUT / "glm4"
    d.mkdir(parents=True, exist_ok=True)
    (d / "tokenizer.model").write_text(ranks_text)
    decoder = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                        "special": True} for s, i in special.items()}
    (d / "tokenizer_config.json").write_text(json.dumps({
        "added_tokens_decoder": decoder,
        "additional_special_tokens": GLM4_SPECIAL[1:],
        "auto_map": {"AutoTokenizer": ["tokenization_chatglm.ChatGLM4Tokenizer", None]},
        "chat_template": GLM4_TEMPLATE, "clean_up_tokenization_spaces": False, "do_lower_case": False,
        "eos_token": "<|endoftext|>", "model_max_length": 128000, "pad_token": "<|endoftext|>",
        "padding_side": "left", "remove_space": False, "tokenizer_class": "ChatGLM4Tokenizer",
    }, indent=2, ensure_ascii=False) + "\n")
    vectors = json.loads((OUT / "vectors.json").read_text())
    inverted = [base64.b64decode(t) for t in vectors["inverted"]]
    enc = tiktoken.Encoding("glm4", pat_str=GLM4_PATTERN, mergeable_ranks=ranks, special_tokens=special)
    items = texts(inverted)[::2] + special_texts(["<|user|>", "[gMASK]", "<sop>", "<|end_of_video|>"])
    vectors["glm4"] = {"n_ranks": n, "special": special, "prefix": [special["[gMASK]"], special["<sop>"]],
                       "cases": family_cases(enc, items, False)}
    (OUT / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"wrote {d} and vectors.json's glm4 ({len(items)} texts)")


def main():
    ensure_venv(__file__)
    import tiktoken
    if sys.argv[1:] == ["glm4"]:
        write_glm4(tiktoken)
        return
    if sys.argv[1:] == ["long"]:  # over the committed ranks file, which it does not rewrite
        ranks = {}
        for line in (OUT / "kimi" / "tiktoken.model").read_text().splitlines():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        write_long(kimi_encoding(tiktoken, ranks))
        return
    ranks = learn_ranks()
    inverted = invert(ranks)
    n = len(ranks)
    ordered = sorted(ranks.items(), key=lambda kv: kv[1])
    kimi_dir, hy_dir = OUT / "kimi", OUT / "hunyuan"
    kimi_dir.mkdir(parents=True, exist_ok=True)
    hy_dir.mkdir(parents=True, exist_ok=True)
    write_ranks(kimi_dir / "tiktoken.model", ordered)
    # Hunyuan: one token repeated mid-file, the rank column numbering lines (HYTokenizer ignores it).
    hy_tokens = [t for t, _ in ordered]
    hy_tokens.insert(n // 2, hy_tokens[300])
    write_ranks(hy_dir / "hy.tiktoken", [(t, i) for i, t in enumerate(hy_tokens)])

    kimi_decoder = {str(n + k): {"content": v, "lstrip": False, "normalized": False, "rstrip": False,
                                 "single_word": False, "special": True} for k, v in KIMI_NAMED.items()}
    (kimi_dir / "tokenizer_config.json").write_text(json.dumps({
        "added_tokens_decoder": kimi_decoder,
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "bos_token": "[BOS]", "eos_token": "[EOS]", "pad_token": "[PAD]", "unk_token": "[UNK]",
        "chat_template": KIMI_TEMPLATE, "model_max_length": 131072, "tokenizer_class": "TikTokenTokenizer",
    }, indent=2, ensure_ascii=False) + "\n")
    (hy_dir / "tokenizer_config.json").write_text(json.dumps({
        "auto_map": {"AutoTokenizer": ["tokenization_hy.HYTokenizer", None]},
        "bos_token": "<|bos|>", "eos_token": "<|eos|>", "pad_token": "<|pad|>",
        "chat_template": HY_TEMPLATE, "model_max_length": 32768, "tokenizer_class": "HYTokenizer",
    }, indent=2, ensure_ascii=False) + "\n")

    kimi_special = {KIMI_NAMED.get(k, f"<|reserved_token_{n + k}|>"): n + k for k in range(KIMI_N_SPECIAL)}
    hy_special = {s: n + i for i, s in enumerate(HY_SPECIAL)}
    qwen_special = {s: n + i for i, s in enumerate(QWEN_SPECIAL)}
    base = texts(inverted)
    vectors = {"inverted": [base64.b64encode(t).decode() for t in inverted]}
    for name, pattern, special, nfc, names in [
            ("kimi", KIMI_PATTERN, kimi_special, False,
             ["[BOS]", "<|im_end|>", f"<|reserved_token_{n + 100}|>", "<|im_middle|>", "[EOS]"]),
            ("hunyuan", QWEN_PATTERN, hy_special, True, ["<|startoftext|>", "<|extra_0|>", "<|eos|>"]),
            ("qwen", QWEN_PATTERN, qwen_special, True, ["<|im_start|>", "<|im_end|>", "<|extra_204|>"])]:
        enc = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)
        items = base + special_texts(names) if name != "qwen" else base[::4] + special_texts(names)
        vectors[name] = {"n_ranks": n, "special": special, "cases": family_cases(enc, items, nfc)}
    (OUT / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, separators=(",", ":")) + "\n")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({n} ranks, {len(inverted)} inverted, {total} bytes)")


if __name__ == "__main__":
    main()
