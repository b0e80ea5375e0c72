#!/usr/bin/env python3
"""Writes byte-level BPE tokenizers with Llama 3's and Qwen2's exact pre-tokenizers, and their
reference encodings, for tests/models/pretokenizer_reference_test.cpp.

The reference is Hugging Face's `tokenizers` library (Rust, Oniguruma regexes), an implementation
independent of brigade's (PCRE2). For each family the script builds a tokenizer whose
pre_tokenizer is what the real tokenizer.json files hold:

  Sequence[Split(Regex(P), behavior "isolated", invert false),
           ByteLevel(add_prefix_space false, trim_offsets true, use_regex false)]

with P taken from llama.cpp's src/llama-vocab.cpp, where each is kept verbatim as the comment
"original regex from tokenizer.json" above llama.cpp's hand-adapted version
(LLAMA_VOCAB_PRE_TYPE_LLAMA3 for Meta-Llama-3-8B, LLAMA_VOCAB_PRE_TYPE_QWEN2 for Qwen2/Qwen2.5).
They differ in one place: Llama 3 groups digits by up to three (\\p{N}{1,3}), Qwen2 splits every
digit (\\p{N}).

A family may have several patterns, applied in sequence, each a Split(isolated) of the pieces the
one before made: "refact" (LLAMA_VOCAB_PRE_TYPE_REFACT, IBM Granite 3's GGUF vocabularies, with
tokenizer.ggml.pre "refact") splits every digit alone, then applies GPT-2's pattern.

Two more of llama.cpp's tokenizer.ggml.pre names (src/llama-vocab.cpp), with the regexes the real
tokenizer.json files hold on the Hugging Face side:

  "seed_coder": tokenizer.ggml.pre "seed-coder" (LLAMA_VOCAB_PRE_TYPE_SEED_CODER: ByteDance
  Seed-Coder-8B and Seed-OSS-36B). One pattern, Qwen2's with single digits (\\p{N}{1}) and
  punctuation runs that stop before line ends (no [\\r\\n]* tail: "};\\n" is "};" and "\\n").
  PATTERNS holds the original, llama.cpp's comment "original regex from tokenizer.json" (with
  (?i:...) contractions and literal CR/LF characters in its classes, as the JSON's "\\r\\n" are);
  LLAMA_CPP_PATTERNS holds llama.cpp's adaptation (contractions as case classes '[sS]..., \\r\\n
  escapes). They split differently only where Unicode case folding reaches a contraction: "'ſ"
  (long s folds to s) followed by a letter. Each case whose pieces under llama.cpp's adaptation
  differ from the reference's carries them as "llama_cpp_pieces", and vectors.json names the
  adaptation in "llama_cpp_patterns".

  "hunyuan_dense": tokenizer.ggml.pre "hunyuan-dense" (LLAMA_VOCAB_PRE_TYPE_HUNYUAN_DENSE: Tencent
  Hunyuan 0.5B..7B dense), which llama.cpp splits as "deepseek-v3" (DEEPSEEK3_LLM, DeepSeek-V3's
  tokenizer.json): three patterns in turn, digit runs by up to three, then runs of CJK ideographs
  (U+4E00..U+9FA5) and kana, then words (an ASCII punctuation character takes the ASCII letters
  after it, a letter run its marks), punctuation and symbol runs with their line ends, whitespace.
  llama.cpp copied these verbatim from DeepSeek-V3's tokenizer.json (literal CR/LF characters and
  CJK code points included), so here the original and llama.cpp's are the same strings.

Neither name sets ignore_merges in llama.cpp (both set clean_spaces false, which only decoding's
cleanup of spaces before punctuation reads; Hugging Face's ByteLevel decoder does none).

It trains a small BPE (a few hundred merges) on a corpus this script makes, saves tokenizer.json to
tests/fixtures/tokenizers/<family>/, and writes vectors.json there: for each tricky text (digit
runs, contractions in any case, CJK, emoji and ZWJ sequences, whitespace runs and Unicode spaces,
newlines, mixed scripts, code, and llama.cpp's own tokenizer test inputs when ../shared/testdata is
present) the pre-tokenizer's pieces, the ids (no special tokens added) and the decoded text.

Also tests/fixtures/tokenizers/post_processor/: the fixture tokenizers with the post-processors of
Llama 3 (BOS first) and Qwen3-Embedding (<|endoftext|> last), and each text's ids with and without
special tokens (`python3 scripts/make_tokenizer_fixtures.py post_processor` writes only these), and
pairs.json: pairs of texts encoded as tokenizer(text=a, text_pair=b) under those post-processors,
BERT's and RoBERTa's, and none (`... pairs` writes only these).

And tests/fixtures/tokenizers/wordpiece/: two WordPiece (BERT) tokenizers trained here, uncased and
cased, and vectors.json: the reference's normalized text, ids, decodes, pairs with token type ids,
and unicodedata's strip_accents of the texts (`... wordpiece` writes only these).

Run from anywhere: python3 scripts/make_tokenizer_fixtures.py. It uses make_fixtures.py's virtual
environment (.brigade/fixtures-venv; `tokenizers` comes with transformers). The output is
committed (about 30 KB per family); CI never runs this.
"""
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "tokenizers"
TESTDATA = ROOT.parent / "shared" / "testdata" / "tokenizers"

