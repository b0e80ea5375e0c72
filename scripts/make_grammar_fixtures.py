#!/usr/bin/env python3
"""Writes tests/fixtures/grammar/llamacpp.json, which tests/core/grammar_llamacpp_test.cpp reads.

The reference is llama.cpp's own grammar sampler (llama_sampler_init_grammar, through
llama-cpp-python), never brigade's code. For each of two vocabulary-only GGUF files from
../shared/testdata/tokenizers (Llama 2's SentencePiece vocabulary and GPT-2's byte-level BPE one)
and each grammar below (llama.cpp's grammars/ json, arithmetic, list, chess, japanese-like and
english-like ones as its README shows them, plus repetition bounds, Unicode classes, nesting, ...),
it walks: apply the sampler to every token id, record the allowed ids and whether EOS is allowed,
pick an allowed token (seeded; half the time a multi-byte one), accept it, repeat. An allowed set
is stored as its count and FNV-1a hash (64-bit, over the sorted ids as little-endian int32) with
the ids themselves when there are few, split into the tokens after which the text ends on a whole
character and those after which it ends mid-character (llama.cpp judges the latter by a range
check that brigade refines for negated classes: see core/grammar.h). Ids of control tokens (<s>: llama.cpp
matches their text "<s>") are recorded apart: brigade never lets a grammar
emit a special token as text.

Also: strings (GPT-2 vocabulary, tokenized by llama.cpp) labelled whole match / prefix / neither by
feeding their tokens to the sampler, and grammars llama.cpp refuses (brigade must refuse them too).

Needs llama-cpp-python: the venv bench/compare/vs_llamacpp.py builds (.brigade/llamacpp-venv, or
$LLAMACPP_VENV); run that script once to build it (~10 minutes on 2 cores), or
`python3 -m venv .brigade/llamacpp-venv && .brigade/llamacpp-venv/bin/pip install llama-cpp-python numpy`.
Deterministic. Run: python3 scripts/make_grammar_fixtures.py (BRIGADE_TESTDATA=DIR when the test
data is not at ../shared/testdata).
"""
import ctypes
import json
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("LLAMACPP_VENV", ROOT / ".brigade" / "llamacpp-venv"))
VOCABS = Path(os.environ.get("BRIGADE_TESTDATA", ROOT.parent / "shared" / "testdata")) / "tokenizers"
OUT = ROOT / "tests" / "fixtures" / "grammar" / "llamacpp.json"

