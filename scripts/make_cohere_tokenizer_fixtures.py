#!/usr/bin/env python3
"""Writes a byte-level BPE tokenizer configured as Cohere's (Command R / R+ / R7B / Command A) and
its reference encodings, for tests/models/tokenizer_cohere_test.cpp, and the Unicode normalization
forms of tricky texts, for tests/models/tokenizer_normalizer_test.cpp.

The reference is Hugging Face's `tokenizers` library (Rust) for the tokenizer, and Python's
`unicodedata` for the normalization forms. The script trains a small BPE (about 900 tokens) on a
corpus made here (no download) with what Cohere's tokenizer.json files hold:

  normalizer     NFC
  pre_tokenizer  Sequence[Digits(individual_digits true),
                          ByteLevel(add_prefix_space false, trim_offsets true, use_regex true)]
  decoder        ByteLevel
  post_processor TemplateProcessing "<BOS_TOKEN> $A" / "<BOS_TOKEN> $A <BOS_TOKEN>:1 $B:1"
                 (CohereTokenizerFast's with add_bos_token, add_eos_token false)
  added tokens   <PAD> <UNK> <CLS> <SEP> <MASK_TOKEN> <BOS_TOKEN> <EOS_TOKEN> <EOP_TOKEN> (ids 0-7,
                 in the vocab too, as Cohere's), the chat turn tokens (special, normalized false),
                 and two that exercise the "normalized" flag: "cafe\\u0301" (normalized true:
                 matched by its NFC "café" in the normalized text) and U+2126 OHM SIGN (normalized
                 false: matched in the raw text only, before NFC makes it U+03A9).

tests/fixtures/tokenizers/cohere/ then holds:
  tokenizer.json, tokenizer_config.json (bos <BOS_TOKEN>, eos <|END_OF_TURN_TOKEN|>, as Command R's),
  vectors.json   for each text (NFC: decomposed letters, Hangul jamo, composition exclusions,
                 singletons, marks out of canonical order, blocked marks; digits of many scripts,
                 ½ and Ⅻ; special tokens in text; emoji; whitespace) the normalizer's output, the
                 pre-tokenizer's pieces (of the normalized text, as UTF-8), the ids without and with
                 special tokens, and the decodes of the latter with and without skip_special_tokens;
                 pairs with token type ids; the Digits pre-tokenizer alone (both modes); and the
                 code point ranges the library's Digits takes as numeric (Rust's char::is_numeric).
                 Where the library decodes an added token with non-ASCII content through the
                 ByteLevel byte table (U+00E9 becomes byte 0xE9: "caf\\ufffd"), "decoded_content"
                 holds the decode with that token's text instead, which brigade gives.
  forms.json     unicodedata's NFC, NFD, NFKC and NFKD of tricky texts, and of one long text per
                 form that holds every code point the form changes (for NFC, also the NFD of every
                 primary composite); "tokenizers" gives the library's output where its older
                 Unicode tables make it differ (brigade follows the library).

Run from anywhere: python3 scripts/make_cohere_tokenizer_fixtures.py. It uses make_fixtures.py's
virtual environment (.brigade/fixtures-venv). The output is committed; CI never runs this.
"""
import json
import random
import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402
from make_tokenizer_fixtures import bytes_to_unicode  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "tokenizers" / "cohere"
VOCAB_SIZE = 900
# Cohere's special tokens, ids 0-7 (trained into the vocab, as in Command R's tokenizer.json).
SPECIALS = ["<PAD>", "<UNK>", "<CLS>", "<SEP>", "<MASK_TOKEN>", "<BOS_TOKEN>", "<EOS_TOKEN>", "<EOP_TOKEN>"]
TURN_TOKENS = ["<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>",
               "<|SYSTEM_TOKEN|>"]
NORMALIZED_TOKEN = "cafe\u0301"  # normalized true: matched as its NFC, "café"
RAW_TOKEN = "\u2126"             # normalized false: OHM SIGN, which NFC makes U+03A9