PATTERNS = {
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    # Qwen3.5's tokenizer.json (llama.cpp's QWEN35 pre-tokenizer): qwen2's, letters taking their
    # combining marks (\p{M}) along.
    "qwen35": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    # llama.cpp's REFACT pre-tokenizer (Granite 3): two splits in sequence, as llama-vocab.cpp writes
    # them: every digit alone, then GPT-2's pattern (no trailing |\s+: the lone whitespace character
    # before a non-space that ` ?...` does not take, as "\n" in "a\nb", stays an unmatched piece).
    "refact": [
        r"\p{N}",
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    ],
    # Seed-Coder's / Seed-OSS's tokenizer.json (llama.cpp's SEED_CODER, its "original regex from
    # tokenizer.json" comment; "\r\n" here are the CR and LF characters themselves, as there).
    "seed_coder": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\r\n]+|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    # DeepSeek-V3's tokenizer.json, which llama.cpp's DEEPSEEK3_LLM / HUNYUAN_DENSE hold verbatim
    # (CR and LF characters again, and the CJK and kana ranges as the characters themselves).
    "hunyuan_dense": [
        "\\p{N}{1,3}",
        "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    ],
    # Mistral's tekken tokenizer.json (Mistral Nemo, Mistral Small 3.x, Ministral, Devstral,
    # Magistral; llama.cpp's TEKKEN, its "original regex from tokenizer.json" comment): words split
    # at case changes (an upper-case run takes the lower-case run after it), single digits,
    # punctuation runs with their line ends and slashes.
    "tekken": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
# llama.cpp's own regexes where they differ from the tokenizer.json ones above (what brigade would
# take from its llama-vocab.cpp): Seed-Coder's contractions as case classes, \r\n as escapes.
LLAMA_CPP_PATTERNS = {
    # llama.cpp's TEKKEN adaptation: its engine has no \p{Lu}/\p{Ll}, so "upper" is any letter but
    # a-z and "lower" any letter but A-Z (accented lower-case letters then count as both).
    "tekken": [
        r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ],
    "seed_coder": [
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
    ],
}


def patterns(family):
    """The family's patterns, in the order they split."""
    p = PATTERNS[family]
    return [p] if isinstance(p, str) else list(p)


# Special tokens as the real vocabularies name them (added after training, like the originals).
SPECIALS = {
    "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "qwen35": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "refact": ["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>"],
    # Seed-Coder's, then Seed-OSS's.
    "seed_coder": ["<[begin▁of▁sentence]>", "<[end▁of▁sentence]>", "<[PAD▁TOKEN]>", "<[fim-prefix]>",
                   "<[fim-middle]>", "<[fim-suffix]>", "<seed:bos>", "<seed:eos>", "<seed:pad>",
                   "<seed:think>", "</seed:think>"],
    # Hunyuan dense's (full-width bars and U+2581, as DeepSeek's).
    "tekken": ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[THINK]", "[/THINK]"],
    "hunyuan_dense": ["<｜hy_begin▁of▁sentence｜>", "<｜hy_end▁of▁sentence｜>", "<｜hy_User｜>",
                      "<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁2｜>", "<｜hy_place▁holder▁no▁3｜>"],
}
# Llama 3's tokenizer.json sets model.ignore_merges (a word that is a whole vocabulary entry is
# that token, whatever the merges would make of it); Qwen2's does not. llama.cpp does the same
# for the llama-bpe pre-tokenizer; for seed-coder and hunyuan-dense (deepseek-v3) it does not.
IGNORE_MERGES = {"llama3": True, "qwen2": False, "qwen35": False, "refact": False, "seed_coder": False,
                 "hunyuan_dense": False, "tekken": True}
VOCAB_SIZE = 700

# The training corpus: sentences in several scripts with numbers, contractions, code and emoji,
# recombined by a seeded generator so merges form across all of them.
CORPUS_SEEDS = [
    "The quick brown fox jumps over the lazy dog.",
    "It's a truth universally acknowledged that we'll need more tokens; they've said so, I'd guess.",
    "She said: \"Don't do that!\" and he replied 'I'm not.'",
    "In 2024 the model had 8,192 context tokens and 3.14159 was still pi; 1234567890 is a long number.",
    "def forward(self, x):\n    return self.proj(x) ** 2  # square it\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "Привет, мир! Как дела? Всё хорошо.",
    "Ελληνικά γράμματα και αριθμοί 42.",
    "你好，世界。我们今天去公园散步，天气很好。",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 텍스트도 조금 있습니다.",
    "Emoji: 🦙 llamas 🐪 camels 👍🏽 and ❤️ hearts 👨‍👩‍👧 families 🇫🇷 flags.",
    "Café, naïve, façade, straße, Übermäßig, niño, coöperate.",
    "Tabs\tand\tspaces   and\n\nnewlines\r\nmixed   \n  together.",
    "<html><body><p>Hello &amp; welcome</p></body></html>",
    "العربية نص قصير. हिन्दी पाठ भी।",
]


def corpus():
    rng = random.Random(7)
    lines = list(CORPUS_SEEDS)
    for _ in range(400):
        a, b = rng.sample(CORPUS_SEEDS, 2)
        cut_a, cut_b = rng.randrange(len(a)), rng.randrange(len(b))
        lines.append(a[:cut_a] + " " + b[cut_b:] + " " + str(rng.randrange(10 ** rng.randrange(1, 8))))
    return lines


# Texts whose splits differ between pre-tokenizers or between regex engines.
TRICKY = [
    "", " ", "  ", "\t", "\n", "\n\n\n", " \n", "\r\n", "a\r\nb", "a\rb", "a\n\n\nb", "  \n  \n",
    "Hello world", " Hello world", "Hello World", "HELLO WORLD", "hello  world", "hello   world",
    "1", "12", "123", "1234", "12345", "123456", "1234567", "1234567890", " 1234", "3.14159",
    "1,000,000", "x=42;y=7", "2024-11-30", " 123 456 7890", "v1.2.3-rc4", "0x1F", "٣٤٥ and ½ and ²",
    "I'm", "you're", "It's", "IT'S", "we'LL", "They'VE", "don't", "DON'T", "I'd", "'s", "'S", "'ll",
    "o'clock", "rock 'n' roll", "it''s", "x's's", "’s curly", "'ſ long s",
    "你好世界", "我们今天去公园。", "日本語のテキスト", "한국어 텍스트", "中文English混合123",
    "🦙", "🦙🦙", "Hello 🦙 world", "👨‍👩‍👧‍👦", "🇫🇷🇩🇪", "❤️", "👍🏽", " 🦙", "a🦙b",
    "a b", "a  b", "a   b", "a    \n   b", "   leading", "trailing   ", "\t\tindent", "line1\n\nline2",
    "a\u00a0b", "a\u3000b", "a\u2028b", "a\u0085b", "a\u200bb", "a\u000bb\u000cc", " \u00a0 x",
    "a\u00a0\u00a0b", "a\u0085\u0085b", "a\u2028\u2028b", "a\u2029\u2029b", "a\u3000\u3000b",
    "a\u1680\u1680b", "a\u180e\u180eb", "a\u200b\u200bb", "a\u000b\u000bb", "a\u001c\u001cb",
    "a \u0085\n b", "x\u00a0\n", "\u00a0\u00a0", "1\ufe0f\u20e3 2\ufe0f\u20e3",
    "Привет мир", "Ελληνικά", "العربية", "हिन्दी", "café naïve", "straße", "Ünïcödé",
    "def f(x):\n    return x**2\n", "if (a && b) { return; }", "<html><body>", "$$$", "...", "!!!???",
    "-->", "a.b.c", "    def", "\n\n    return", "foo.bar()", "#include <stdio.h>",
    "<|begin_of_text|>Hi<|end_of_text|>", "<|im_start|>user\nHi<|im_end|>", "<|endoftext|> x",
]


# Combining marks, where qwen35's split differs from qwen2's (its fixture's cases only).
MARKS = [
    "cafe\u0301 nai\u0308ve", "e\u0301\u0301", " \u0301x", "x \u0301", "\u0301", "Zalgo z\u0335\u0321a\u0337l\u0336g\u0338o",
    "नमस्ते दुनिया", "ภาษาไทย ที่นี่", "tiếng Việt", "Ａ\u20dd", "a\u0301\u20e3b", "'s\u0301", "x'\u0301ll",
]

# Digit runs among other characters, where refact's first split (every digit alone) shows (its
# fixture's cases only; those TRICKY already has are left out).
DIGITS = [
    "12345", "3.14159", "x=1000000;", "2025-12-05", "abc123def", " 42 apples", "1 2  3", "a1b2c3",
    "\n123\n", "$1,234.56", "0.5e-10", "'s1'll2", "٣٤٥٦", "١٢٣abc", "½²³⁴", "Ⅻ ⅻ", "１２３",
    "🦙123🦙", "x 1", "x  1", "1\t2", "  99", "99  ", "v2.0.1-beta3", "a\nb", "a\n1",
]


# Seed-Coder's: single digits, punctuation runs before line ends (which its pattern leaves out of
# the run, where Qwen2's takes them), code, and contractions where case folding reaches them.
SEED_CODER = [
    "};\n", "});\n\n", "x = 1;\r\n", "end.\n", "!!!\n\n\n", "?!\r\n\r\n", " ;\n", "a;\nb", ";\n\t}",
    "// comment\n", "#!/bin/sh\n", "{\n  \"a\": [1, 22, 333],\n}\n", "if (x) {\n    y();\n}\n", "x\n\n;\n",
    "arr[0][12] = 345;\n", "1+1=2\n", "0.0001", "1e10", "-42", "+7", "3\n4", "123abc456", "٣٤٥\n",
    "'ſx", "x'ſt", "'ſ", "'ſ's", "'ﬅ", "it'S", "WE'RE", "I'M", "'Ll", "'ve'd", "'s\n", "'\n's",
    "<[begin▁of▁sentence]>x<[end▁of▁sentence]>", "<seed:bos>system\nHi<seed:eos>", "<seed:think>1+1</seed:think>",
    "<[fim-suffix]>}\n<[fim-prefix]>def f():\n<[fim-middle]>",
]

# Hunyuan dense's (DeepSeek-V3's): digit runs by three among CJK, the CJK/kana range's edges (U+9FA5
# in, U+9FA6.. and Extension A out; U+30FB and U+30FC in, Hangul out), CJK punctuation, an ASCII
# punctuation character taking ASCII letters only, marks with their letters, symbol runs and line ends.
HUNYUAN = [
    "2024年11月30日", "第123456章", "价格是1,234.56元", "共1234567个", "三千五百", "〇一二三", "①②③④",
    "你好，世界。", "“你好”", "《三体》", "中文English中文", "中文 English", "日本語とカタカナ・ひらがなー",
    "ｶﾀｶﾅ", "ゟ゠ヿ", "\u9fa5\u9fa6\u9fff", "\u3400\u4dbf", "\U00020000\U0002a6df", "\uf900豈", "한국어와中文",
    "中文123English456", " 中文", "\n中文\n", "中文\r\n\r\n", "。\n\n", "中文！！\n",
    ".café", "_naïve", "-Über", "#include", "@user", "$HOME", "__init__", "self.proj(x)", "a.b.c", "x->y",
    "'s", "don't", "it''s", "rock 'n' roll", "«hello»", "(hello)", "[Ab]", "\\n", "`code`", "~tilde",
    "e\u0301", "\u0301x", " \u0301", "x\u0301\u0301y", "❤️❤️", "🦙🦙 🦙", "👍🏽👍", "$$$\n", "+=\n", " !!\n\n",
    "a\tb", "a \t b", "a\u200db", "\u200d", "a\u00adb", "½ ² ³", "Ⅻ", "x²", "١٢٣٤",
    "<｜hy_begin▁of▁sentence｜>你好<｜hy_User｜>1+1=?<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁2｜>x",
]


# Case changes inside words, accented and non-Latin cases, titlecase letters, paths and slashes
# (tekken's punctuation runs take a trailing / along), [INST] markers in text.
TEKKEN = [
    "HelloWorld iPhone McDonald's XMLHttpRequest ÉCOLE école Straße STRASSE ǅungla ǲ",
    "/usr/local/bin/\npath/to//file.txt https://example.com/a/b?c=1", "[INST]What is 2+2?[/INST]The answer is 4.</s>",
    "ΑθήναΑΘΗΝΑ МоскваМОСКВА camelCaseWord snake_case_word kebab-case-word ABCdefGHI",
    "ﬁﬂ ŉ ǈǋ ᾈᾉ Ǆ ǅ ǆ", "x/y//z\n/\r\n//", "日本語のテキスト mixed漢字Text",
]


def llama_cpp_inputs():
    """The inputs of llama.cpp's tokenizer tests (ggml-vocab-*.gguf.inp), when testdata is here."""
    texts = []
    for name in ("gpt-2", "deepseek-llm"):
        path = TESTDATA / f"ggml-vocab-{name}.gguf.inp"
        if path.exists():
            for t in path.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n"):
                if t and t not in texts:
                    texts.append(t)
    return texts


def split_only(pats):
    """A pre-tokenizer of just the Split steps (for llama.cpp's adapted patterns)."""
    from tokenizers import Regex, pre_tokenizers
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(p), behavior="isolated", invert=False) for p in pats])