# (name, grammar, flags): "walks" per vocabulary, "partial_ids" to store every mid-character id.
GRAMMARS = [
    ("json", r'''root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
''', {"walks": 4}),
    ("arithmetic", r'''root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
''', {}),
    ("list", r'''root ::= item+

# Excludes various line break characters
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
''', {"partial_ids": True, "walks": 1}),
    ("chess", r'''root ::= (
    # it must start with the characters "1. " followed by a sequence
    # of characters that match the `move` rule, followed by a space, followed
    # by another move, and then a newline
    "1. " move " " move "\n"

    # it's followed by one or more subsequent moves, numbered with one or two digits
    ([1-9] [0-9]? ". " move " " move "\n")+
)

# `move` is an abstract representation, which can be a pawn, nonpawn, or castle.
# The `[+#]?` denotes the possibility of checking or mate signs after moves
move ::= (pawn | nonpawn | castle) [+#]?

pawn ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBRQ])?
nonpawn ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle ::= "O-O" "-O"?
''', {}),
    ("japanese", r'''root        ::= jp-char+ ([ \t\n] jp-char+)*
jp-char     ::= hiragana | katakana | punctuation | cjk
hiragana    ::= [ぁ-ゟ]
katakana    ::= [ァ-ヿ]
punctuation ::= [、-〾]
cjk         ::= [一-鿿]
''', {}),
    ("english", r'''root        ::= en-char+ ([ \t\n] en-char+)*
en-char     ::= letter | digit | punctuation
letter      ::= [a-zA-Z]
digit       ::= [0-9]
punctuation ::= [!"#$%&'()*+,-./:;<=>?@[\\\]^_`{|}~]
''', {}),
    ("bounds", r'''root ::= [a-c]{2,4} "-" [0-9]{3} ("." [a-z]{1,})? "!"{0,2}''', {}),
    ("choice", r'''root ::= "yes" | "no" | "maybe" | "yes, but"''', {}),
    ("email", r'''root ::= [a-z0-9.]+ "@" [a-z]+ ("." [a-z]{2,3})+''', {}),
    ("any-char", r'''root ::= "<" .{0,8} ">"''', {}),
    ("quoted", r'''root ::= "\"" [^"\\]* "\""''', {}),
    ("emoji-latin1", r'''root ::= ([\U0001F600-\U0001F64F] | [\u00C0-\u00FF])+ "!"''', {}),
    ("parens", r'''root ::= paren+
paren ::= "(" paren* ")"''', {}),
    ("csv", r'''root ::= row ("\n" row){0,3}
row ::= cell ("," cell)*
cell ::= [a-z0-9 ]*''', {}),
    ("int-list", r'''root ::= "[" ws (num (ws "," ws num)*)? ws "]"
num ::= "-"? [1-9] [0-9]* | "0"
ws ::= [ ]?''', {}),
    ("optional", r'''root ::= ("a" | "") ("b"? "c")* "."''', {}),
    ("cyrillic-greek", r'''root ::= [а-я]+ (" " [α-ω]+)? "."''', {}),
    ("spaces", r'''root ::= " "* word (" "+ word)* " "*
word ::= [A-Za-z]+''', {}),
    ("date", r'''root ::= [0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ([0-2] [0-9] | "3" [01])''', {}),
    ("boolean", r'''root ::= expr
expr ::= atom (" " ("and" | "or") " " atom)*
atom ::= "true" | "false" | "not " atom | "(" expr ")"''', {}),
    ("escapes", r'''root ::= "\t" [\x20-\x7E]{1,5} "\\" "\x41" [\[\]\-]''', {}),
    ("multiline", '''root ::= greeting
  # comment between lines
greeting ::= (
    "hello"   # first
  | "hi"
  ) " " name |
  "bye"
name ::= [A-Z] [a-z]*
''', {}),
    ("negated-unicode", r'''root ::= [^\u00e9\u00e8\u4e00-\u9fff]{1,6} "."''', {"partial_ids": True, "walks": 1}),
    ("tag", r'''root ::= "<" name ">" [^<]* "</" name ">"
name ::= [a-z]+''', {}),
    ("key-values", r'''root ::= (pair "\n"){1,3}
pair ::= key "=" value
key ::= [a-z_]+
value ::= [0-9]+ | "\"" [^"\n]* "\""''', {}),
]

# Strings per grammar, labelled by llama.cpp (GPT-2 vocabulary).
STRINGS = {
    "json": ['{"a": [1, 2.5e3, true, null], "b": {"c": "d\\n\\u00e9"}}', '{"a": 01}', '{"a":', '[1]', '{}', '{"é": "ü"}'],
    "arithmetic": ["1+2=3\n", "a*(b+c)= x\n9=9\n", "1+=2\n", "(1"],
    "list": ["- one\n- two\n", "- \n", "-one\n", "- é\u00e8\n"],
    "chess": ["1. e4 e5\n2. Nf3 Nc6\n", "1. e4 e5\n", "1. O-O-O+ Qxd8#\n12. a1=Q h8\n", "1. e9 e5\n"],
    "japanese": ["こんにちは 世界", "カタカナ、ひらがな", "abc", "日本語\n"],
    "bounds": ["ab-123", "abca-123.xyz!!", "a-123", "abcab-123", "ab-123!!!"],
    "choice": ["yes", "yes, but", "maybe", "no!", "ye"],
    "any-char": ["<>", "<héllo wö>", "<123456789>", "<😀>"],
    "emoji-latin1": ["😀é!", "ÀÿÀ!", "a!", "😀"],
    "parens": ["()", "(()())()", "(()", ")("],
    "int-list": ["[1, 2,3 ,-4]", "[]", "[01]", "[ 0 ]"],
    "cyrillic-greek": ["привет αβγ.", "привет.", "привет α", "hello."],
    "date": ["2024-02-29", "2024-13-01", "2024-12-31", "2024-1-01"],
    "negated-unicode": ["abc.", "é.", "ü.", "中.", "abcdefg."],
    "multiline": ["hello Bob", "hi Al", "bye", "hello bob", "bye now"],
}