CORPUS_SEEDS = [
    "The quick brown fox jumps over the lazy dog. What is the capital of France? Paris is.",
    "Command R is a generative model optimized for long context tasks such as retrieval augmented generation.",
    "Café, naïve, résumé, façade, jalapeño, São Paulo, Ångström, œuvre, coöperate, École, Éric.",
    "Tiếng Việt có nhiều dấu: ệ, ộ, ữ, ạ, ặ, ầ, Người Việt Nam.",
    "Die Straße ist übermäßig groß; Größe und Maß sind heiß. Ça va très bien, merci !",
    "한국어 텍스트도 조금 있습니다. 한글은 자모로 이루어집니다.",
    "日本語のテキストとカタカナ、ひらがな。ガギグゲゴ、パピプペポ。",
    "हिन्दी पाठ भी। क़लम, ख़ुश, ग़ज़ल, ज़रूर, फ़िल्म।",
    "العربية نص قصير. آمين، أحمد، إسلام.",
    "Ελληνικά γράμματα: ά έ ή ί ό ύ ώ, ΐ ΰ.",
    "Привет, мир! Как дела? Всё хорошо, ёлка.",
    "In 2024 the model had 131072 context tokens and 3.14159 was still pi; ٣٤٥ and १२३ are digits too.",
    "Emoji: 🦙 llamas 🐪 camels 👍🏽 and ❤️ hearts 👨‍👩‍👧 families 🇫🇷 flags.",
    "Tabs\tand spaces   and\n\nnewlines\r\nmixed together.",
    "def forward(self, x):\n    return self.proj(x) ** 2  # square it\n",
]


def corpus():
    rng = random.Random(5)
    lines = list(CORPUS_SEEDS)
    for _ in range(500):
        a, b = rng.sample(CORPUS_SEEDS, 2)
        lines.append(a[:rng.randrange(len(a))] + " " + b[rng.randrange(len(b)):] + " " + str(rng.randrange(10 ** 6)))
    return lines


# Texts for the tokenizer: NFC at work, digits, added tokens, emoji, whitespace.
NFC_TEXTS = [
    "cafe\u0301", "e\u0301", "E\u0301cole e\u0301te\u0301", "A\u030a \u212b \u00c5", "n\u0303 \u00f1",
    # Hangul: L V, L V T, a syllable then a T, LVT then T (no more), a mark between (blocked).
    "\u1100\u1161", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af", "\uac00\u11a8", "\uac01\u11a8",
    "\u1100\u1100\u1161", "\u1161\u11a8", "\u1100\u0301\u1161",
    # Composition exclusions and non-starter decompositions stay decomposed.
    "\u0958 \u0915\u093c", "\ufb1d \ufb2a", "\u0f73 \u0344", "\u2adc", "\u1e9b\u0323",
    # Singletons.
    "\u2000x\u2001", "\u0340\u0341 \u0374 \u037e \u0387", "\u212a \u2126", "\u1f71 \u03ac",
    # Marks out of canonical order; blocked marks.
    "a\u0301\u0323", "a\u0323\u0301", "q\u0307\u0323", "e\u0302\u0323 Vie\u0323\u0302t", "a\u0305\u0301", "a\u0316\u0301",
    "a\u0301\u0301", "\u0b47\u0300\u0b3e \u0b47\u0b3e", "\u0301a \u0301\u0301", "a \u0301", "\u0627\u0653",
    # Compatibility characters NFC leaves alone.
    "\ufb01nance \u2460 \u00bd \u00b2 \u216b \uff76\uff9e",
    # Unicode 13: the library's tables do not compose U+11935 U+11930.
    "\U00011935\U00011930",
]
DIGIT_TEXTS = [
    "12345", "3.14159", "x1y22z333", "$1,234.56", "2024-11-30", " 42 apples", "  99", "1\t2",
    "\u0663\u0664\u0665", "\u0967\u0968\u0969", "\u00bd and \u00b2", "\u216b \u217b", "\u2460\u2461", "\uff11\uff12\uff13",
    "\U0001d7d9\U0001d7da", "\U00011f50\U00011f51", "\U0001d2c0", "1\ufe0f\u20e3", "v2.0.1-beta3",
]
ADDED_TEXTS = [
    "<BOS_TOKEN>hello", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi<|END_OF_TURN_TOKEN|>",
    "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Bonjour, e\u0301te\u0301<|END_OF_TURN_TOKEN|>",
    "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|>",
    "e\u0301<EOS_TOKEN>e\u0301", "e<EOS_TOKEN>\u0301", "<BOS_TOKEN", "<PAD><UNK><MASK_TOKEN><EOP_TOKEN>",
    "caf\u00e9 and cafe\u0301", "xcafe\u0301y", "\u2126 and \u03a9", "\u2126\u0301",
]
OTHER_TEXTS = [
    "", " ", "  ", "\t", "\n\n", "a\u00a0b", "a\u3000b", "  leading", "trailing  ", "line1\r\nline2",
    "Hello world", "What is the capital of France?", "Tiếng Việt có nhiều dấu", "한국어 텍스트", "日本語のテキスト",
    "हिन्दी क़लम", "Ελληνικά ά", "Привет, мир!", "🦙", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷🇩🇪", "❤️",
    "def f(x):\n    return x**2\n", "It's we'll they've I'd",
]
TEXTS = list(dict.fromkeys(NFC_TEXTS + DIGIT_TEXTS + ADDED_TEXTS + OTHER_TEXTS))
PAIRS = [("What is the capital of France?", "Paris is."), ("e\u0301", "<|END_OF_TURN_TOKEN|>123"), ("", "only B")]


