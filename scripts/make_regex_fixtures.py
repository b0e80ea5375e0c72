#!/usr/bin/env python3
"""Writes tests/fixtures/regex/cases.json, which tests/core/regex_test.cpp reads.

References, never brigade's own code:
- "full": Python's `re.fullmatch(pattern, text, re.ASCII)` (the ASCII flag gives \\d \\w \\s the
  meaning outlines and brigade give them);
- "prefix": whether text is a match or can be extended to one. True when it is a prefix of a
  match re.fullmatch accepted; False when the `regex` package's `fullmatch(..., partial=True)`
  finds no partial match; null (not checked) when `regex` claims one that no known match confirms
  (its partial mode reports false partial matches on some patterns with empty alternatives and
  lazy loops, e.g. 'b' for (?:|a*? +?\|){0,2}). brigade must accept the true ones and refuse the
  false ones;
- "json": for JSON Schema `pattern`, the text of a JSON string (json.dumps) whose decoded value
  re.fullmatch accepts or not;
- "formats": JSON Schema `format` values, labelled by Python's own parsers (datetime, uuid,
  email.headerregistry); brigade's matcher must accept only valid ones and every canonical one.
- "errors": patterns Python's `re` compiles but no finite automaton can match (backreferences,
  lookaround, word boundaries) or that are too large: brigade must refuse them, naming why.

Candidates per pattern: random matches generated from Python's own parse of the pattern
(re._parser), their prefixes, one-character mutations and random strings. Deterministic (seeded).
Runs itself inside .brigade/venv (scripts/python-env.sh) with `regex` installed; CI never runs it.
Run from anywhere: python3 scripts/make_regex_fixtures.py
"""
import datetime
import email.errors
import email.headerregistry
import json
import os
import random
import re
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".brigade" / "venv"
OUT = ROOT / "tests" / "fixtures" / "regex" / "cases.json"


def ensure_venv():
    if Path(sys.prefix).resolve() != VENV.resolve():
        subprocess.check_call(["bash", str(ROOT / "scripts" / "python-env.sh"), "setup"])
        python = VENV / "bin" / "python"
        os.execv(str(python), [str(python), __file__, *sys.argv[1:]])
    try:
        import regex  # noqa: F401
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "regex"])


PATTERNS = [
    r"abc",
    r"a|b|cd",
    r"(ab)*c",
    r"a+b?c*",
    r"\d{3}-\d{4}",
    r"\d{2,4}",
    r"x{3,}",
    r"y{,2}z",
    r"[a-z]+@[a-z]+\.com",
    r"[^abc]+",
    r"[^\n]{1,5}",
    r"\w+\s\w+",
    r"\S+\D\W",
    r".{2}x",
    r"(?:yes|no|maybe)",
    r"(?P<year>\d{4})-(?P<month>0[1-9]|1[0-2])",
    r"^(true|false)$",
    r"\Aabc\Z",
    r"(a|^b)c",
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
    r"\(\d{3}\) \d{3}-\d{4}",
    r"[+*?.()|\[\]{}^$\\-]+",
    r"a{",
    r"a{1,x}",
    r"[]a]+",
    r"[^]a]b",
    r"[a-]+",
    r"\x41\u00e9\U0001F600\101\0",
    r"\t\n\r\f\v\a",
    r"[\d_]+",
    r"[\s\S]{3}",
    r"a*?b+?c??d{2,3}?",
    r"(?#comment)ab",
    r"(a(b(c)?)?)?d",
    r"(ab|a)(bc|c)",
    r"é+ü?",
    r"[à-ÿ]{2}",
    r"[а-я]+",
    r"[^a-zа-я]",
    r"[中文]+字?",
    r"😀|🎉+",
    r"[\u0100-\U0001FFFF]",
    r"[^\x00-\x7f]+",
    r".+",
    r"(\w+\.)*\w+",
    r"((a|b)*a(a|b)){1,3}",
    r"(0|1(01*0)*1)*",
    r"\d+(,\d{3})*",
    r"[0-9a-f]{8}-[0-9a-f]{4}",
    r"(Mon|Tue|Wed)(day)?",
    r"Hello, [A-Z][a-z]+!",
    r"(x|y|)z",
    r"()a",
    r"a{0}b",
    r"(a{2}){2,3}",
    r"[ -~]+",
    r"(a*)*b",
    r"(a|)+b?",
    r"(?:a?){3,5}",
    r".*?x",
    r"x{,}y",
    r"[\w.-]+\.\*",
    r"(a$|b)",
    r".{0,40}!",
    r"[^\"\\]{2,8}",
    r"\d+|\s+|\w+",
]