def build(family):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        *(pre_tokenizers.Split(Regex(p), behavior="isolated", invert=False) for p in patterns(family)),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.model.ignore_merges = IGNORE_MERGES[family]
    tok.add_special_tokens(SPECIALS[family])
    return tok


def write(family):
    import tokenizers
    tok = build(family)
    out_dir = OUT / family
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    byte_decoder = {c: b for b, c in enumerate(bytes_to_unicode())}
    llama_cpp = split_only(LLAMA_CPP_PATTERNS[family]) if family in LLAMA_CPP_PATTERNS else None
    cases = []
    texts = TRICKY + {"qwen35": MARKS, "refact": DIGITS, "seed_coder": DIGITS + SEED_CODER,
                      "hunyuan_dense": DIGITS + MARKS + HUNYUAN, "tekken": DIGITS + MARKS + TEKKEN}.get(family, [])
    texts = list(dict.fromkeys(texts))
    for text in texts + [t for t in llama_cpp_inputs() if t not in texts]:
        ids = tok.encode(text, add_special_tokens=False).ids
        # The pieces as UTF-8 text: ByteLevel maps each byte to a printable character; map back.
        pieces = [bytes(byte_decoder[c] for c in p).decode("utf-8")
                  for p, _ in tok.pre_tokenizer.pre_tokenize_str(text)]
        cases.append({"text": text, "pieces": pieces, "ids": ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False)})
        if llama_cpp is not None:  # llama.cpp's adaptation, where it splits otherwise
            theirs = [p for p, _ in llama_cpp.pre_tokenize_str(text)]
            if theirs != pieces:
                cases[-1]["llama_cpp_pieces"] = theirs
                print(f"  {family}: llama.cpp's patterns split {text!r} as {theirs}, tokenizer.json's as {pieces}")
    vectors = {
        "generator": f"tokenizers {tokenizers.__version__} (HF), scripts/make_tokenizer_fixtures.py",
        # One pattern: "pattern" (a string); several: "patterns" (a list, in the order they split).
        **({"pattern": PATTERNS[family]} if isinstance(PATTERNS[family], str) else {"patterns": patterns(family)}),
        **({"llama_cpp_patterns": LLAMA_CPP_PATTERNS[family]} if family in LLAMA_CPP_PATTERNS else {}),
        "cases": cases,
    }
    (out_dir / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    size = sum(f.stat().st_size for f in out_dir.iterdir())
    print(f"{family}: {len(cases)} cases, vocab {tok.get_vocab_size()}, {size / 1024:.0f} KiB")


def bytes_to_unicode():
    """GPT-2's byte -> printable character table (the ByteLevel alphabet), in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


# Post-processors as the real tokenizer.json files hold them (what `add_special_tokens=True` adds):
# Llama 3's Sequence[ByteLevel, TemplateProcessing "<|begin_of_text|> $A"], and Qwen3-Embedding's
# TemplateProcessing "$A <|endoftext|>" (the token its last-token pooling reads).
POST_PROCESSORS = {
    "llama3_bos": ("llama3", "<|begin_of_text|>", True),
    "qwen3_embedding": ("qwen2", "<|endoftext|>", False),
}


def write_post_processors():
    """tests/fixtures/tokenizers/post_processor/<name>.json (the family's fixture tokenizer with the
    post-processor) and vectors.json: each text's ids without and with special tokens."""
    from tokenizers import Tokenizer, processors
    out_dir = OUT / "post_processor"
    out_dir.mkdir(parents=True, exist_ok=True)
    vectors = {}
    for name, (family, special, before) in POST_PROCESSORS.items():
        tok = Tokenizer.from_file(str(OUT / family / "tokenizer.json"))
        sid = tok.token_to_id(special)
        single = f"{special} $A" if before else f"$A:0 {special}:0"
        pair = f"{special} $A {special}:1 $B:1" if before else f"$A:0 {special}:0 $B:1 {special}:1"
        template = processors.TemplateProcessing(single=single, pair=pair, special_tokens=[(special, sid)])
        tok.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False), template]) if before else template
        tok.save(str(out_dir / f"{name}.json"))
        vectors[name] = [{"text": t, "plain": tok.encode(t, add_special_tokens=False).ids,
                          "special": tok.encode(t, add_special_tokens=True).ids}
                         for t in ["", "Hello world", "a sentence to embed.", "<|im_start|>user", "12345 !!"]]
    (out_dir / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"post_processor: {', '.join(vectors)}")