# Grammars llama.cpp refuses (brigade must refuse them too) and ones it takes (so must brigade).
PARSE_CASES = [
    'root ::= expr\nexpr ::= expr "+" "1" | "1"',
    'root ::= a',
    'item ::= "a"',
    'root ::= "a',
    'root ::= [a-z',
    'root ::= "\\q"',
    'root ::= ("a" | "")*',
    'root ::= a\na ::= b "x"\nb ::= a | "y"',
    'root ::= "a" )',
    'root = "a"',
    'root ::= "a"{2001}',
    'root ::= "a" "b"\n  "c"',
    'root ::= "a" |\n  "b"',
    'root ::= ("a"\n  "b")',
    'root ::= "a"{0,5000}',
]


def ensure_venv():
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    python = VENV / "bin" / "python"
    if not python.exists():
        sys.exit(f"no llama-cpp-python venv at {VENV}: run bench/compare/vs_llamacpp.py once (it builds "
                 f"it), or set LLAMACPP_VENV to one with llama-cpp-python and numpy")
    os.execv(str(python), [str(python), __file__, *sys.argv[1:]])


def fnv(ids):
    h = 0xcbf29ce484222325
    for i in ids:
        for b in int(i).to_bytes(4, "little", signed=True):
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def remaining(data, need=0):
    """Continuation bytes still due after `data` (0: it ends on a whole character), counted as
    llama.cpp's decoder counts them (F8-FF lead four-byte sequences), starting `need` bytes short."""
    for b in data:
        if need:
            need -= 1
        elif b >= 0xC0:
            need = 3 if b >= 0xF0 else 2 if b >= 0xE0 else 1
    return need


class Vocab:
    def __init__(self, L, np, path):
        self.L, self.np = L, np
        params = L.llama_model_default_params()
        params.vocab_only = True
        self.model = L.llama_model_load_from_file(str(path).encode(), params)
        if not self.model:
            sys.exit(f"llama.cpp cannot load {path}")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n = L.llama_vocab_n_tokens(self.vocab)
        buf = ctypes.create_string_buffer(256)
        self.pieces = []
        for i in range(self.n):
            k = L.llama_token_to_piece(self.vocab, i, buf, 256, 0, True)
            self.pieces.append(buf.raw[:k])
        # mid[need][id]: the text ends mid-character after this token, from `need` bytes short
        self.mid = [[remaining(p, need) > 0 for p in self.pieces] for need in range(4)]
        control = 8  # LLAMA_TOKEN_ATTR_CONTROL (<unk> is text "<unk>" to both)
        self.eog = [i for i in range(self.n) if L.llama_vocab_is_eog(self.vocab, i)]
        self.special = [i for i in range(self.n) if L.llama_vocab_get_attr(self.vocab, i) & control or i in self.eog]
        self.special_set = set(self.special)
        self.data = np.zeros(self.n, dtype=np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)]))

    def sampler(self, grammar):
        s = self.L.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        return s or None

    def allowed(self, smpl):
        d = self.data
        d["id"] = self.np.arange(self.n, dtype=self.np.int32)
        d["logit"] = 0
        arr = self.L.llama_token_data_array(data=d.ctypes.data_as(self.L.llama_token_data_p), size=self.n, selected=-1, sorted=False)
        self.L.llama_sampler_apply(smpl, ctypes.byref(arr))
        ok = self.np.isfinite(d["logit"])
        return [int(i) for i in d["id"][ok]]

    def tokenize(self, text):
        raw = text.encode()
        out = (self.L.llama_token * (len(raw) + 8))()
        n = self.L.llama_tokenize(self.vocab, raw, len(raw), out, len(out), False, False)
        return list(out[:n])