# Patterns whose JSON-string encoding (JSON Schema "pattern") is tested too: escapes like \" \\ \n
# in the JSON text decode before the regex sees them.
JSON_PATTERNS = [
    r"\d{3}-\d{4}",
    r'[a-z"\\]+',
    r"a\nb|c\td",
    r"[^x]{1,3}",
    r"/path(/\w+)*",
    r"é+ü?",
    r'"quoted"',
    r".*",
]

ERRORS = [  # (pattern, a word the refusal must contain)
    (r"(a)\1", "backreference"),
    (r"(?P<x>a)(?P=x)", "backreference"),
    (r"a(?=b)", "lookaround"),
    (r"a(?!b)", "lookaround"),
    (r"(?<=a)b", "lookaround"),
    (r"(?<!a)b", "lookaround"),
    (r"\bword\b", "word boundar"),
    (r"a\Bb", "word boundar"),
    (r"a^b", "anchor"),
    (r"a$b", "anchor"),
    (r"(a$)+", "anchor"),
    (r"(?i)abc", "flags"),
    (r"(a{1000}){1000}", "too large"),
    (r"[ab]{100000}", "too large"),
    (r"(?>ab)c", "atomic"),
    (r"a*+", "possessive"),
    (r"(a)?(?(1)b|c)", "conditional"),
    (r"\N{DIGIT ONE}", "named"),
]
MALFORMED = [r"(ab", r"ab)", r"[ab", r"*a", r"a**", r"a{3,2}", r"\q", "a\\"]

POOL = ("abcdexyzABXZ0123456789_-.,:;!?@#$%&*()[]{}|/\\'\" \t\n\r\f\v\x0b\a\x00"
        "éüàÿабвя中文字😀🎉\u0100\u00a0")


def in_set(ch, items):
    c = ord(ch)
    negate = False
    hit = False
    for op, av in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            hit |= c == av
        elif name == "RANGE":
            hit |= av[0] <= c <= av[1]
        elif name == "CATEGORY":
            cat = str(av)
            probe = {"CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_WORD": r"\w",
                     "CATEGORY_NOT_WORD": r"\W", "CATEGORY_SPACE": r"\s", "CATEGORY_NOT_SPACE": r"\S"}[cat]
            hit |= re.fullmatch(probe, ch, re.ASCII) is not None
        else:
            raise ValueError(f"unexpected set item {name}")
    return hit != negate


def pick_char(rnd, ok):
    choices = [ch for ch in POOL if ok(ch)]
    if not choices:  # a set over code points the pool lacks: try nearby ones
        choices = [chr(c) for c in range(0x20, 0x3000) if ok(chr(c))][:50]
    return rnd.choice(choices) if choices else ""


def generate(tree, rnd):
    out = []
    for op, av in tree:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(av))
        elif name == "NOT_LITERAL":
            out.append(pick_char(rnd, lambda ch: ord(ch) != av))
        elif name == "ANY":
            out.append(pick_char(rnd, lambda ch: ch != "\n"))
        elif name == "IN":
            out.append(pick_char(rnd, lambda ch: in_set(ch, av)))
        elif name in ("MAX_REPEAT", "MIN_REPEAT"):
            lo, hi, sub = av
            n = rnd.randint(lo, min(hi, lo + 3))
            out.extend(generate(sub, rnd) for _ in range(n))
        elif name == "SUBPATTERN":
            out.append(generate(av[-1], rnd))
        elif name == "BRANCH":
            out.append(generate(rnd.choice(av[1]), rnd))
        elif name == "AT":
            pass
        else:
            raise ValueError(f"unexpected op {name}")
    return "".join(out)


def mutate(s, rnd):
    i = rnd.randint(0, len(s))
    kind = rnd.randrange(3)
    if kind == 0 or not s:
        return s[:i] + rnd.choice(POOL) + s[i:]
    i = min(i, len(s) - 1)
    if kind == 1:
        return s[:i] + s[i + 1:]
    return s[:i] + rnd.choice(POOL) + s[i + 1:]


def candidates(pattern, rnd):
    """(texts, matches): texts to label, and generated strings re.fullmatch accepts."""
    tree = re._parser.parse(pattern, re.ASCII)
    full_re = re.compile(pattern, re.ASCII)
    texts = set()
    matches = [generate(tree, rnd) for _ in range(12)]
    for m in matches:
        texts.add(m)
        for _ in range(2):
            texts.add(m[:rnd.randint(0, len(m))])
            texts.add(mutate(m, rnd))
    for _ in range(6):
        texts.add("".join(rnd.choice(POOL) for _ in range(rnd.randint(0, 6))))
    more = [generate(tree, rnd) for _ in range(200)]  # to confirm prefixes
    return sorted(texts), [m for m in matches + more if full_re.fullmatch(m)]