def build():
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, show_progress=False, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_special_tokens(TURN_TOKENS)
    tok.add_tokens([AddedToken(NORMALIZED_TOKEN, normalized=True, special=False),
                    AddedToken(RAW_TOKEN, normalized=False, special=False)])
    bos = tok.token_to_id("<BOS_TOKEN>")
    tok.post_processor = processors.TemplateProcessing(
        single="<BOS_TOKEN>:0 $A:0", pair="<BOS_TOKEN>:0 $A:0 <BOS_TOKEN>:1 $B:1", special_tokens=[("<BOS_TOKEN>", bos)])
    return tok


def pieces(tok, text):
    """The pre-tokenizer's pieces of the normalized text, as UTF-8 (ByteLevel's characters mapped back)."""
    byte_of = {c: b for b, c in enumerate(bytes_to_unicode())}
    normalized = tok.normalizer.normalize_str(text)
    return [bytes(byte_of[c] for c in p).decode("utf-8") for p, _ in tok.pre_tokenizer.pre_tokenize_str(normalized)]


def decoded_content(tok, ids, skip_special):
    """The decode with each added token's own text: runs of model ids through the decoder, added
    tokens as the library names them (id_to_token)."""
    added = {int(i) for i in tok.get_added_tokens_decoder()}
    special = {int(i) for i, t in tok.get_added_tokens_decoder().items() if t.special}
    out, run = [], []
    for i in ids + [None]:
        if i is None or i in added:
            out.append(tok.decode(run) if run else "")
            run = []
            if i is not None and not (skip_special and i in special):
                out.append(tok.id_to_token(i))
        else:
            run.append(i)
    return "".join(out)


def reference(tok):
    cases = []
    for text in TEXTS:
        plain, special = tok.encode(text, add_special_tokens=False), tok.encode(text, add_special_tokens=True)
        case = {"text": text, "normalized": tok.normalizer.normalize_str(text), "pieces": pieces(tok, text),
                "ids": plain.ids, "special": special.ids, "decoded": tok.decode(special.ids, skip_special_tokens=False),
                "decoded_skip": tok.decode(special.ids, skip_special_tokens=True)}
        content = decoded_content(tok, special.ids, False), decoded_content(tok, special.ids, True)
        if content != (case["decoded"], case["decoded_skip"]):
            case["decoded_content"], case["decoded_skip_content"] = content
        cases.append(case)
    pairs = []
    for a, b in PAIRS:
        e = tok.encode(a, b, add_special_tokens=True)
        pairs.append({"a": a, "b": b, "ids": e.ids, "type_ids": e.type_ids})
    return cases, pairs


def digits_reference():
    """The Digits pre-tokenizer alone, both modes, and the code points it takes as numeric."""
    from tokenizers import pre_tokenizers
    individual, runs = pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Digits(individual_digits=False)
    cases = [{"text": t, "individual": [p for p, _ in individual.pre_tokenize_str(t)],
              "contiguous": [p for p, _ in runs.pre_tokenize_str(t)]}
             for t in DIGIT_TEXTS + ["a1b2c3", "123abc456", "\u00bd\u00b2\u00b3\u2074", "x 1 22", "no digits", "9"]]
    numeric = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000
               and len(individual.pre_tokenize_str("a" + chr(cp) + "a")) == 3]
    ranges = []
    for cp in numeric:
        if ranges and ranges[-1][1] + 1 == cp:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    pcre2_14 = sum(1 for cp in numeric if unicodedata.category(chr(cp))[0] != "N")
    print(f"digits: {len(numeric)} numeric code points in {len(ranges)} ranges; "
          f"{pcre2_14} are not N* in unicodedata {unicodedata.unidata_version} (PCRE2 10.42's \\p{{N}} is Unicode 14 too)")
    return cases, ranges