# Pairs as a cross-encoder's /score tokenizes them: tokenizer(text=a, text_pair=b).
PAIRS = [("What is the capital of France?", "Paris is."), ("", "only the second"), ("12345 !!", "<|im_start|>user")]


def write_pairs():
    """tests/fixtures/tokenizers/post_processor/pairs.json: each pair's ids and token type ids with
    add_special_tokens,
    under the two templates above, under BertProcessing and RobertaProcessing (the qwen2 fixture
    with <|im_start|> as CLS and <|im_end|> as SEP: pairs.json holds that post_processor, for the
    test to put into the qwen2 fixture), and under no post-processor (the qwen2 fixture itself)."""
    from tokenizers import Tokenizer, processors
    out_dir = OUT / "post_processor"
    qwen2 = OUT / "qwen2" / "tokenizer.json"
    pairs = {}

    def encode_all(name, tok, post=None):
        encodings = [(a, b, tok.encode(a, b, add_special_tokens=True)) for a, b in PAIRS]
        pairs[name] = {"post_processor": post,
                       "pairs": [{"a": a, "b": b, "ids": e.ids, "type_ids": e.type_ids} for a, b, e in encodings]}

    for name in POST_PROCESSORS:
        encode_all(name, Tokenizer.from_file(str(out_dir / f"{name}.json")))
    for name, make in (("bert", processors.BertProcessing), ("roberta", processors.RobertaProcessing)):
        tok = Tokenizer.from_file(str(qwen2))
        cls, sep = "<|im_start|>", "<|im_end|>"
        tok.post_processor = make((sep, tok.token_to_id(sep)), (cls, tok.token_to_id(cls)))
        encode_all(name, tok, json.loads(tok.to_str())["post_processor"])
    encode_all("none", Tokenizer.from_file(str(qwen2)))
    (out_dir / "pairs.json").write_text(json.dumps(pairs, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"pairs: {', '.join(pairs)}")


# WordPiece (BERT): tokenizers trained here like bert-base-uncased's (BertNormalizer lowercase,
# strip_accents null) and bert-base-cased's (lowercase false, strip_accents false), with texts that
# exercise every step: accents and ligatures, CJK, punctuation runs, control characters, tabs and
# newlines, emoji, long words, special tokens written in the text, characters outside the vocab.
WORDPIECE_CORPUS_EXTRA = [
    "Résumé of a naïve café owner in São Paulo; piñata, jalapeño, Ångström, œuvre, ﬁnance.",
    "Transformers encode sentences into embeddings; cross-encoders score query and passage pairs.",
    "What is the capital of France? Paris is the capital and most populous city of France.",
    "unbelievable unaffordable unhappiness rethinking preprocessing tokenization tokenizers",
    "İstanbul, ΟΔΥΣΣΕΥΣ, Straße, Ærøskøbing, Łódź, Dvořák, Tiếng Việt.",
]
WORDPIECE_TEXTS = [
    "", " ", "Hello world", "HELLO, World!!!", "hello...world???", "a--b__c", "(nested [brackets] {too})",
    "Café naïve résumé São Paulo", "piñata jalapeño Ångström", "ﬁnance ﬂow", "e\u0301 a\u0323\u0302 o\u0308",
    "İstanbul", "ΟΔΥΣΣΕΥΣ σοφός", "Straße", "Dvořák Łódź Tiếng Việt", "Ærøskøbing œuvre",
    "你好世界", "我们今天去公园。", "中文English混合123", "日本語のテキスト", "한국어 텍스트",
    "tab\there\nnewline\r\nand  spaces", "a\u00a0b\u3000c\u2028d", "ctrl\x00\x01\x07\x1b\x7f\x85end",
    "zero\u200bwidth\u200djoiner\ufeffbom", "repl\ufffdchar", "soft\u00adhyphen",
    "Emoji 🦙 and 👍🏽 and 👨‍👩‍👧", "x🦙y", "❤️ hearts",
    "supercalifragilisticexpialidocious", "a" * 99, "b" * 100, "c" * 101, "pneumono" * 13,
    "[CLS] starts [SEP] ends", "fill the [MASK] please", "[MASK][MASK]", "[mask] lower", "x[SEP]y", "[UNK] [PAD]",
    "don't won't I'm you're it's we've they'll", "rock 'n' roll", "quotes \"double\" and 'single'",
    "3.14159 1,000,000 2024-11-30 v1.2.3", "email@example.com https://example.com/path?q=1",
    "unbelievable unaffordable unhappiness", "rethinking preprocessing tokenization",
    "ߊ߫ ࢘ ⹃ ᙭", "\U0001F99Cunknown \u0378 \U000E0001tag", "Ω ℃ ™ ½ ²",
]
# More marks for strip_accents: Vietnamese stacked accents, polytonic Greek, marks out of canonical
# order, Hangul syllables (NFD makes jamo), Arabic and Hebrew points, Indic viramas, Thai vowels.
STRIP_ACCENTS_TEXTS = [
    "Tiếng Việt ở đây", "ᾅ ὤ ῗ", "a\u0301\u0323 q\u0307\u0323 x\u0360\u0301", "한국어 텍스트", "Å Ω K ﬁ ǅ",
    "مَرْحَبًا", "שָׁלוֹם", "हिन्दी", "ภาษาไทย", "ẛ̣ ḯ Ǖ", "\U0001D15E \U0001D160",
]
WORDPIECE_PAIRS = [
    ("What is the capital of France?", "Paris is the capital of France."),
    ("", "only the second"),
    ("only the first", ""),
    ("Café [SEP] naïve", "你好 🦙 [MASK]"),
]


def wordpiece_tokenizer(lowercase):
    from tokenizers import processors
    from tokenizers.implementations import BertWordPieceTokenizer
    tok = BertWordPieceTokenizer(lowercase=lowercase, strip_accents=None if lowercase else False)
    lines = corpus() + WORDPIECE_CORPUS_EXTRA * 20
    tok.train_from_iterator(lines, vocab_size=2000, min_frequency=2, show_progress=False,
                            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    if lowercase:  # bert-base-uncased's tokenizer.json: TemplateProcessing; the cased one keeps BertProcessing
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def strip_accents(text):
    import unicodedata
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def write_wordpiece():
    """tests/fixtures/tokenizers/wordpiece/{uncased,cased}.json and vectors.json: for each text the
    normalizer's output, the ids without and with special tokens, and the decodes (with and without
    skip_special_tokens); each pair's ids and type ids; and strip_accents (NFD, then no Mn) of the
    texts by unicodedata and by the library."""
    import tokenizers
    out_dir = OUT / "wordpiece"
    out_dir.mkdir(parents=True, exist_ok=True)
    vectors = {"generator": f"tokenizers {tokenizers.__version__} (HF), scripts/make_tokenizer_fixtures.py wordpiece"}
    for name, lowercase in (("uncased", True), ("cased", False)):
        tok = wordpiece_tokenizer(lowercase)
        tok.save(str(out_dir / f"{name}.json"))
        cases = []
        for text in WORDPIECE_TEXTS:
            plain, special = tok.encode(text, add_special_tokens=False), tok.encode(text, add_special_tokens=True)
            cases.append({"text": text, "normalized": tok.normalizer.normalize_str(text), "ids": plain.ids,
                          "tokens": plain.tokens, "special": special.ids,
                          "decoded": tok.decode(special.ids, skip_special_tokens=False),
                          "decoded_skip": tok.decode(special.ids, skip_special_tokens=True)})
        pairs = []
        for a, b in WORDPIECE_PAIRS:
            e = tok.encode(a, b, add_special_tokens=True)
            pairs.append({"a": a, "b": b, "ids": e.ids, "type_ids": e.type_ids})
        vectors[name] = {"cases": cases, "pairs": pairs}
        print(f"wordpiece {name}: {len(cases)} texts, vocab {tok.get_vocab_size()}")
    # strip_accents alone, by unicodedata and by the reference (they differ where the library's
    # Unicode tables are older: U+0898 is Mn since Unicode 14).
    from tokenizers import normalizers
    hf_strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    vectors["strip_accents"] = [{"text": t, "unicodedata": strip_accents(t), "tokenizers": hf_strip.normalize_str(t)}
                                for t in WORDPIECE_TEXTS + STRIP_ACCENTS_TEXTS if strip_accents(t) != t]
    (out_dir / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    size = sum(f.stat().st_size for f in out_dir.iterdir())
    print(f"wordpiece: {size / 1024:.0f} KiB")


def main():
    subcommands = {"post_processor": write_post_processors, "pairs": write_pairs, "wordpiece": write_wordpiece}
    if len(sys.argv) == 2 and sys.argv[1] in subcommands:  # each needs only `tokenizers`
        try:
            import tokenizers  # noqa: F401
        except ImportError:
            ensure_venv(__file__)
        subcommands[sys.argv[1]]()
        return
    ensure_venv(__file__)
    if sys.argv[1:] and all(f in PATTERNS for f in sys.argv[1:]):  # just those families
        for family in sys.argv[1:]:
            write(family)
        return
    for family in PATTERNS:
        write(family)
    write_post_processors()
    write_pairs()
    write_wordpiece()


if __name__ == "__main__":
    main()