def label(full_re, partial_re, text, matches):
    full = full_re.fullmatch(text) is not None
    claims = partial_re.fullmatch(text, partial=True) is not None
    known = full or any(m.startswith(text) for m in matches)
    assert claims or not known, ("regex missed a partial match", full_re.pattern, text)
    return {"text": text, "full": full, "prefix": True if known else (False if not claims else None)}


def pattern_cases(rnd):
    import regex
    out = []
    for p in PATTERNS:
        full_re = re.compile(p, re.ASCII)
        partial_re = regex.compile(p, regex.ASCII | regex.VERSION0)
        texts, matches = candidates(p, rnd)
        cases = [label(full_re, partial_re, t, matches) for t in texts]
        assert any(c["full"] for c in cases) and not all(c["full"] for c in cases), p
        out.append({"pattern": p, "cases": cases})
    return out


def random_pattern(rnd, depth=0):
    """A random regular pattern over a small alphabet (so random texts often match), groups
    nested at most two deep."""
    def atom():
        k = rnd.randrange(8 if depth < 2 else 5)
        if k == 0:
            return rnd.choice("ab1 ")
        if k == 1:
            return rnd.choice(["[ab]", "[^a]", "[a-c1]", "\\d", "\\s", "\\w", "\\W", ".", "[^\\n ]", "é"])
        if k == 2:
            return rnd.choice("ab")
        if k == 3:
            return "\\" + rnd.choice(".*+?()[]{}|")
        if k == 4:
            return rnd.choice(["a", "b"]) * rnd.randint(1, 2)
        return "(" + rnd.choice(["", "?:"]) + random_pattern(rnd, depth + 1) + ")"

    def piece():
        a = atom()
        q = rnd.choice(["", "", "", "*", "+", "?", "{2}", "{0,2}", "{1,}", "{,3}", "*?", "+?"])
        return a + q
    branches = ["".join(piece() for _ in range(rnd.randint(0 if depth else 1, 3))) for _ in range(rnd.randint(1, 2))]
    return "|".join(branches)


def random_cases(rnd, n_patterns=100):
    import regex
    out = []
    pool = "ab1 \né.c"
    for _ in range(n_patterns):
        p = random_pattern(rnd)
        full_re = re.compile(p, re.ASCII)
        partial_re = regex.compile(p, regex.ASCII | regex.VERSION0)
        texts = {"".join(rnd.choice(pool) for _ in range(rnd.randint(0, 6))) for _ in range(15)}
        tree = re._parser.parse(p, re.ASCII)
        matches = [generate(tree, rnd) for _ in range(200)]
        matches = [m for m in matches if len(m) <= 14 and full_re.fullmatch(m)]
        for m in matches[:5]:
            texts |= {m, m[:rnd.randint(0, len(m))], mutate(m, rnd)}
        texts = {t for t in texts if len(t) <= 10}  # backtracking in re and regex stays cheap
        cases = [label(full_re, partial_re, t, matches) for t in sorted(texts)]
        out.append({"pattern": p, "cases": cases})
    return out


def json_cases(rnd):
    out = []
    for p in JSON_PATTERNS:
        full_re = re.compile(p, re.ASCII)
        cases = []
        for t in candidates(p, rnd)[0]:
            text = json.dumps(t, ensure_ascii=False)
            if "\\u" in text:  # brigade refuses \u escapes in pattern strings (writes UTF-8)
                continue
            cases.append({"text": text, "full": full_re.fullmatch(t) is not None})
        out.append({"pattern": p, "cases": cases})
    return out


def valid_format(fmt, s):
    try:
        if fmt == "date":
            return re.fullmatch(r"\d{4}-\d{2}-\d{2}", s, re.ASCII) is not None and bool(datetime.date.fromisoformat(s))
        if fmt == "time":
            return re.fullmatch(r"\d\d:\d\d:\d\d.*", s, re.ASCII) is not None and \
                datetime.time.fromisoformat(s).tzinfo is not None
        if fmt == "date-time":
            return re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d.*", s, re.ASCII) is not None and \
                datetime.datetime.fromisoformat(s).tzinfo is not None
        if fmt == "uuid":
            return len(s) == 36 and all(s[i] == "-" for i in (8, 13, 18, 23)) and bool(uuid.UUID(s))
        if fmt == "email":
            a = email.headerregistry.Address(addr_spec=s)
            return a.addr_spec == s and "@" in s and s.isascii()
    except (ValueError, IndexError, email.errors.HeaderParseError):
        return False
    raise ValueError(fmt)