# The normalization forms of tricky texts (the tokenizer's texts and more: compatibility ones).
FORM_TEXTS = TEXTS + [
    "\ufb01 \ufb03 \u2460 \u2473 \u00bd \u00b2 \u216b \u2122 \u2103 \u3392 \u337f", "\uff21\uff22\uff23 \uff76\uff9e\uff77\uff9e",
    "\u3200 \u3260 \u326e \u1109\u1169", "\ufdfa", "\u01c4 \u01c5 \u01c6 \u1e9b", "\u00a0 \u2002 \u3000", "\u0385 \u1fee \u1fc1",
    "\U0001d400\U0001d41a \U0001d7ce", "\u32ff \ua7f2 \U00010781",
    "\u05d1\u05bc\u05bf\u05b8 \u0591\u05b0\u05b1", "x\u0360\u0301\u0345\u0315\u035c", "\u0e40\u0e48\u0e31",
    # Marks assigned after the library's Unicode version: class 0 there, so never reordered.
    "a\u0301\u07fd", "e\u0345\u0898\u0301", "\u1100\u1acf\u1161",
]
FORMS = ("NFC", "NFD", "NFKC", "NFKD")


def form_reference():
    from tokenizers import normalizers
    hf = {f: getattr(normalizers, f)() for f in FORMS}
    texts = []
    for text in dict.fromkeys(FORM_TEXTS):
        entry = {"text": text, **{f: unicodedata.normalize(f, text) for f in FORMS}}
        theirs = {f: hf[f].normalize_str(text) for f in FORMS if hf[f].normalize_str(text) != entry[f]}
        if theirs:
            entry["tokenizers"] = theirs
        texts.append(entry)
    return {"texts": texts, "sweeps": sweeps(hf)}


def sweeps(hf):
    """Per form, one text of every code point the form changes (Hangul syllables but every 97th
    left out), and for NFC and NFKC also the NFD of every primary composite, with unicodedata's
    output. Code points where the library's tables are older (it changes them otherwise, or orders
    or composes them otherwise) are left out, so that both references agree on the whole text."""
    everything = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    hangul = {chr(cp) for cp in range(0xAC00, 0xAC00 + 11172) if (cp - 0xAC00) % 97}
    out = {}
    for form in FORMS:
        changed = [c for c in everything if unicodedata.normalize(form, c) != c and c not in hangul]
        if form in ("NFC", "NFKC"):
            composites = [c for c in everything if unicodedata.normalize("NFD", c) != c and unicodedata.normalize("NFC", c) == c
                          and c not in hangul]
            changed += [unicodedata.normalize("NFD", c) for c in composites]
        # Each piece on its own between two starters must give the same in both references.
        kept = [c for c in changed if all(unicodedata.normalize(f, "a" + c + "\u0334\u0345b") == hf[f].normalize_str("a" + c + "\u0334\u0345b")
                                          for f in FORMS)]
        text = "".join(kept)
        want = unicodedata.normalize(form, text)
        assert hf[form].normalize_str(text) == want, form
        out[form] = {"text": text, "normalized": want}
        print(f"{form} sweep: {len(kept)} pieces ({len(changed) - len(kept)} where the library differs left out), "
              f"{len(text)} -> {len(want)} code points")
    return out


def main():
    ensure_venv(__file__)
    import tokenizers
    OUT.mkdir(parents=True, exist_ok=True)
    build().save(str(OUT / "tokenizer.json"))
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(OUT / "tokenizer.json"))  # the reference is what the file holds
    config = {"bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>", "unk_token": None, "pad_token": "<PAD>",
              "add_bos_token": True, "add_eos_token": False, "tokenizer_class": "CohereTokenizer"}
    (OUT / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    cases, pairs = reference(tok)
    digit_cases, numeric = digits_reference()
    generator = f"tokenizers {tokenizers.__version__} (HF), scripts/make_cohere_tokenizer_fixtures.py"
    vectors = {"generator": generator, "cases": cases, "pairs": pairs, "digits": digit_cases, "numeric_ranges": numeric}
    (OUT / "vectors.json").write_text(json.dumps(vectors, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    forms = {"generator": f"unicodedata {unicodedata.unidata_version} (Python {sys.version.split()[0]}) and {generator}",
             **form_reference()}
    (OUT / "forms.json").write_text(json.dumps(forms, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    size = sum(f.stat().st_size for f in OUT.iterdir())
    print(f"cohere: {len(cases)} texts, vocab {tok.get_vocab_size()}, {size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