def id_set(ids, keep_ids):
    ids = sorted(ids)
    entry = {"n": len(ids), "hash": fnv(ids)}
    if keep_ids or len(ids) <= 48:
        entry["ids"] = ids
    return entry


def walk(v, grammar, flags, rng):
    smpl = v.sampler(grammar)
    text, steps = b"", []
    for _ in range(8 if flags.get("partial_ids") else 20):
        allowed = v.allowed(smpl)
        eos = any(i in allowed for i in v.eog)
        special = sorted(i for i in allowed if i in v.special_set and i not in v.eog)
        plain = [i for i in allowed if i not in v.special_set]
        mid = v.mid[remaining(text)]
        whole = [i for i in plain if not mid[i]]
        partial = [i for i in plain if mid[i]]
        step = {"eos": eos, "mid": remaining(text) > 0, "whole": id_set(whole, False),
                "partial": id_set(partial, flags.get("partial_ids", False)), "special": special}
        steps.append(step)
        if not plain or (eos and rng.random() < 0.15):
            step["token"] = -1
            break
        longer = [i for i in plain if len(v.pieces[i]) >= 2]
        token = rng.choice(longer if longer and rng.random() < 0.5 else plain)
        step["token"] = token
        v.L.llama_sampler_accept(smpl, token)
        text += v.pieces[token]
    v.L.llama_sampler_free(smpl)
    return {"text_hex": text.hex(), "steps": steps}


def label(v, grammar, text):
    smpl = v.sampler(grammar)
    result = "prefix"
    for t in v.tokenize(text):
        if t not in set(v.allowed(smpl)):
            result = "neither"
            break
        v.L.llama_sampler_accept(smpl, t)
    else:
        if any(i in v.allowed(smpl) for i in v.eog):
            result = "match"
    v.L.llama_sampler_free(smpl)
    return result


def main():
    ensure_venv()
    import llama_cpp as L
    import numpy as np
    L.llama_backend_init()
    doc = {"generator": "scripts/make_grammar_fixtures.py", "llama_cpp_python": L.__version__, "vocabs": [], "strings": [], "parse": []}
    vocabs = {}
    for name in ("llama-spm", "gpt-2"):
        v = Vocab(L, np, VOCABS / f"ggml-vocab-{name}.gguf")
        vocabs[name] = v
        entry = {"file": f"ggml-vocab-{name}.gguf", "n_vocab": v.n, "eog": v.eog, "special": v.special, "grammars": []}
        for gname, grammar, flags in GRAMMARS:
            rng = random.Random(f"{name}/{gname}")
            walks = [walk(v, grammar, flags, rng) for _ in range(flags.get("walks", 3))]
            entry["grammars"].append({"name": gname, "partial_ids": bool(flags.get("partial_ids")), "walks": walks})
            print(f"{name} {gname}: {sum(len(w['steps']) for w in walks)} steps", file=sys.stderr)
        doc["vocabs"].append(entry)
    grammars = {g[0]: g[1] for g in GRAMMARS}
    for gname, texts in STRINGS.items():
        for text in texts:
            doc["strings"].append({"grammar": gname, "text": text, "label": label(vocabs["gpt-2"], grammars[gname], text)})
    for text in PARSE_CASES:
        s = vocabs["gpt-2"].sampler(text)
        doc["parse"].append({"grammar": text, "llama_cpp_accepts": s is not None})
        if s:
            L.llama_sampler_free(s)
    doc["grammars"] = [{"name": g[0], "text": g[1]} for g in GRAMMARS]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