CANONICAL = {
    "date": ["2024-02-29", "2000-02-29", "2023-12-31", "1999-01-01", "2024-04-30"],
    "time": ["12:34:56Z", "00:00:00+02:00", "23:59:59.123-05:30", "08:15:00.5Z"],
    "date-time": ["2024-01-15T12:34:56Z", "2024-02-29T00:00:00.001+01:00", "1970-01-01T00:00:00-08:00"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "A987FBC9-4BED-3078-CF07-9141BA07C9F3"],
    "email": ["alice@example.com", "first.last+tag@sub.example.org", "x_y-z@a-b.co"],
}
NOT_VALID = {
    "date": ["2023-02-29", "1900-02-29", "2024-04-31", "2024-13-01", "2024-00-10", "24-01-01", "2024-1-01"],
    "time": ["24:00:00Z", "12:60:00Z", "12:00:00", "12:00Z", "12:00:00+25:00"],
    "date-time": ["2024-01-15 12:34:56Z", "2024-01-15T12:34:56", "2024-02-30T00:00:00Z"],
    "uuid": ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "g23e4567-e89b-12d3-a456-426614174000"],
    "email": ["alice", "@example.com", "alice@", "a..b@example.com", "alice@@example.com", ".a@example.com"],
}


def shaped(fmt, rnd):
    """Random values in the format's shape with fields anywhere in range (leap days, day 31 of
    short months, hour 24, offsets...): the calendar and clock rules are the reference's."""
    def d():
        y = rnd.choice([rnd.randint(0, 9999), rnd.choice([1900, 2000, 2024, 2023, 2100, 400, 4, 0])])
        return f"{y:04d}-{rnd.randint(0, 13):02d}-{rnd.choice([rnd.randint(0, 32), 28, 29, 30, 31]):02d}"

    def t():
        frac = rnd.choice(["", "." + "7" * rnd.randint(1, 10)])
        off = rnd.choice(["Z", "z", "", f"{rnd.choice('+-')}{rnd.randint(0, 25):02d}:{rnd.randint(0, 61):02d}"])
        return f"{rnd.randint(0, 25):02d}:{rnd.randint(0, 61):02d}:{rnd.randint(0, 61):02d}{frac}{off}"
    if fmt == "date":
        return d()
    if fmt == "time":
        return t()
    if fmt == "date-time":
        return d() + rnd.choice("TTt ") + t()
    if fmt == "uuid":
        return str(uuid.UUID(int=rnd.getrandbits(128)))
    return None


def format_cases(rnd):
    out = []
    for fmt, good in CANONICAL.items():
        texts = {(t, True) for t in good} | {(t, False) for t in NOT_VALID[fmt]}
        for _ in range(60 if fmt != "email" else 0):
            texts.add((shaped(fmt, rnd), False))
        for t in good:
            for _ in range(8):
                texts.add((mutate(t, rnd), False))
        for t, canonical in sorted(texts):
            valid = valid_format(fmt, t)
            assert valid or not canonical, (fmt, t)
            out.append({"format": fmt, "text": t, "valid": valid, "canonical": canonical})
    return out


def main():
    ensure_venv()
    rnd = random.Random(20261201)
    for p, _ in ERRORS:
        re.compile(p)  # Python accepts them: the refusal is brigade's, by design
    doc = {
        "patterns": pattern_cases(rnd) + random_cases(rnd),
        "json": json_cases(rnd),
        "formats": format_cases(rnd),
        "errors": [{"pattern": p, "reason": why} for p, why in ERRORS],
        "malformed": MALFORMED,
    }
    for p in MALFORMED:
        try:
            re.compile(p)
            raise AssertionError(f"Python compiles {p!r}")
        except re.error:
            pass
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(doc, ensure_ascii=False, indent=0, separators=(",", ":")) + "\n", encoding="utf-8")
    n = sum(len(p["cases"]) for p in doc["patterns"]) + sum(len(p["cases"]) for p in doc["json"])
    unknown = sum(c["prefix"] is None for p in doc["patterns"] for c in p["cases"])
    print(f"wrote {OUT} ({n} pattern cases, {unknown} prefixes left unchecked, {len(doc['formats'])} format cases)")


if __name__ == "__main__":
    main()
